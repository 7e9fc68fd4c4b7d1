import { replicasHint, whileLeaderless } from '@cairn/config';
import { assertUnreachable, CairnError, ChainIdSchema, deepFreeze, isCairnError } from '@cairn/contracts';
import type { ReceiptEnvelope } from '@cairn/contracts';
import { AckPolicy, DeliverPolicy, jetstreamManager, JetStreamApiCodes, JetStreamApiError, PubHeaders } from '@nats-io/jetstream';
import type { JetStreamManager, StoredMsg, StreamInfo } from '@nats-io/jetstream';
import { delay, headers, nanos } from '@nats-io/transport-node';
import { injectTraceHeaders, inSpan, traceparentOf } from '@cairn/tracing';
import { assertSupportedNatsServer, connectNats, inboxOf } from './nats-connection.js';
import type { MsgHdrs, NatsConnection } from '@nats-io/transport-node';
import { GENESIS_HEAD, prepareAppend, sealOnto } from './append-body.builder.js';
import type { AppendInput, ChainHead, PreparedAppend } from './append-body.builder.js';
import { ChainHeadCache } from './chain-head.cache.js';
import type { CachedHead } from './chain-head.cache.js';
import { MAX_RECEIPT_BYTES, resolveEvidenceLogOptions } from './evidence-log.options.js';
import type { EvidenceLogOptions, ResolvedEvidenceLogOptions } from './evidence-log.options.js';
import {
  chainSubjects,
  evidenceLayoutProblem,
  evidenceStreamConfig,
  evidenceStreamProblems,
  evidenceSubject,
  evidenceSubjects,
  isSubjectType,
  parseEvidenceSubject,
} from './evidence-stream.config.js';
import { DirectBatchReader } from './direct-batch.reader.js';
import type { DirectMessage } from './direct-batch.reader.js';
import { checkExpectedHeadSeq, headGuardStep, headMovedError } from './head-guard.js';
import type { AppendOptions } from './head-guard.js';
import { JetStreamAckPublisher } from './jetstream-ack.publisher.js';
import type { PublishOutcome } from './jetstream-ack.publisher.js';
import { KeyedSerialQueue } from './keyed-serial.queue.js';
import { ChainCache, type CachedMessage } from './chain-cache.js';
import { parseStoredReceipt, tryParseStoredReceipt } from './stored-receipt.parser.js';
import type { ChainBreak } from './stored-receipt.parser.js';

export interface AppendResult {
  /** Our receipt (its canonical JSON is what was stored), or the one already stored for this logical event. */
  receipt: ReceiptEnvelope;
  streamSeq: number;
  /** True when this logical event was already stored and nothing new was written. */
  duplicate: boolean;
  /** Publish attempts made (0 when the head read showed the event already stored). */
  attempts: number;
}

export interface StoredReceipt {
  streamSeq: number;
  subject: string;
  receipt: ReceiptEnvelope;
}

/** A chain read past the messages under its subjects that are not receipts (ADR 0033). */
export interface ChainPastBreaks {
  /** The receipts, in seq order, as stored. */
  receipts: StoredReceipt[];
  /** The messages that are not receipts, in stream order. */
  breaks: ChainBreak[];
}

export interface RawStoredMessage {
  streamSeq: number;
  subject: string;
  data: Uint8Array;
  /** When the server stored it, RFC 3339 UTC with milliseconds. */
  time: string;
  /** Its `traceparent` header as stored (null without one): the projections read a run's trace id from it (ADR 0031). */
  traceparent: string | null;
}

export interface ReadAllOptions {
  fromStreamSeq?: number;
  toStreamSeq?: number;
}

/** Messages asked for per pull: large enough that a rebuild is never waiting on the server. */
const READ_BATCH = 4096;
/** A bulk read that receives nothing for this long while it waits has stalled (and fails). */
const READ_STALL_MS = 30_000;
/** How long the server keeps a bulk read's consumer that nobody pulls from. */
const READ_CONSUMER_IDLE_MS = 5 * 60_000;
/** How long an append waits for a stream that answers nobody (a cluster electing its leader) before it fails. */
const LEADERLESS_WAIT_MS = 10_000;
const LEADERLESS_RETRY_MS = 250;
/** Messages a chain read asks for per batch direct get (a run's chain is a few dozen). */
const CHAIN_READ_BATCH = 1000;
const BACKOFF_BASE_MS = 2;
const BACKOFF_CAP_MS = 100;
const CHAIN_SEQ_HEADER = 'Cairn-Chain-Seq';
/** Room for the headers an append carries (ids, expectation, traceparent) within the size limits. */
const HEADER_ALLOWANCE = 4096;

interface StoredHead {
  head: CachedHead;
  receipt: ReceiptEnvelope;
}

/**
 * The evidence log on JetStream: a subject per chain and receipt type (`<prefix>.<chain id>.<type>`)
 * in one append-only stream, so a consumer takes only the types it acts on. Appends are optimistic
 * (one compare-and-set per chain, on the last stream sequence under `<prefix>.<chain id>.>`) and
 * idempotent (a message id derived from the event's logical identity); receipts that belong
 * together are appended as one atomic batch. See docs/adr/0001 and docs/adr/0012.
 */
export class EvidenceLog {
  readonly streamName: string;
  readonly subjectPrefix: string;
  private readonly heads: ChainHeadCache;
  private readonly queue = new KeyedSerialQueue();
  /** Chains as seen on the stream, so a read of one this process has followed needs no consumer. */
  private readonly chainCache = new ChainCache();
  /** Chain reads served from memory and from the stream since start (for logs and tests). */
  readonly chainReads = { fromMemory: 0, fromStream: 0 };
  /** How often an append had to read its chain's head from the stream (no head known, or not the one expected). */
  appendHeadReads = 0;
  /** Made on the first append, so a log opened only to read or to ensure the stream subscribes to nothing. */
  private publisher: JetStreamAckPublisher | null = null;
  /** Made on the first chain read. */
  private reader: DirectBatchReader | null = null;
  private closed = false;
  private readonly encoder = new TextEncoder();

  private constructor(
    private readonly nc: NatsConnection,
    private readonly jsm: JetStreamManager,
    private readonly options: ResolvedEvidenceLogOptions,
    private readonly ownsConnection: boolean,
  ) {
    this.streamName = options.stream;
    this.subjectPrefix = options.subjectPrefix;
    this.heads = new ChainHeadCache(options.headCacheSize);
  }

  /** Opens its own connection and ensures the stream; `close()` closes the connection. */
  static async connect(options: EvidenceLogOptions): Promise<EvidenceLog> {
    const resolved = resolveEvidenceLogOptions(options);
    const nc = await connectNats({ servers: resolved.servers, name: resolved.name, ...(resolved.credsFile === null ? {} : { credsFile: resolved.credsFile }) });
    try {
      return await EvidenceLog.open(nc, resolved, true);
    } catch (error) {
      await nc.close();
      throw error;
    }
  }

