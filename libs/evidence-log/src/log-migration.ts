import { CairnError, ChainIdSchema } from '@cairn/contracts';
import { ChainVerifier } from '@cairn/evidence';
import { AckPolicy, DeliverPolicy, jetstreamManager, JetStreamApiCodes, JetStreamApiError, PubHeaders } from '@nats-io/jetstream';
import type { ConsumerConfig, JetStreamManager, StreamConfig, StreamInfo } from '@nats-io/jetstream';
import { delay, headers } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { DirectBatchReader } from './direct-batch.reader.js';
import type { DirectMessage } from './direct-batch.reader.js';
import { resolveEvidenceLogOptions } from './evidence-log.options.js';
import type { EvidenceLogOptions, ResolvedEvidenceLogOptions } from './evidence-log.options.js';
import { chainSubjects, evidenceLayoutProblem, evidenceStreamConfig, evidenceSubject, isSubjectType, MIGRATING_FROM_KEY, SUBJECT_LAYOUT, SUBJECT_LAYOUT_KEY } from './evidence-stream.config.js';
import { JetStreamAckPublisher } from './jetstream-ack.publisher.js';
import type { PublishOutcome } from './jetstream-ack.publisher.js';

/*
 * `cairn log migrate` (docs/adr/0012): a log written by the earlier layout — one subject per chain,
 * `<prefix>.<chain id>` — copied into the current one, `<prefix>.<chain id>.<type>`, under the same
 * stream name. NATS cannot rename a stream, so:
 *
 *   1. every chain of the stream is verified (hash links, seqs, one chain per subject); a chain that
 *      does not verify stops the migration before anything changes (E_CHAIN_BROKEN);
 *   2. the stream is copied by the server into a backup (`<name>_LAYOUT1`, sourced, no subjects of
 *      its own) holding the positions of its durable consumers, and deleted once the copy is whole;
 *   3. the stream is made again in the current layout, marked as being filled (so no service opens
 *      it), and every message of the backup is appended to it in order — verified again as it is
 *      copied, with its message id, chain seq and trace headers, each guarded by the chain's
 *      compare-and-set — so message k of the new stream is message k of the old one;
 *   4. the durable consumers are made again at their positions (the projector's is left to the
 *      projector, which starts over and skips what it has projected), and the mark is removed.
 *
 * A migration that stops after step 2 is run again: it finds the backup, empties the marked stream
 * and copies again. The backup is kept; the operator deletes it once satisfied.
 */

export interface MigrationOptions extends EvidenceLogOptions {
  /** Durable consumers not to make again (the projector's: it starts from the first message and skips what it has). */
  leaveDurables?: readonly string[];
  progress?: (line: string) => void;
}

export interface MigrationResult {
  /** `migrated`: copied now; `current`: the stream was already in this layout (nothing done). */
  outcome: 'migrated' | 'current';
  stream: string;
  backup: string | null;
  receipts: number;
  chains: number;
  /** Durable consumers made again at their positions, by name. */
  durables: Record<string, number>;
}

interface DurablePosition {
  name: string;
  /** The next stream seq it is to be delivered. */
  next: number;
  config: Partial<ConsumerConfig>;
}

const BACKUP_OF_KEY = 'cairn.layout1_backup_of';
const DURABLES_KEY = 'cairn.layout1_durables';
const READ_BATCH = 1000;
/** Appends in flight while copying: each is guarded, so order is kept by the chain's compare-and-set. */
const COPY_WINDOW = 256;

export function backupStreamName(stream: string): string {
  return `${stream.slice(0, 64 - '_LAYOUT1'.length)}_LAYOUT1`;
}

