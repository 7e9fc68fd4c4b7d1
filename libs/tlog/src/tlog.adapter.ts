import { createHash } from 'node:crypto';
import { replicasHint, whileLeaderless } from '@cairn/config';
import { CairnError, isCairnError } from '@cairn/contracts';
import { DirectBatchReader } from '@cairn/evidence-log';
import { isWrongRevision, kvCall, openBucket } from '@cairn/operational';
import { MerkleTree, parseCheckpoint, parseNote } from '@cairn/transparency';
import type { Checkpoint, TreeHasher } from '@cairn/transparency';
import { jetstream, jetstreamManager, JetStreamApiCodes, JetStreamApiError } from '@nats-io/jetstream';
import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import type { KV } from '@nats-io/kv';
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import { checkpointRequestSubject, leafSubject, leafSubjects, MAX_LEAF_BYTES, resolveTlogOptions, tlogStreamConfig, tlogStreamProblems } from './tlog-stream.config.js';
import type { ResolvedTlogOptions, TlogOptions } from './tlog-stream.config.js';

/*
 * The log of seal heads in JetStream (ADR 0020): one stream of leaves, one message per sealed
 * chain on `<prefix>.leaf.<chain id>`, each appended with two compare-and-sets — the stream's last
 * seq (so two appenders cannot fork it: a leaf's index is its seq minus one) and its chain
 * subject's last seq 0 (so a chain has one leaf, however often its seal is delivered). Beside it
 * a KV bucket holds the latest signed checkpoint. The tree's hashes are not stored: each process
 * keeps them in memory (a MerkleTree), loaded once from the leaves and extended as they come.
 */

const LEAF_PREFIX = Uint8Array.of(0);
const NODE_PREFIX = Uint8Array.of(1);

/** node:crypto's SHA-256, synchronous: loading a large log at boot is hashing bound. */
const NODE_HASHER: TreeHasher = {
  leaf: (data) => new Uint8Array(createHash('sha256').update(LEAF_PREFIX).update(data).digest()),
  node: (left, right) => new Uint8Array(createHash('sha256').update(NODE_PREFIX).update(left).update(right).digest()),
};

const CHECKPOINT_KEY = 'latest';
const APPEND_ATTEMPTS = 32;

export interface Leaf {
  index: number;
  data: Uint8Array;
}

export interface StoredCheckpoint {
  /** The signed note, as signed. */
  note: string;
  checkpoint: Checkpoint;
}

export type CheckpointAnswer = { ok: true; note: string } | { ok: false; code: string; message: string };

function unavailable(what: string, error: unknown): CairnError {
  if (isCairnError(error)) return error;
  return new CairnError('E_UNAVAILABLE', `${what}: ${error instanceof Error ? error.message : String(error)}`);
}

function streamNotFound(error: unknown): boolean {
  return error instanceof JetStreamApiError && error.code === JetStreamApiCodes.StreamNotFound;
}

/** The checkpoint a stored note holds (its signature is the reader's to check). */
export function checkpointOfNote(note: string): Checkpoint {
  const parsed = parseNote(note);
  if (!parsed.ok) throw new CairnError('E_INTERNAL', `the stored checkpoint is not a signed note: ${parsed.message}`);
  return parseCheckpoint(parsed.text);
}

export class TransparencyLog {
  private tree = new MerkleTree(NODE_HASHER);
  /** The stream's creation time the tree was loaded from: a stream made anew is loaded anew. */
  private created: string | null = null;
  private syncing: Promise<void> | null = null;
  private lastSeq: number | null = null;
  private appending: Promise<unknown> = Promise.resolve();
  private readonly reader: DirectBatchReader;

  private constructor(
    private readonly nc: NatsConnection,
    private readonly jsm: JetStreamManager,
    private readonly js: JetStreamClient,
    readonly options: ResolvedTlogOptions,
    private kv: KV | null,
  ) {
    this.reader = new DirectBatchReader(nc, options.stream, options.requestTimeoutMs);
  }