  /** Uses a connection the caller owns (and closes); ensures the stream. */
  static fromConnection(nc: NatsConnection, options: EvidenceLogOptions): Promise<EvidenceLog> {
    return EvidenceLog.open(nc, resolveEvidenceLogOptions(options), false);
  }

  private static async open(nc: NatsConnection, options: ResolvedEvidenceLogOptions, owns: boolean): Promise<EvidenceLog> {
    assertSupportedNatsServer(nc);
    let jsm: JetStreamManager;
    try {
      jsm = await jetstreamManager(nc);
    } catch (error) {
      throw unavailable('JetStream is not available', error);
    }
    const log = new EvidenceLog(nc, jsm, options, owns);
    await log.ensureStream();
    return log;
  }

  /**
   * Creates the stream, or checks the one that exists. Refuses (E_UNAVAILABLE, naming the field)
   * a stream whose config could drop or delete evidence, and verifies that a stream it created
   * kept the settings asked for.
   */
  async ensureStream(): Promise<void> {
    let info = await this.streamInfo();
    let created = false;
    if (info === null) {
      try {
        info = await whileLeaderless(() => this.jsm.streams.add(evidenceStreamConfig(this.options)));
        created = true;
      } catch (error) {
        // Another process created it first: check theirs like any existing stream.
        if (!(error instanceof JetStreamApiError && error.code === STREAM_NAME_IN_USE)) {
          const hint = replicasHint(error instanceof JetStreamApiError ? error.code : undefined, this.options.replicas);
          throw unavailable(`cannot create stream ${this.streamName}`, error, hint);
        }
        info = await this.streamInfo();
        if (info === null) throw unavailable(`stream ${this.streamName} vanished while being created`, error);
      }
    }
    const layout = evidenceLayoutProblem(info.config);
    if (layout !== null) {
      throw new CairnError('E_UNAVAILABLE', `stream ${this.streamName} cannot be opened: ${layout}`, { stream: this.streamName, problems: [layout] });
    }
    const problems = evidenceStreamProblems(info.config, this.options, created);
    if (problems.length > 0) {
      throw new CairnError('E_UNAVAILABLE', `stream ${this.streamName} cannot hold evidence: ${problems.join('; ')}`, {
        stream: this.streamName,
        problems,
      });
    }
  }

  /** `<prefix>.<chain id>.<type>`; the chain id must be a chain's id and the type dot-separated lower-case tokens (E_INPUT otherwise). */
  subjectFor(chainId: string, type: string): string {
    checkChainId(chainId);
    if (!isSubjectType(type)) throw new CairnError('E_INPUT', `invalid receipt type ${JSON.stringify(type)}: dot-separated lower-case tokens`);
    return evidenceSubject(this.subjectPrefix, chainId, type);
  }

  /** `<prefix>.<chain id>.>`: every receipt of the chain (E_INPUT for an invalid chain id). */
  chainSubjects(chainId: string): string {
    checkChainId(chainId);
    return chainSubjects(this.subjectPrefix, chainId);
  }

  /**
   * Appends one event to a chain and returns its receipt. Appending the same logical event
   * (chain, causation, type, key) again stores nothing and returns the stored receipt with
   * `duplicate: true`. Invalid input is E_INPUT with nothing published; a chain that keeps
   * moving under us for `maxAttempts` is E_CONFLICT; a broker failure is E_UNAVAILABLE. With
   * `expectedHeadSeq`, a chain that moved is E_CONFLICT `head_moved` at once (see `AppendOptions`).
   */
  async append(chainId: string, input: AppendInput, options: AppendOptions = {}): Promise<AppendResult> {
    // Validated and queued synchronously, so appends to one chain keep their call order.
    this.checkAppendable(input.type, input.actor);
    const subject = this.subjectFor(chainId, input.type);
    const prepared = prepareAppend(chainId, input);
    const expected = checkExpectedHeadSeq(options);
    const publisher = this.openPublisher();
    const pastBreaks = options.pastBreaks === true;
    // The span is started and the queue entered before anything awaits: call order is kept (ADR 0031).
    return inSpan(`append ${input.type}`, { kind: 'producer', attributes: { 'cairn.chain_id': chainId, 'cairn.receipt.type': input.type } }, async (span) => {
      const result = await this.queue.run(chainId, () => this.appendPrepared(publisher, subject, prepared, expected, pastBreaks));
      span?.setAttributes({ 'cairn.receipt.seq': result.receipt.seq, 'cairn.append.duplicate': result.duplicate });
      return result;
    });
  }

  /**
   * Appends `inputs` to a chain as consecutive receipts in one atomic batch: all of them are
   * stored, at consecutive seqs, or none is. The compare-and-set guards the whole batch (it rides
   * on its first message); each message keeps its own id, so a batch stored before is answered
   * with its receipts (`duplicate: true`) — only ever as a whole. Otherwise as `append`, with the
   * same errors; one input is a plain `append`. At most 1,000 inputs (the server's batch limit).
   */
  async appendBatch(chainId: string, inputs: readonly AppendInput[], options: AppendOptions = {}): Promise<AppendResult[]> {
    if (inputs.length === 0) return [];
    if (inputs.length > MAX_BATCH) throw new CairnError('E_INPUT', `a batch holds at most ${MAX_BATCH} receipts, not ${inputs.length}`);
    if (inputs.length === 1) return [await this.append(chainId, inputs[0]!, options)];
    for (const input of inputs) this.checkAppendable(input.type, input.actor);
    const items = inputs.map((input) => ({ subject: this.subjectFor(chainId, input.type), prepared: prepareAppend(chainId, input) }));
    if (new Set(items.map((item) => item.prepared.msgId)).size !== items.length) {
      throw new CairnError('E_INPUT', 'a batch holds the same logical event twice (same causation, type and key)');
    }
    const expected = checkExpectedHeadSeq(options);
    const publisher = this.openPublisher();
    const pastBreaks = options.pastBreaks === true;
    const types = inputs.map((input) => input.type).join(',');
    return inSpan(`append batch`, { kind: 'producer', attributes: { 'cairn.chain_id': chainId, 'cairn.receipt.types': types, 'cairn.batch.size': inputs.length } }, () =>
      this.queue.run(chainId, () => this.appendBatchPrepared(publisher, chainId, items, expected, pastBreaks)),
    );
  }