export async function migrateEvidenceLog(nc: NatsConnection, options: MigrationOptions): Promise<MigrationResult> {
  const resolved = resolveEvidenceLogOptions(options);
  const progress = options.progress ?? (() => undefined);
  const jsm = await jetstreamManager(nc);
  const name = resolved.stream;
  const backup = backupStreamName(name);
  let info = await streamInfo(jsm, name);
  const backupInfo = await streamInfo(jsm, backup);

  if (info !== null && evidenceLayoutProblem(info.config) === null) {
    return { outcome: 'current', stream: name, backup: backupInfo === null ? null : backup, receipts: info.state.messages, chains: 0, durables: {} };
  }
  const migrating = info?.config.metadata?.[MIGRATING_FROM_KEY];
  if (info !== null && migrating === undefined) {
    if (info.config.metadata?.[SUBJECT_LAYOUT_KEY] !== undefined) {
      throw new CairnError('E_UNAVAILABLE', `stream ${name}: ${evidenceLayoutProblem(info.config) ?? 'an unknown layout'}`);
    }
    if (backupInfo !== null) {
      throw new CairnError('E_CONFLICT', `stream ${backup} exists already: an earlier migration's backup? Delete it or keep it elsewhere first`, { backup });
    }
    // 1. Verify before anything changes.
    progress(`verifying every chain of ${name}…`);
    const verified = await copyChains(nc, name, resolved, info.state.last_seq, null);
    progress(`${verified.receipts} receipts on ${verified.chains} chains verify`);
    // 2. The server's copy, with the durables' positions; then the old stream goes.
    const durables = await durablePositions(jsm, name);
    await makeBackup(jsm, name, backup, info, durables, progress);
    await jsm.streams.delete(name);
    info = null;
  } else if (info === null && backupInfo === null) {
    throw new CairnError('E_NOT_FOUND', `there is no stream ${name} to migrate`);
  }

  // 3. (Again) from the backup into a stream of this layout, marked until it is whole.
  const source = (await streamInfo(jsm, backup))!;
  if (info !== null) await jsm.streams.delete(name);
  await jsm.streams.add({ ...evidenceStreamConfig(resolved), metadata: { [SUBJECT_LAYOUT_KEY]: SUBJECT_LAYOUT, [MIGRATING_FROM_KEY]: backup } });
  progress(`copying ${source.state.messages} receipts into ${name} (subjects <prefix>.<chain id>.<type>)…`);
  const copied = await copyChains(nc, backup, resolved, source.state.last_seq, name);
  const now = (await streamInfo(jsm, name))!;
  if (now.state.messages !== source.state.messages || now.state.last_seq !== source.state.last_seq) {
    throw new CairnError('E_UNAVAILABLE', `the copy holds ${now.state.messages} messages up to seq ${now.state.last_seq}, the backup ${source.state.messages} up to ${source.state.last_seq}: run it again`);
  }
  // 4. The durables at their positions, then the stream is opened to everyone.
  const positions = JSON.parse(source.config.metadata?.[DURABLES_KEY] ?? '[]') as DurablePosition[];
  const leave = new Set(options.leaveDurables ?? []);
  const durables: Record<string, number> = {};
  for (const durable of positions.filter((d) => !leave.has(d.name))) {
    await jsm.consumers.add(name, {
      ...durable.config,
      durable_name: durable.name,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: durable.next <= 1 ? DeliverPolicy.All : DeliverPolicy.StartSequence,
      ...(durable.next <= 1 ? {} : { opt_start_seq: durable.next }),
    });
    durables[durable.name] = durable.next;
  }
  const { [MIGRATING_FROM_KEY]: _done, ...metadata } = now.config.metadata ?? {};
  await jsm.streams.update(name, { ...now.config, metadata: { ...metadata, [SUBJECT_LAYOUT_KEY]: SUBJECT_LAYOUT } });
  progress(`${name} holds the current layout; the earlier one is kept in ${backup}`);
  return { outcome: 'migrated', stream: name, backup, receipts: copied.receipts, chains: copied.chains, durables };
}