  /**
   * The writer (the grader) creates the stream and the bucket when they are missing and refuses a
   * stream that could lose leaves; a reader (the gateway) only opens what is there, on first use.
   */
  static async open(nc: NatsConnection, options: TlogOptions, mode: 'writer' | 'reader'): Promise<TransparencyLog> {
    const resolved = resolveTlogOptions(options);
    const jsm = await jetstreamManager(nc, { timeout: resolved.requestTimeoutMs });
    const log = new TransparencyLog(nc, jsm, jetstream(nc, { timeout: resolved.requestTimeoutMs }), resolved, null);
    if (mode === 'writer') {
      await log.ensureStream();
      log.kv = await openBucket(nc, resolved.checkpointBucket, { ttlMs: 0, history: 16, maxBytes: 16 * 1024 * 1024, maxValueBytes: 64 * 1024 }, resolved.replicas);
    }
    return log;
  }

  get streamName(): string {
    return this.options.stream;
  }

  close(): void {
    this.reader.close();
  }

  private async ensureStream(): Promise<void> {
    const wanted = tlogStreamConfig(this.options);
    let info;
    try {
      info = await whileLeaderless(() => this.jsm.streams.info(this.options.stream));
    } catch (error) {
      if (!streamNotFound(error)) throw unavailable(`cannot read the log stream ${this.options.stream}`, error);
      try {
        info = await whileLeaderless(() => this.jsm.streams.add(wanted));
      } catch (created) {
        const hint = replicasHint(created instanceof JetStreamApiError ? created.code : undefined, this.options.replicas);
        throw unavailable(`cannot create the log stream ${this.options.stream}${hint}`, created);
      }
    }
    const problems = tlogStreamProblems(info.config, this.options);
    if (problems.length > 0) {
      throw new CairnError('E_UNAVAILABLE', `the stream ${this.options.stream} cannot hold the log of seal heads: ${problems.join('; ')}`, { stream: this.options.stream, problems });
    }
  }

  /** The leaf of a chain, or null while it has none. */
  async leafOf(chainId: string): Promise<Leaf | null> {
    try {
      const stored = await this.jsm.direct.getMessage(this.options.stream, { last_by_subj: leafSubject(this.options.subjectPrefix, chainId) });
      return stored === null ? null : { index: stored.seq - 1, data: stored.data };
    } catch (error) {
      if (streamNotFound(error) || (error instanceof Error && /stream not found/i.test(error.message))) throw this.notKept();
      throw unavailable(`cannot read the leaf of ${chainId}`, error);
    }
  }

  private notKept(): CairnError {
    return new CairnError('E_UNAVAILABLE', `the log of seal heads (${this.options.stream}) is not there: it is kept by a grader with a seal key (CAIRN_SEAL_KEY_FILE)`, { stream: this.options.stream });
  }

  /**
   * Appends `data` as the leaf of `chainId`, once: when the chain has its leaf already (a
   * redelivered seal), that one is returned as a duplicate. Appends of this process go one at a
   * time; another appender moving the stream is retried from its new last seq.
   */
  appendLeaf(chainId: string, data: Uint8Array): Promise<{ index: number; duplicate: boolean }> {
    if (data.length === 0 || data.length > MAX_LEAF_BYTES) throw new CairnError('E_INPUT', `a leaf is 1 to ${MAX_LEAF_BYTES} bytes, not ${data.length}`);
    const next = this.appending.then(() => this.appendNow(chainId, data));
    this.appending = next.catch(() => undefined);
    return next;
  }