  /** A type outside this process's row (`appends`) is refused here, not left to a server that enforces it to time out. */
  private checkAppendable(type: string, actor: string): void {
    const allowed = this.options.appends;
    if (allowed === null || allowed.has(type)) return;
    throw new CairnError('E_FORBIDDEN', `${actor} may not append ${type}: it is not in that service's row of SERVICE_ROUTES (libs/config/src/service-routes.ts)`, { type, actor });
  }

  private openPublisher(): JetStreamAckPublisher {
    if (this.closed) throw new CairnError('E_UNAVAILABLE', `the evidence log on ${this.streamName} is closed`);
    this.publisher ??= new JetStreamAckPublisher(this.nc, this.options.publishTimeoutMs);
    return this.publisher;
  }

  private async appendBatchPrepared(
    publisher: JetStreamAckPublisher,
    chainId: string,
    items: readonly BatchItem[],
    expected: number | undefined,
    pastBreaks: boolean,
  ): Promise<AppendResult[]> {
    const msgIds = new Set(items.map((item) => item.prepared.msgId));
    const cached = this.heads.get(chainId);
    let head: ChainHead;
    if (cached === undefined || msgIds.has(cached.msgId) || (expected !== undefined && cached.seq !== expected)) {
      this.appendHeadReads += 1;
      const stored = await this.readHead(chainId, pastBreaks);
      if (stored !== null && msgIds.has(stored.head.msgId)) return this.storedBatch(publisher, chainId, items, 0);
      head = stored?.head ?? GENESIS_HEAD;
    } else {
      head = cached;
    }
    let attempts = 0;
    let leaderlessSince: number | null = null;
    const leaderless = async (): Promise<boolean> => {
      leaderlessSince ??= Date.now();
      if (Date.now() - leaderlessSince >= LEADERLESS_WAIT_MS) return false;
      attempts -= 1;
      await delay(LEADERLESS_RETRY_MS * (0.5 + Math.random()));
      return true;
    };
    for (;;) {
      if (expected !== undefined && headGuardStep(head.seq, expected) !== 'publish') {
        if (headGuardStep(head.seq, expected) === 'probe') {
          const found = await this.findStoredBatch(publisher, chainId, items, attempts);
          if (found !== null) return found;
        }
        throw headMovedError(chainId, head.seq, expected);
      }
      attempts += 1;
      const sealed = this.sealBatch(chainId, items, head);
      const outcome = await publisher.publishBatch(sealed.map(({ subject, data, headers: hdrs }) => ({ subject, data, headers: hdrs })));
      switch (outcome.kind) {
        case 'stored': {
          if (outcome.stream !== this.streamName) {
            throw new CairnError('E_INTERNAL', `a batch of ${chainId} was stored by stream ${outcome.stream}, not ${this.streamName}`, { chainId });
          }
          if (outcome.count !== items.length) {
            throw new CairnError('E_INTERNAL', `a batch of ${items.length} on ${chainId} was acknowledged as ${String(outcome.count)}`, { chainId });
          }
          const first = outcome.seq - items.length + 1;
          const results = sealed.map(({ receipt, subject, data }, i) => {
            this.chainCache.observe(chainId, receipt.seq, first + i, data, subject);
            return { receipt, streamSeq: first + i, duplicate: false, attempts };
          });
          const last = results[results.length - 1]!;
          this.heads.advance(chainId, { streamSeq: last.streamSeq, seq: last.receipt.seq, hash: last.receipt.hash, msgId: items[items.length - 1]!.prepared.msgId });
          return results;
        }
        case 'rejected':
          this.heads.forget(chainId);
          if (outcome.errCode === BATCH_HOLDS_DUPLICATE) {
            const found = await this.findStoredBatch(publisher, chainId, items, attempts);
            if (found !== null) return found;
            throw new CairnError('E_CONFLICT', `part of a batch on ${chainId} is stored already, not as this batch`, { chainId });
          }
          // Its first messages went to a leader that died before the commit reached the next: nothing
          // was stored, so the whole batch goes again on the same head once a leader answers.
          if (outcome.errCode === BATCH_INCOMPLETE && (await leaderless())) continue;
          if (!isWrongLastSequence(outcome.errCode)) {
            throw new CairnError('E_UNAVAILABLE', `a batch append to ${chainId} refused by JetStream: ${outcome.description}`, { chainId, errCode: outcome.errCode });
          }
          if (attempts >= this.options.maxAttempts) {
            throw new CairnError('E_CONFLICT', `chain ${chainId} kept moving: gave up after ${attempts} attempts`, { chainId, attempts });
          }
          break;
        case 'timeout':
          this.heads.forget(chainId);
          if (attempts >= this.options.maxAttempts) {
            throw new CairnError('E_UNAVAILABLE', `a batch append to ${chainId} got no ack ${attempts} times`, { chainId, attempts });
          }
          break;
        case 'no_responders':
          // As for one append: a stream electing its leader stored nothing; wait on the same head.
          if (await leaderless()) continue;
          throw new CairnError('E_UNAVAILABLE', `no JetStream stream answers for ${this.chainSubjects(chainId)} (is ${this.streamName} there, with a leader?)`, { chainId });
        case 'closed':
          throw new CairnError('E_UNAVAILABLE', `a batch append to ${chainId} cannot be acknowledged: ${outcome.reason}`, { chainId });
        default:
          return assertUnreachable(outcome, 'publish outcome');
      }
      await delay(Math.random() * Math.min(BACKOFF_CAP_MS, BACKOFF_BASE_MS * 2 ** (attempts - 1)));
      const stored = await this.readHead(chainId, pastBreaks);
      if (stored !== null && msgIds.has(stored.head.msgId)) return this.storedBatch(publisher, chainId, items, attempts);
      head = stored?.head ?? GENESIS_HEAD;
    }
  }

  /** The batch's receipts sealed one after another onto `head`, with the headers each is published with. */
  private sealBatch(chainId: string, items: readonly BatchItem[], head: ChainHead): { receipt: ReceiptEnvelope; subject: string; data: Uint8Array; headers: ReturnType<typeof headers> }[] {
    const limit = this.receiptByteLimit();
    let onto: Pick<ChainHead, 'seq' | 'hash'> = head;
    return items.map(({ subject, prepared }, i) => {
      const { receipt, canonical } = sealOnto(prepared, onto);
      onto = receipt;
      const data = this.encoder.encode(canonical);
      if (data.byteLength > limit) {
        throw new CairnError('E_TOO_LARGE', `a receipt of ${data.byteLength} bytes exceeds ${limit}`, { chainId, bytes: data.byteLength, limit });
      }
      const hdrs = headers();
      hdrs.set(PubHeaders.MsgIdHdr, prepared.msgId);
      // One compare-and-set for the batch: the server checks it before storing any of it.
      if (i === 0) {
        hdrs.set(PubHeaders.ExpectedLastSubjectSequenceHdr, String(head.streamSeq));
        hdrs.set(PubHeaders.ExpectedLastSubjectSequenceSubjectHdr, this.chainSubjects(chainId));
      }
      hdrs.set(CHAIN_SEQ_HEADER, String(receipt.seq));
      if (prepared.traceparent !== null) hdrs.set('traceparent', prepared.traceparent);
      else injectTraceHeaders(hdrs);
      return { receipt, subject, data, headers: hdrs };
    });
  }