/**
 * Reads `from` in stream order (earlier layout: `<prefix>.<chain id>`), verifying each chain as it
 * goes; with `into`, appends each message there under its type's subject. E_CHAIN_BROKEN names the
 * first message that does not verify.
 */
async function copyChains(
  nc: NatsConnection,
  from: string,
  options: ResolvedEvidenceLogOptions,
  lastSeq: number,
  into: string | null,
): Promise<{ receipts: number; chains: number }> {
  const reader = new DirectBatchReader(nc, from, 30_000);
  const publisher = into === null ? null : new JetStreamAckPublisher(nc, 30_000);
  const verifiers = new Map<string, ChainVerifier>();
  /** Each chain's last stream seq in the copy (its compare-and-set). */
  const lastOf = new Map<string, number>();
  const inFlight = new Set<Promise<void>>();
  const copy: { failure: CairnError | null } = { failure: null };
  let receipts = 0;
  let copiedSeq = 0;
  try {
    for (let next = 1; next <= lastSeq; ) {
      const outcome = await reader.read(`${options.subjectPrefix}.>`, next, READ_BATCH);
      if (outcome.kind === 'failed') throw new CairnError('E_UNAVAILABLE', `cannot read ${from}: ${outcome.reason}`);
      if (outcome.messages.length === 0) break;
      for (const m of outcome.messages) {
        if (m.streamSeq > lastSeq) break;
        const { chainId, type } = checked(m, options.subjectPrefix, verifiers);
        receipts += 1;
        if (publisher === null || into === null) continue;
        copiedSeq += 1;
        if (m.streamSeq !== copiedSeq) {
          throw new CairnError('E_UNAVAILABLE', `${from} has a gap before stream seq ${m.streamSeq}: the copy could not keep its positions`);
        }
        const hdrs = headers();
        for (const key of [PubHeaders.MsgIdHdr, 'Cairn-Chain-Seq', 'traceparent']) {
          const value = m.headers.get(key);
          if (value !== '') hdrs.set(key, value);
        }
        hdrs.set(PubHeaders.ExpectedLastSubjectSequenceHdr, String(lastOf.get(chainId) ?? 0));
        hdrs.set(PubHeaders.ExpectedLastSubjectSequenceSubjectHdr, chainSubjects(options.subjectPrefix, chainId));
        lastOf.set(chainId, m.streamSeq);
        const seq = m.streamSeq;
        const task = publisher.publish(evidenceSubject(options.subjectPrefix, chainId, type), m.data, hdrs).then((ack: PublishOutcome) => {
          if (ack.kind !== 'stored' || ack.duplicate || ack.seq !== seq) {
            copy.failure ??= new CairnError('E_UNAVAILABLE', `copying stream seq ${seq} into ${into} failed: ${JSON.stringify(ack)}`);
          }
        });
        inFlight.add(task);
        void task.finally(() => inFlight.delete(task));
        while (inFlight.size >= COPY_WINDOW) await Promise.race(inFlight);
        if (copy.failure !== null) throw copy.failure;
      }
      const last = outcome.messages.at(-1)!;
      next = last.streamSeq + 1;
      if (outcome.pending === 0) break;
    }
    await Promise.all(inFlight);
    if (copy.failure !== null) throw copy.failure;
  } finally {
    reader.close();
    publisher?.close();
  }
  for (const [chainId, verifier] of verifiers) {
    const result = verifier.result();
    if (!result.ok) throw chainBroken(from, chainId, result.firstBadSeq, result.message);
  }
  return { receipts, chains: verifiers.size };
}