  private async appendNow(chainId: string, data: Uint8Array): Promise<{ index: number; duplicate: boolean }> {
    const subject = leafSubject(this.options.subjectPrefix, chainId);
    for (let attempt = 1; ; attempt++) {
      const last = this.lastSeq ?? (await this.streamState()).lastSeq;
      try {
        const ack = await this.js.publish(subject, data, { expect: { lastSequence: last, lastSubjectSequence: 0 }, timeout: this.options.requestTimeoutMs });
        this.lastSeq = ack.seq;
        return { index: ack.seq - 1, duplicate: false };
      } catch (error) {
        if (!isWrongRevision(error)) throw unavailable(`cannot append the leaf of ${chainId}`, error);
        this.lastSeq = null;
        const existing = await this.leafOf(chainId);
        if (existing !== null) {
          if (Buffer.compare(Buffer.from(existing.data), Buffer.from(data)) !== 0) {
            throw new CairnError('E_CONFLICT', `${chainId} has another leaf in the log already (leaf ${existing.index}): a chain is sealed once`, { chainId, leafIndex: existing.index });
          }
          return { index: existing.index, duplicate: true };
        }
        if (attempt >= APPEND_ATTEMPTS) throw new CairnError('E_UNAVAILABLE', `the log kept moving: the leaf of ${chainId} lost ${attempt} compare-and-sets`, { chainId });
        await new Promise((resolve) => setTimeout(resolve, Math.random() * 20 * Math.min(attempt, 5)));
      }
    }
  }

  private async streamState(): Promise<{ lastSeq: number; firstSeq: number; created: string }> {
    try {
      const info = await this.jsm.streams.info(this.options.stream);
      return { lastSeq: info.state.last_seq, firstSeq: info.state.first_seq, created: info.created };
    } catch (error) {
      if (streamNotFound(error)) throw this.notKept();
      throw unavailable(`cannot read the log stream ${this.options.stream}`, error);
    }
  }

  /** The tree as stored now — or, with `atLeast`, once it holds that many leaves (read again until it does). */
  async currentTree(atLeast = 0): Promise<MerkleTree> {
    for (let reads = 0; ; reads++) {
      this.syncing ??= this.sync().finally(() => {
        this.syncing = null;
      });
      await this.syncing;
      if (this.tree.size >= atLeast) return this.tree;
      if (reads >= 3) throw new CairnError('E_UNAVAILABLE', `the log holds ${this.tree.size} leaves, not the ${atLeast} asked for`);
    }
  }

  private async sync(): Promise<void> {
    const state = await this.streamState();
    if (state.created !== this.created) {
      this.tree = new MerkleTree(NODE_HASHER);
      this.created = state.created;
    }
    if (state.lastSeq > 0 && state.firstSeq !== 1) {
      throw new CairnError('E_INTERNAL', `the log stream ${this.options.stream} starts at seq ${state.firstSeq}: leaves were removed`, { stream: this.options.stream });
    }
    if (state.lastSeq < this.tree.size) {
      // Fewer leaves than were read before, in the same stream: it can only have been tampered with.
      throw new CairnError('E_INTERNAL', `the log stream ${this.options.stream} holds ${state.lastSeq} leaves, ${this.tree.size} were read from it`, { stream: this.options.stream });
    }
    while (this.tree.size < state.lastSeq) {
      const read = await this.reader.read(leafSubjects(this.options.subjectPrefix), this.tree.size + 1, 1000);
      if (read.kind === 'failed') throw new CairnError('E_UNAVAILABLE', `cannot read the log's leaves: ${read.reason}`);
      if (read.messages.length === 0) break;
      for (const message of read.messages) {
        if (message.streamSeq !== this.tree.size + 1) {
          throw new CairnError('E_INTERNAL', `the log stream ${this.options.stream} has no leaf at seq ${this.tree.size + 1}`, { stream: this.options.stream });
        }
        await this.tree.appendData(message.data);
      }
    }
  }

  /** The latest checkpoint stored, or null before the first. */
  async latestCheckpoint(): Promise<StoredCheckpoint | null> {
    const entry = await this.readCheckpointEntry();
    return entry === null ? null : { note: entry.note, checkpoint: entry.checkpoint };
  }

  private async checkpointBucket(): Promise<KV> {
    if (this.kv !== null) return this.kv;
    const { Kvm } = await import('@nats-io/kv');
    try {
      this.kv = await new Kvm(this.nc).open(this.options.checkpointBucket);
      await this.kv.status();
    } catch (error) {
      this.kv = null;
      if (error instanceof Error && /stream not found|bucket not found/i.test(error.message)) throw this.notKept();
      throw unavailable(`cannot open the checkpoints bucket ${this.options.checkpointBucket}`, error);
    }
    return this.kv;
  }