  /**
   * Whether this batch is stored already (a retry after a lost ack, or a redelivery): the duplicate
   * window says where its first message is, and the messages from there must be this batch's, in
   * order. Null when its first message is not stored.
   */
  private async findStoredBatch(publisher: JetStreamAckPublisher, chainId: string, items: readonly BatchItem[], attempts: number): Promise<AppendResult[] | null> {
    const [first] = items;
    const outcome = await this.probe(publisher, first!.subject, first!.prepared, GENESIS_HEAD);
    if (outcome.kind === 'stored' && outcome.duplicate) return this.storedBatchFrom(chainId, items, outcome.seq, attempts + 1);
    if (outcome.kind === 'stored') {
      throw new CairnError('E_INTERNAL', `a duplicate probe on ${chainId} was stored at stream seq ${outcome.seq}`, { chainId, streamSeq: outcome.seq });
    }
    if (outcome.kind !== 'rejected' || outcome.errCode !== STREAM_WRONG_LAST_MSG_ID) {
      throw new CairnError('E_UNAVAILABLE', `could not tell whether ${chainId} already holds this batch (${outcome.kind})`, { chainId });
    }
    return null;
  }

  /** The batch stored before, found through its head (which carries one of its ids). */
  private async storedBatch(publisher: JetStreamAckPublisher, chainId: string, items: readonly BatchItem[], attempts: number): Promise<AppendResult[]> {
    const found = await this.findStoredBatch(publisher, chainId, items, attempts);
    if (found === null) throw new CairnError('E_CONFLICT', `the head of ${chainId} is part of a batch whose first receipt is not stored`, { chainId });
    return found;
  }

  /** The batch's messages as stored from stream seq `from` on, each checked to be the one with its id. */
  private async storedBatchFrom(chainId: string, items: readonly BatchItem[], from: number, attempts: number): Promise<AppendResult[]> {
    const messages = await this.directRead(this.chainSubjects(chainId), from, items.length);
    const results: AppendResult[] = [];
    for (const [i, item] of items.entries()) {
      const m = messages[i];
      if (m === undefined || m.headers.get(PubHeaders.MsgIdHdr) !== item.prepared.msgId || m.subject !== item.subject) {
        throw new CairnError('E_CONFLICT', `part of a batch on ${chainId} is stored already, not as this batch`, { chainId });
      }
      results.push({ receipt: parseStoredReceipt(m.data, { subject: m.subject, streamSeq: m.streamSeq }), streamSeq: m.streamSeq, duplicate: true, attempts });
    }
    return results;
  }

  private async appendPrepared(publisher: JetStreamAckPublisher, subject: string, prepared: PreparedAppend, expected: number | undefined, pastBreaks: boolean): Promise<AppendResult> {
    const { chainId, msgId } = prepared;
    const cached = this.heads.get(chainId);
    let head: ChainHead;
    // Unknown head, our event is the head (a retry, perhaps past the duplicate window), or not the
    // head a guarded append expects (the cache may only be behind): read it.
    if (cached === undefined || cached.msgId === msgId || (expected !== undefined && cached.seq !== expected)) {
      this.appendHeadReads += 1;
      const stored = await this.readHead(chainId, pastBreaks);
      if (stored?.head.msgId === msgId) return this.alreadyStored(chainId, stored, 0);
      head = stored?.head ?? GENESIS_HEAD;
    } else {
      head = cached;
    }
    let attempts = 0;
    let leaderlessSince: number | null = null;
    for (;;) {
      if (expected !== undefined && headGuardStep(head.seq, expected) !== 'publish') {
        return this.headMoved(publisher, subject, prepared, head, expected, attempts);
      }
      attempts += 1;
      const { receipt, outcome } = await this.publishOnto(publisher, subject, prepared, head, head.streamSeq);
      switch (outcome.kind) {
        case 'stored': {
          if (outcome.duplicate) return this.storedDuplicate(subject, prepared, outcome.seq, attempts);
          this.heads.advance(chainId, { streamSeq: outcome.seq, seq: receipt.seq, hash: receipt.hash, msgId });
          return { receipt, streamSeq: outcome.seq, duplicate: false, attempts };
        }
        case 'rejected':
          this.heads.forget(chainId);
          if (!isWrongLastSequence(outcome.errCode)) {
            throw new CairnError('E_UNAVAILABLE', `append to ${chainId} refused by JetStream: ${outcome.description}`, {
              chainId,
              errCode: outcome.errCode,
            });
          }
          if (attempts >= this.options.maxAttempts) {
            throw new CairnError('E_CONFLICT', `chain ${chainId} kept moving: gave up after ${attempts} attempts`, { chainId, attempts });
          }
          break;
        case 'timeout':
          // The message may be stored with its ack lost: the re-read below, or the dedupe, finds it.
          this.heads.forget(chainId);
          if (attempts >= this.options.maxAttempts) {
            throw new CairnError('E_UNAVAILABLE', `append to ${chainId} got no ack ${attempts} times`, { chainId, attempts });
          }
          break;
        case 'no_responders':
          // A replicated stream that lost its leader answers nobody until it elects another (≈ 5 s
          // here): wait that out on the same head — nothing was stored — rather than fail the caller.
          leaderlessSince ??= Date.now();
          if (Date.now() - leaderlessSince < LEADERLESS_WAIT_MS) {
            attempts -= 1;
            await delay(LEADERLESS_RETRY_MS * (0.5 + Math.random()));
            continue;
          }
          throw new CairnError('E_UNAVAILABLE', `no JetStream stream answers for ${subject} (is ${this.streamName} there, with a leader?)`, { chainId });
        case 'closed':
          throw new CairnError('E_UNAVAILABLE', `append to ${chainId} cannot be acknowledged: ${outcome.reason}`, { chainId });
        default:
          return assertUnreachable(outcome, 'publish outcome');
      }
      await delay(Math.random() * Math.min(BACKOFF_CAP_MS, BACKOFF_BASE_MS * 2 ** (attempts - 1)));
      const stored = await this.readHead(chainId, pastBreaks);
      if (stored?.head.msgId === msgId) return this.alreadyStored(chainId, stored, attempts);
      head = stored?.head ?? GENESIS_HEAD;
    }
  }