/** The chain and type of an earlier-layout message, its receipt pushed through its chain's verifier. */
function checked(m: DirectMessage, prefix: string, verifiers: Map<string, ChainVerifier>): { chainId: string; type: string } {
  const chainId = m.subject.startsWith(`${prefix}.`) ? m.subject.slice(prefix.length + 1) : '';
  if (!ChainIdSchema.safeParse(chainId).success) {
    throw new CairnError('E_CHAIN_BROKEN', `stream seq ${m.streamSeq} is on ${m.subject}, which names no chain: the log cannot be migrated as it is`, { streamSeq: m.streamSeq });
  }
  let receipt: unknown;
  try {
    receipt = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(m.data));
  } catch {
    throw chainBroken(m.subject, chainId, null, `stream seq ${m.streamSeq} is not JSON`);
  }
  let verifier = verifiers.get(chainId);
  if (verifier === undefined) verifiers.set(chainId, (verifier = new ChainVerifier({ chainId })));
  if (!verifier.push(receipt)) {
    const result = verifier.result();
    throw chainBroken(m.subject, chainId, result.ok ? null : result.firstBadSeq, result.ok ? '' : result.message);
  }
  const type = (receipt as { type?: unknown }).type;
  if (typeof type !== 'string' || !isSubjectType(type)) throw chainBroken(m.subject, chainId, null, `stream seq ${m.streamSeq} has no receipt type`);
  return { chainId, type };
}

function chainBroken(where: string, chainId: string, seq: number | null, message: string): CairnError {
  return new CairnError('E_CHAIN_BROKEN', `chain ${chainId} in ${where} does not verify${seq === null ? '' : ` at seq ${seq}`}: ${message}; the log cannot be migrated as it is`, {
    chainId,
    ...(seq === null ? {} : { firstBadSeq: seq }),
  });
}

async function durablePositions(jsm: JetStreamManager, stream: string): Promise<DurablePosition[]> {
  const found: DurablePosition[] = [];
  for await (const c of jsm.consumers.list(stream)) {
    if (!c.config.durable_name) continue;
    const { ack_wait, max_ack_pending, max_deliver, description, filter_subject, filter_subjects } = c.config;
    found.push({
      name: c.config.durable_name,
      next: c.ack_floor.stream_seq + 1,
      config: { ack_wait, max_ack_pending, max_deliver, description, ...(filter_subjects ? { filter_subjects } : filter_subject ? { filter_subject } : {}) },
    });
  }
  return found;
}

/** The server's copy of `name` into `backup` (sourced, then cut loose), holding the durables' positions. */
async function makeBackup(jsm: JetStreamManager, name: string, backup: string, info: StreamInfo, durables: DurablePosition[], progress: (line: string) => void): Promise<void> {
  progress(`copying ${name} into ${backup}…`);
  const config: Partial<StreamConfig> & { name: string } = {
    name: backup,
    description: `Cairn evidence log ${name} in the earlier subject layout (one subject per chain), kept by cairn log migrate.`,
    storage: 'file',
    retention: 'limits',
    num_replicas: info.config.num_replicas,
    deny_delete: true,
    deny_purge: true,
    allow_direct: true,
    sources: [{ name }],
    metadata: { [BACKUP_OF_KEY]: name, [DURABLES_KEY]: JSON.stringify(durables) },
  };
  await jsm.streams.add(config);
  for (let waited = 0; ; waited += 100) {
    const copy = await jsm.streams.info(backup);
    if (copy.state.messages === info.state.messages && copy.state.last_seq === info.state.last_seq) break;
    if (waited > 120_000) throw new CairnError('E_UNAVAILABLE', `${backup} holds ${copy.state.messages} of ${info.state.messages} messages after two minutes; ${name} is untouched`);
    await delay(100);
  }
  const copied = await jsm.streams.info(backup);
  const { sources: _sources, ...standalone } = copied.config;
  await jsm.streams.update(backup, { ...standalone, sources: [] });
}

async function streamInfo(jsm: JetStreamManager, name: string): Promise<StreamInfo | null> {
  try {
    return await jsm.streams.info(name);
  } catch (error) {
    if (error instanceof JetStreamApiError && error.code === JetStreamApiCodes.StreamNotFound) return null;
    throw error;
  }
}