  private async readCheckpointEntry(): Promise<(StoredCheckpoint & { revision: number }) | null> {
    const kv = await this.checkpointBucket();
    const entry = await kvCall('cannot read the latest checkpoint', () => kv.get(CHECKPOINT_KEY));
    if (entry === null || entry.operation !== 'PUT') return null;
    const note = entry.string();
    return { note, checkpoint: checkpointOfNote(note), revision: entry.revision };
  }

  /**
   * Stores `note` (a checkpoint of `size`) as the latest, unless one as large is stored already:
   * a compare-and-set on the bucket's revision, so the latest never goes back. Returns the latest after.
   */
  async storeCheckpoint(note: string): Promise<StoredCheckpoint> {
    const checkpoint = checkpointOfNote(note);
    const kv = await this.checkpointBucket();
    for (let attempt = 1; ; attempt++) {
      const current = await this.readCheckpointEntry();
      if (current !== null && current.checkpoint.size >= checkpoint.size) return { note: current.note, checkpoint: current.checkpoint };
      try {
        if (current === null) await kv.create(CHECKPOINT_KEY, note);
        else await kv.update(CHECKPOINT_KEY, note, current.revision);
        return { note, checkpoint };
      } catch (error) {
        const lost = isWrongRevision(error) || (error instanceof Error && /wrong last sequence|key exists/i.test(error.message));
        if (!lost || attempt >= 8) throw unavailable('cannot store the checkpoint', error);
      }
    }
  }

  /** Asks the log's signer (the grader) for a checkpoint of the tree as it is now: E_UNAVAILABLE when none answers. */
  async requestCheckpoint(): Promise<StoredCheckpoint> {
    let answer: CheckpointAnswer;
    try {
      const reply = await this.nc.request(checkpointRequestSubject(this.options.subjectPrefix), new Uint8Array(0), { timeout: this.options.requestTimeoutMs });
      answer = reply.json<CheckpointAnswer>();
    } catch (error) {
      throw new CairnError('E_UNAVAILABLE', `no checkpoint signer answered (the grader signs them): ${error instanceof Error ? error.message : String(error)}`);
    }
    if (!answer.ok) throw new CairnError(answer.code === 'E_CHAIN_BROKEN' ? 'E_CHAIN_BROKEN' : 'E_UNAVAILABLE', `the checkpoint signer refused: ${answer.message}`);
    return { note: answer.note, checkpoint: checkpointOfNote(answer.note) };
  }

  /** Answers checkpoint requests with `sign` (the grader), one signer of a queue group answering each. */
  serveCheckpointRequests(sign: () => Promise<string>): Subscription {
    return this.nc.subscribe(checkpointRequestSubject(this.options.subjectPrefix), {
      queue: `${this.options.stream}_signers`,
      callback: (error, msg) => {
        if (error) return;
        void sign().then(
          (note) => msg.respond(JSON.stringify({ ok: true, note } satisfies CheckpointAnswer)),
          (failure: unknown) =>
            msg.respond(
              JSON.stringify({
                ok: false,
                code: isCairnError(failure) ? failure.code : 'E_INTERNAL',
                message: failure instanceof Error ? failure.message : String(failure),
              } satisfies CheckpointAnswer),
            ),
        );
      },
    });
  }

  /** The chains that have a leaf, from the stream's subject index (one request). */
  async chainsWithLeaves(): Promise<Set<string>> {
    const prefix = `${this.options.subjectPrefix}.leaf.`;
    const info = await whileLeaderless(() => this.jsm.streams.info(this.options.stream, { subjects_filter: leafSubjects(this.options.subjectPrefix) }));
    return new Set(Object.keys(info.state.subjects ?? {}).map((subject) => subject.slice(prefix.length)));
  }
}