  /**
   * Seals the event onto `head` and publishes it expecting the subject's last stream seq to be
   * `expectStreamSeq`; the stream (never another) must be the one that answers.
   */
  /**
   * A duplicate probe's answer. It stores nothing, so one that a stream electing its leader does not
   * answer (no responders, or its ack lost with the old leader) is asked again, for up to LEADERLESS_WAIT_MS.
   */
  private async probe(publisher: JetStreamAckPublisher, subject: string, prepared: PreparedAppend, head: ChainHead): Promise<PublishOutcome> {
    const since = Date.now();
    for (;;) {
      const { outcome } = await this.publishOnto(publisher, subject, prepared, head, 'probe');
      if ((outcome.kind !== 'no_responders' && outcome.kind !== 'timeout') || Date.now() - since >= LEADERLESS_WAIT_MS) return outcome;
      await delay(LEADERLESS_RETRY_MS * (0.5 + Math.random()));
    }
  }

  private async publishOnto(
    publisher: JetStreamAckPublisher,
    subject: string,
    prepared: PreparedAppend,
    head: ChainHead,
    expectStreamSeq: number | 'probe',
  ): Promise<{ receipt: ReceiptEnvelope; outcome: PublishOutcome }> {
    const { chainId, msgId } = prepared;
    const { receipt, canonical } = sealOnto(prepared, head);
    const data = this.encoder.encode(canonical);
    const limit = this.receiptByteLimit();
    if (data.byteLength > limit) {
      throw new CairnError('E_TOO_LARGE', `a receipt of ${data.byteLength} bytes exceeds ${limit}`, { chainId, bytes: data.byteLength, limit });
    }
    const hdrs = headers();
    hdrs.set(PubHeaders.MsgIdHdr, msgId);
    // A probe asks the duplicate window only: an expected last message id no stream can have fails
    // after the dedupe check (on one server and in a cluster alike), so nothing is ever stored.
    if (expectStreamSeq === 'probe') hdrs.set(PubHeaders.ExpectedLastMsgIdHdr, PROBE_LAST_MSG_ID);
    else {
      // One compare-and-set per chain across all its subjects (2.11+).
      hdrs.set(PubHeaders.ExpectedLastSubjectSequenceHdr, String(expectStreamSeq));
      hdrs.set(PubHeaders.ExpectedLastSubjectSequenceSubjectHdr, chainSubjects(this.subjectPrefix, chainId));
    }
    hdrs.set(CHAIN_SEQ_HEADER, String(receipt.seq));
    if (prepared.traceparent !== null) hdrs.set('traceparent', prepared.traceparent);
    else injectTraceHeaders(hdrs);
    const outcome = await publisher.publish(subject, data, hdrs);
    if (outcome.kind === 'stored' && outcome.stream !== this.streamName) {
      throw new CairnError('E_INTERNAL', `${subject} was stored by stream ${outcome.stream}, not ${this.streamName}`, { chainId });
    }
    if (outcome.kind === 'stored' && !outcome.duplicate) this.chainCache.observe(chainId, receipt.seq, outcome.seq, data, subject);
    return { receipt, outcome };
  }

  /** Stored before (inside the duplicate window), perhaps not as the head: return that one. */
  private async storedDuplicate(subject: string, prepared: PreparedAppend, streamSeq: number, attempts: number): Promise<AppendResult> {
    const stored = await this.readStored(streamSeq);
    if (stored.subject !== subject) {
      throw new CairnError('E_INTERNAL', `message id ${prepared.msgId} of ${prepared.chainId} is stored on ${stored.subject}`, { chainId: prepared.chainId });
    }
    return { receipt: stored.receipt, streamSeq, duplicate: true, attempts };
  }

  /**
   * A guarded append whose chain head is not the one expected. Past it, our own event may be what
   * moved it (a retry after a lost ack, the chain moved on since): a probe — our message id with an
   * expected last message id that can never hold — asks the duplicate window without storing
   * anything. (An expected subject seq below the head will not do: a current single server (2.15) checks
   * it before the duplicate window.) Otherwise the caller decided from a head that is gone:
   * E_CONFLICT head_moved.
   */
  private async headMoved(
    publisher: JetStreamAckPublisher,
    subject: string,
    prepared: PreparedAppend,
    head: ChainHead,
    expected: number,
    attempts: number,
  ): Promise<AppendResult> {
    const { chainId } = prepared;
    if (headGuardStep(head.seq, expected) === 'probe') {
      const outcome = await this.probe(publisher, subject, prepared, head);
      if (outcome.kind === 'stored') {
        if (outcome.duplicate) return this.storedDuplicate(subject, prepared, outcome.seq, attempts + 1);
        // Cannot happen: no message carries the probe's id; if it ever does, say so loudly.
        throw new CairnError('E_INTERNAL', `a duplicate probe on ${chainId} was stored at stream seq ${outcome.seq}`, { chainId, streamSeq: outcome.seq });
      }
      if (outcome.kind !== 'rejected' || outcome.errCode !== STREAM_WRONG_LAST_MSG_ID) {
        throw new CairnError('E_UNAVAILABLE', `could not tell whether ${chainId} already holds this event (${outcome.kind})`, { chainId });
      }
    }
    throw headMovedError(chainId, head.seq, expected);
  }

  /** The stream's max_msg_size and the server's max_payload both count the headers too. */
  private receiptByteLimit(): number {
    const maxPayload = this.nc.info?.max_payload ?? MAX_RECEIPT_BYTES;
    return Math.min(MAX_RECEIPT_BYTES, maxPayload) - HEADER_ALLOWANCE;
  }

  private alreadyStored(chainId: string, stored: StoredHead, attempts: number): AppendResult {
    this.heads.advance(chainId, stored.head);
    return { receipt: stored.receipt, streamSeq: stored.head.streamSeq, duplicate: true, attempts };
  }

  /** The chain's head as stored now (null for a chain with no receipt). */
  async head(chainId: string): Promise<ChainHead | null> {
    const stored = await this.readHead(chainId);
    if (stored === null) return null;
    this.heads.advance(chainId, stored.head);
    const { streamSeq, seq, hash } = stored.head;
    return { streamSeq, seq, hash };
  }

  /**
   * The chain's receipts in seq order from seq 1, exactly as stored, up to its head when called.
   * What this process has seen of the chain (deliveries, its own appends, an earlier read:
   * `ChainCache`) is a prefix of it; the stream is asked, in one batch direct get, for every
   * message of the chain after that prefix — so the head is always the stream's, and a chain
   * this process followed costs one round trip and no consumer.
   */
  async *readChain(chainId: string): AsyncIterable<StoredReceipt> {
    yield* await this.chainNow(chainId);
  }

  /**
   * The whole chain as stored, read past the messages under its subjects that are not receipts
   * (ADR 0033): its receipts, and each such message as a break (where, after which seq, why).
   * Never from memory. `readChain` of such a chain fails E_CHAIN_BROKEN `not_a_receipt`; this is
   * for recording the break, and for what may still follow an ending recorded after it.
   */
  async readChainPastBreaks(chainId: string): Promise<ChainPastBreaks> {
    const receipts: StoredReceipt[] = [];
    const breaks: ChainBreak[] = [];
    for (const m of await this.directRead(this.chainSubjects(chainId), 1)) {
      const parsed = tryParseStoredReceipt(m.data, { subject: m.subject, streamSeq: m.streamSeq });
      if (parsed.ok) receipts.push({ streamSeq: m.streamSeq, subject: m.subject, receipt: parsed.receipt });
      else breaks.push({ streamSeq: m.streamSeq, subject: m.subject, afterSeq: receipts.at(-1)?.receipt.seq ?? 0, reason: parsed.reason });
    }
    return { receipts, breaks };
  }

  private async chainNow(chainId: string): Promise<StoredReceipt[]> {
    const filter = this.chainSubjects(chainId);
    const held = this.chainCache.held(chainId);
    const after = held.length === 0 ? 1 : held[held.length - 1]!.streamSeq + 1;
    const fetched = await this.directRead(filter, after);
    let messages: CachedMessage[];
    if (fetched.length === 0) {
      this.chainReads.fromMemory += 1;
      messages = [...held];
    } else {
      this.chainReads.fromStream += 1;
      const extra = fetched.map(toCached);
      if (follows(extra, held.length)) {
        messages = [...held, ...extra];
        this.chainCache.remember(chainId, messages);
      } else {
        // Not the chain this process held (or one with a gap or a forgery in it): all of it, as stored.
        const whole = held.length === 0 ? extra : (await this.directRead(filter, 1)).map(toCached);
        messages = whole;
        if (follows(whole, 0)) this.chainCache.remember(chainId, whole);
        else this.chainCache.forget(chainId);
      }
    }
    const chain = heldReceipts(messages);
    const last = messages.at(-1);
    if (last !== undefined) this.noteHead(chainId, last.streamSeq, last.msgId ?? '', chain.at(-1)?.receipt);
    return chain;
  }

  /** Every message under `subject` from stream seq `from` on (at most `limit`), as stored now, in one or more batch direct gets. */
  private async directRead(subject: string, from: number, limit = Number.POSITIVE_INFINITY): Promise<DirectMessage[]> {
    this.reader ??= new DirectBatchReader(this.nc, this.streamName, this.options.publishTimeoutMs);
    const messages: DirectMessage[] = [];
    let next = from;
    for (;;) {
      const outcome = await this.reader.read(subject, next, Math.min(CHAIN_READ_BATCH, limit - messages.length));
      if (outcome.kind === 'failed') throw new CairnError('E_UNAVAILABLE', `cannot read ${subject} from ${this.streamName}: ${outcome.reason}`, { subject });
      messages.push(...outcome.messages);
      const last = outcome.messages.at(-1);
      if (outcome.pending === 0 || last === undefined || messages.length >= limit) return messages;
      next = last.streamSeq + 1;
    }
  }

  /**
   * The chain from seq 1 through its receipt at `seq`, stored at `streamSeq` under `msgId`, from
   * memory — no read of the stream — or null when this process does not hold it up to there. For
   * a reaction whose delivery said nothing was stored after its receipt: the chain as it stood then,
   * as a read of its head at that moment would have found it. An append that follows starts from that
   * head (the compare-and-set refuses it if the chain has moved since).
   */
  chainThrough(chainId: string, seq: number, streamSeq: number, msgId: string): StoredReceipt[] | null {
    const held = this.chainCache.upTo(chainId, seq, streamSeq);
    if (held === null) return null;
    this.chainReads.fromMemory += 1;
    const chain = heldReceipts(held);
    this.noteHead(chainId, streamSeq, msgId, chain.at(-1)?.receipt);
    return chain;
  }

  /**
   * A chain read found its head (stored at `streamSeq` under `msgId`): an append that follows (read,
   * decide, append — every reaction) starts from it instead of reading it again. Only a hint, like
   * every cached head: the compare-and-set rejects it if another writer moved the chain since.
   */
  private noteHead(chainId: string, streamSeq: number, msgId: string, head: ReceiptEnvelope | undefined): void {
    if (head === undefined || msgId === '') return;
    this.heads.advance(chainId, { streamSeq, seq: head.seq, hash: head.hash, msgId });
  }

  /**
   * Takes note of a message of a chain seen on the stream (a consumer's delivery), so a later
   * `readChain` of it can be served from memory. Anything that is not a chain message is ignored.
   */
  observe(subject: string, streamSeq: number, data: Uint8Array, chainSeqHeader?: string | null): void {
    const named = parseEvidenceSubject(this.subjectPrefix, subject);
    if (named === null) return;
    const seq = chainSeqOf(chainSeqHeader ?? undefined, data);
    if (seq !== null) this.chainCache.observe(named.chainId, seq, streamSeq, data, subject);
  }

  /**
   * Hands the log a delivered receipt this process has parsed and checked (frozen), so that chain
   * reads serve that same object — checked once — rather than parsing its bytes again. Only taken
   * for the message held at that chain seq and stream seq (see `observe`).
   */
  adoptParsed(subject: string, streamSeq: number, receipt: Readonly<ReceiptEnvelope>): void {
    const named = parseEvidenceSubject(this.subjectPrefix, subject);
    if (named === null || !Object.isFrozen(receipt)) return;
    this.chainCache.adopt(named.chainId, receipt.seq, streamSeq, receipt);
  }

  /**
   * Every message under the prefix in stream order, raw, for projections and rebuilds; ends at
   * the last message present when called (or `toStreamSeq`).
   */
  async *readAll(options: ReadAllOptions = {}): AsyncIterable<RawStoredMessage> {
    const info = await this.streamInfo();
    if (info === null) throw new CairnError('E_UNAVAILABLE', `stream ${this.streamName} does not exist`);
    const { first_seq: firstSeq, last_seq: lastSeq, messages } = info.state;
    const from = Math.max(options.fromStreamSeq ?? 1, firstSeq, 1);
    const to = Math.min(options.toStreamSeq ?? lastSeq, lastSeq);
    if (messages === 0 || from > to) return;
    yield* this.pullRange(evidenceSubjects(this.subjectPrefix), from, to);
  }

  /** The stream sequence of the last message in the log (0 when empty). */
  async lastStreamSeq(): Promise<number> {
    const info = await this.streamInfo();
    if (info === null) throw new CairnError('E_UNAVAILABLE', `stream ${this.streamName} does not exist`);
    return info.state.last_seq;
  }

  /**
   * Stops the log: appends still waiting for an ack fail with E_UNAVAILABLE (await them first; a
   * retry is safe). Closes the connection if the log opened it; a borrowed connection stays open.
   */
  async close(): Promise<void> {
    this.closed = true;
    this.publisher?.close();
    this.reader?.close();
    if (!this.ownsConnection || this.nc.isClosed()) return;
    await this.nc.drain();
  }

  /**
   * The bulk read behind `readAll`: raw pull requests (one or two batches in flight) on an
   * ephemeral consumer without acks, received by a callback. An ordered consumer's per-message
   * machinery (JsMsg, its checks, an async iterator, a Date per message) costs a rebuild about
   * 2 µs of its 10 µs per message. A gap in the delivery sequence fails the read instead of
   * being repaired: a rebuild is one transaction and is run again.
   */
  private async *pullRange(filter: string, from: number, to: number): AsyncGenerator<RawStoredMessage> {
    let consumer: string;
    try {
      const info = await this.jsm.consumers.add(this.streamName, {
        ack_policy: AckPolicy.None,
        deliver_policy: DeliverPolicy.StartSequence,
        opt_start_seq: from,
        filter_subject: filter,
        mem_storage: true,
        // One read's own cursor, not state: losing it with its server fails only that read.
        num_replicas: 1,
        // The server drops it if we vanish without deleting it (a reader may pause meanwhile).
        inactive_threshold: nanos(READ_CONSUMER_IDLE_MS),
      });
      consumer = info.name;
    } catch (error) {
      throw unavailable(`cannot read ${filter}`, error);
    }
    const queue: RawStoredMessage[] = [];
    let next = 0;
    let reached = from - 1;
    let ended = false;
    let failure = null as CairnError | null;
    let wake = null as (() => void) | null;
    // Messages asked for and not yet received.
    let inFlight = 0;
    let delivered = 0;
    const signal = () => {
      const resume = wake;
      wake = null;
      resume?.();
    };
    const fail = (error: CairnError) => {
      failure ??= error;
      signal();
    };
    const pullSubject = `$JS.API.CONSUMER.MSG.NEXT.${this.streamName}.${consumer}`;
    const pullRequest = this.encoder.encode(JSON.stringify({ batch: READ_BATCH, expires: nanos(READ_STALL_MS) }));
    const inbox = inboxOf(this.nc);
    // Keep about one batch in flight and at most two unread, so a slow reader holds back the server.
    const pullIfLow = () => {
      if (ended || failure !== null || inFlight >= READ_BATCH || queue.length - next >= 2 * READ_BATCH) return;
      this.nc.publish(pullSubject, pullRequest, { reply: inbox });
      inFlight += READ_BATCH;
    };
    const sub = this.nc.subscribe(inbox, {
      callback: (error, m) => {
        if (error !== null) return fail(unavailable(`cannot read ${filter}`, error));
        if (ended) return;
        const reply = m.reply ?? '';
        if (reply === '') {
          // A status. 408: a pull expired short (the watchdog catches a server that sends nothing).
          if (m.headers?.code === 408) {
            inFlight -= Number(m.headers.get('Nats-Pending-Messages') || READ_BATCH);
            return pullIfLow();
          }
          const status = `${m.headers?.code ?? '?'} ${m.headers?.description ?? ''}`.trim();
          return fail(new CairnError('E_UNAVAILABLE', `the read of ${filter} stopped at stream seq ${reached}, before ${to} (${status})`));
        }
        const delivery = deliveryOf(reply);
        if (delivery === null || delivery.consumerSeq !== delivered + 1) {
          return fail(new CairnError('E_UNAVAILABLE', `the read of ${filter} lost messages after stream seq ${reached}`));
        }
        delivered += 1;
        inFlight -= 1;
        if (delivery.streamSeq > to) {
          ended = true;
          return signal();
        }
        reached = delivery.streamSeq;
        queue.push(new PulledMessage(delivery.streamSeq, m.subject, m.data, delivery.timestampNanos, m));
        // pending 0: nothing after this one matches, even if `to` was never stored under the filter.
        if (reached >= to || delivery.pending === 0) ended = true;
        pullIfLow();
        signal();
      },
    });
    void sub.closed.then(() => fail(new CairnError('E_UNAVAILABLE', `the read of ${filter} lost its subscription`)));
    let seen = -1;
    const watchdog = setInterval(() => {
      if (wake !== null && delivered === seen) fail(new CairnError('E_UNAVAILABLE', `the read of ${filter} stalled at stream seq ${reached}`));
      seen = delivered;
    }, READ_STALL_MS);
    try {
      pullIfLow();
      for (;;) {
        if (next < queue.length) {
          const message = queue[next++]!;
          // Let go of what was read, so a reader that never quite catches up holds no more than the unread.
          if (next === queue.length || next >= READ_BATCH) {
            queue.splice(0, next);
            next = 0;
          }
          yield message;
          pullIfLow();
        } else if (ended) return;
        else if (failure !== null) throw failure;
        else await new Promise<void>((resolve) => (wake = resolve));
      }
    } finally {
      clearInterval(watchdog);
      ended = true;
      sub.unsubscribe();
      await this.jsm.consumers.delete(this.streamName, consumer).catch(() => false);
    }
  }

  /**
   * The chain's last message as its head. One that is not a receipt is E_CHAIN_BROKEN
   * `not_a_receipt` — unless `pastBreaks`: then the head is the last receipt before it, guarded on
   * the poison message's stream seq (ADR 0033), with a message id no append ever has.
   */
  private async readHead(chainId: string, pastBreaks = false): Promise<StoredHead | null> {
    const m = await this.directGet({ last_by_subj: this.chainSubjects(chainId) });
    if (m === null) return null;
    const where = { subject: m.subject, streamSeq: m.seq };
    if (!pastBreaks) {
      const receipt = parseStoredReceipt(m.data, where);
      return { head: { streamSeq: m.seq, seq: receipt.seq, hash: receipt.hash, msgId: m.header.get(PubHeaders.MsgIdHdr) }, receipt };
    }
    const parsed = tryParseStoredReceipt(m.data, where);
    if (parsed.ok) return { head: { streamSeq: m.seq, seq: parsed.receipt.seq, hash: parsed.receipt.hash, msgId: m.header.get(PubHeaders.MsgIdHdr) }, receipt: parsed.receipt };
    const last = (await this.readChainPastBreaks(chainId)).receipts.filter((r) => r.streamSeq < m.seq).at(-1);
    if (last === undefined) throw new CairnError('E_CHAIN_BROKEN', `${chainId} holds no receipt before its message ${m.seq}, which is not one: ${parsed.reason}`, { ...where, chainId });
    return { head: { streamSeq: m.seq, seq: last.receipt.seq, hash: last.receipt.hash, msgId: `not-a-receipt:${m.seq}` }, receipt: last.receipt };
  }

  /** The stream sequence of the first receipt stored at or after `time` (the server's clock); past the end when none is. */
  async firstSeqAtOrAfter(time: Date): Promise<number> {
    const m = await this.directGet({ start_time: time });
    if (m !== null) return m.seq;
    const info = await this.streamInfo();
    return (info?.state.last_seq ?? 0) + 1;
  }

  private async readStored(streamSeq: number): Promise<StoredReceipt> {
    const m = await this.directGet({ seq: streamSeq });
    if (m === null) throw new CairnError('E_UNAVAILABLE', `stream seq ${streamSeq} of ${this.streamName} is missing`);
    return { streamSeq, subject: m.subject, receipt: parseStoredReceipt(m.data, { subject: m.subject, streamSeq }) };
  }

  private async directGet(query: { last_by_subj: string } | { seq: number } | { start_time: Date }): Promise<StoredMsg | null> {
    try {
      return await this.jsm.direct.getMessage(this.streamName, query);
    } catch (error) {
      throw unavailable(`cannot read ${this.streamName}`, error);
    }
  }

  private async streamInfo(): Promise<StreamInfo | null> {
    try {
      // A cluster's stream answers once it has a leader (it may have lost or not yet elected one).
      return await whileLeaderless(() => this.jsm.streams.info(this.streamName));
    } catch (error) {
      if (error instanceof JetStreamApiError && error.code === JetStreamApiCodes.StreamNotFound) return null;
      throw unavailable(`cannot read stream ${this.streamName}`, error);
    }
  }
}

/**
 * A message of a bulk read; `time` and `traceparent` are worked out only when asked for: a rebuild
 * asks one message per run for its header, and decoding every message's headers would cost it.
 */
class PulledMessage implements RawStoredMessage {
  constructor(
    readonly streamSeq: number,
    readonly subject: string,
    readonly data: Uint8Array,
    private readonly timestampNanos: string,
    private readonly carried: { readonly headers?: MsgHdrs | undefined },
  ) {}

  get time(): string {
    return new Date(Math.floor(Number(this.timestampNanos) / 1e6)).toISOString();
  }

  get traceparent(): string | null {
    return traceparentOf(this.carried.headers);
  }
}

interface Delivery {
  streamSeq: number;
  consumerSeq: number;
  timestampNanos: string;
  pending: number;
}

/**
 * What a JetStream delivery's reply subject says: `$JS.ACK.<stream>.<consumer>.<delivered>.<stream
 * seq>.<consumer seq>.<nanos>.<pending>`, or the newer form with domain and account hash after
 * `ACK` and a random token at the end.
 */
function deliveryOf(reply: string): Delivery | null {
  const t = reply.split('.');
  if (t[0] !== '$JS' || t[1] !== 'ACK' || (t.length !== 9 && t.length < 11)) return null;
  const at = t.length === 9 ? 5 : 7;
  return { streamSeq: Number(t[at]), consumerSeq: Number(t[at + 1]), timestampNanos: t[at + 2] ?? '', pending: Number(t[at + 3]) };
}

/** JetStream's "stream name already in use" (with a different config). */
const STREAM_NAME_IN_USE = 10058;

/** A compare-and-set that did not hold: 10071 names the sequence found, 10164 (a cluster's leader) does not. */
function isWrongLastSequence(errCode: number): boolean {
  return errCode === JetStreamApiCodes.StreamWrongLastSequence || errCode === JetStreamApiCodes.StreamWrongLastSequenceUnknown;
}

/** The expected last message id of a duplicate probe: no message is ever published under it. */
const PROBE_LAST_MSG_ID = 'cairn-duplicate-probe';
/** JetStream's "wrong last msg ID" (10070): what a probe of an event not stored gets. */
const STREAM_WRONG_LAST_MSG_ID = 10070;

function unavailable(what: string, error: unknown, hint = ''): CairnError {
  if (isCairnError(error)) return error;
  const message = error instanceof Error ? error.message : String(error);
  return new CairnError('E_UNAVAILABLE', `${what}: ${message}${hint}`, { cause: message });
}

/** A message's chain seq: from its `Cairn-Chain-Seq` header when it has one, else from its body; null when neither says. */
function chainSeqOf(header: string | undefined, data: Uint8Array): number | null {
  const fromHeader = header === undefined || header === '' ? NaN : Number(header);
  if (Number.isSafeInteger(fromHeader) && fromHeader > 0) return fromHeader;
  try {
    const seq = (JSON.parse(new TextDecoder().decode(data)) as { seq?: unknown }).seq;
    return typeof seq === 'number' && Number.isSafeInteger(seq) && seq > 0 ? seq : null;
  } catch {
    return null;
  }
}

/** The messages of a chain held in memory as stored receipts, each parsed once: the frozen receipt is shared by every later read. */
function heldReceipts(held: readonly CachedMessage[]): StoredReceipt[] {
  return held.map((m) => {
    m.parsed ??= deepFreeze(parseStoredReceipt(m.data, { subject: m.subject, streamSeq: m.streamSeq }));
    return { streamSeq: m.streamSeq, subject: m.subject, receipt: m.parsed as ReceiptEnvelope };
  });
}

function toCached(m: DirectMessage): CachedMessage & { seq: number | null } {
  return { streamSeq: m.streamSeq, subject: m.subject, data: m.data, msgId: m.headers.get(PubHeaders.MsgIdHdr), seq: chainSeqOf(m.headers.get(CHAIN_SEQ_HEADER), m.data) };
}

/** Whether `messages` are chain seqs `heldLength + 1`, `+ 2`, … (by their `Cairn-Chain-Seq` header, else their body). */
function follows(messages: readonly (CachedMessage & { seq: number | null })[], heldLength: number): boolean {
  return messages.every((m, i) => m.seq === heldLength + i + 1);
}

/** A chain id, checked (E_INPUT): one safe subject token. */
function checkChainId(chainId: string): void {
  const parsed = ChainIdSchema.safeParse(chainId);
  if (!parsed.success) {
    throw new CairnError('E_INPUT', `invalid chain id ${JSON.stringify(chainId)}: ${parsed.error.issues[0]?.message ?? 'invalid'}`);
  }
}

interface BatchItem {
  subject: string;
  prepared: PreparedAppend;
}

/** The server's largest atomic batch (its default `max_msgs`). */
const MAX_BATCH = 1000;
/** JetStream's "atomic publish batch contains duplicate message id" (10201). */
const BATCH_HOLDS_DUPLICATE = 10201;
/** JetStream's "atomic publish batch is incomplete" (10176): a commit whose earlier messages the leader never had. */
const BATCH_INCOMPLETE = 10176;
