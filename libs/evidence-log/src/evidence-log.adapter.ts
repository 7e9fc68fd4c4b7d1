import { assertUnreachable, CairnError, ChainIdSchema, isCairnError } from '@cairn/contracts';
import type { ReceiptEnvelope } from '@cairn/contracts';
import { jetstreamManager, JetStreamApiCodes, JetStreamApiError, PubHeaders } from '@nats-io/jetstream';
import type { Consumer, ConsumerMessages, JetStreamClient, JetStreamManager, JsMsg, StoredMsg, StreamInfo } from '@nats-io/jetstream';
import { connect, delay, headers } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { GENESIS_HEAD, prepareAppend, sealOnto } from './append-body.builder.js';
import type { AppendInput, ChainHead, PreparedAppend } from './append-body.builder.js';
import { ChainHeadCache } from './chain-head.cache.js';
import type { CachedHead } from './chain-head.cache.js';
import { MAX_RECEIPT_BYTES, resolveEvidenceLogOptions } from './evidence-log.options.js';
import type { EvidenceLogOptions, ResolvedEvidenceLogOptions } from './evidence-log.options.js';
import { evidenceStreamConfig, evidenceStreamProblems, evidenceSubjects } from './evidence-stream.config.js';
import { JetStreamAckPublisher } from './jetstream-ack.publisher.js';
import { KeyedSerialQueue } from './keyed-serial.queue.js';
import { parseStoredReceipt } from './stored-receipt.parser.js';

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

export interface RawStoredMessage {
  streamSeq: number;
  subject: string;
  data: Uint8Array;
  /** When the server stored it, RFC 3339 UTC with milliseconds. */
  time: string;
}

export interface ReadAllOptions {
  fromStreamSeq?: number;
  toStreamSeq?: number;
}

/** Messages asked for per pull: large enough that a rebuild is never waiting on the server. */
const READ_BATCH = 4096;
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
 * The evidence log on JetStream: one subject per chain (`<prefix>.<chain id>`) in one
 * append-only stream. Appends are optimistic (compare-and-set on the subject's last stream
 * sequence) and idempotent (a message id derived from the event's logical identity); see
 * docs/adr/0001-evidence-subjects-and-concurrency.md.
 */
export class EvidenceLog {
  readonly streamName: string;
  readonly subjectPrefix: string;
  private readonly heads: ChainHeadCache;
  private readonly queue = new KeyedSerialQueue();
  /** Made on the first append, so a log opened only to read or to ensure the stream subscribes to nothing. */
  private publisher: JetStreamAckPublisher | null = null;
  private closed = false;
  private readonly encoder = new TextEncoder();

  private constructor(
    private readonly nc: NatsConnection,
    private readonly jsm: JetStreamManager,
    private readonly js: JetStreamClient,
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
    let nc: NatsConnection;
    try {
      nc = await connect({ servers: resolved.servers.split(','), name: resolved.name });
    } catch (error) {
      throw unavailable(`cannot connect to NATS at ${resolved.servers}`, error);
    }
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
    let jsm: JetStreamManager;
    try {
      jsm = await jetstreamManager(nc);
    } catch (error) {
      throw unavailable('JetStream is not available', error);
    }
    const log = new EvidenceLog(nc, jsm, jsm.jetstream(), options, owns);
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
        info = await this.jsm.streams.add(evidenceStreamConfig(this.options));
        created = true;
      } catch (error) {
        // Another process created it first: check theirs like any existing stream.
        if (!(error instanceof JetStreamApiError && error.code === STREAM_NAME_IN_USE)) {
          throw unavailable(`cannot create stream ${this.streamName}`, error);
        }
        info = await this.streamInfo();
        if (info === null) throw unavailable(`stream ${this.streamName} vanished while being created`, error);
      }
    }
    const problems = evidenceStreamProblems(info.config, this.options, created);
    if (problems.length > 0) {
      throw new CairnError('E_UNAVAILABLE', `stream ${this.streamName} cannot hold evidence: ${problems.join('; ')}`, {
        stream: this.streamName,
        problems,
      });
    }
  }

  /** `<prefix>.<chain id>`; the chain id must be a run or sandbox id (E_INPUT otherwise). */
  subjectFor(chainId: string): string {
    const parsed = ChainIdSchema.safeParse(chainId);
    if (!parsed.success) {
      throw new CairnError('E_INPUT', `invalid chain id ${JSON.stringify(chainId)}: ${parsed.error.issues[0]?.message ?? 'invalid'}`);
    }
    return `${this.subjectPrefix}.${chainId}`;
  }

  /**
   * Appends one event to a chain and returns its receipt. Appending the same logical event
   * (chain, causation, type, key) again stores nothing and returns the stored receipt with
   * `duplicate: true`. Invalid input is E_INPUT with nothing published; a chain that keeps
   * moving under us for `maxAttempts` is E_CONFLICT; a broker failure is E_UNAVAILABLE.
   */
  async append(chainId: string, input: AppendInput): Promise<AppendResult> {
    // Validated and queued synchronously, so appends to one chain keep their call order.
    const subject = this.subjectFor(chainId);
    const prepared = prepareAppend(chainId, input);
    if (this.closed) throw new CairnError('E_UNAVAILABLE', `the evidence log on ${this.streamName} is closed`);
    this.publisher ??= new JetStreamAckPublisher(this.nc, this.options.publishTimeoutMs);
    const publisher = this.publisher;
    return this.queue.run(chainId, () => this.appendPrepared(publisher, subject, prepared));
  }

  private async appendPrepared(publisher: JetStreamAckPublisher, subject: string, prepared: PreparedAppend): Promise<AppendResult> {
    const { chainId, msgId } = prepared;
    const cached = this.heads.get(chainId);
    let head: ChainHead;
    // Unknown head, or our event is the head (a retry, perhaps past the duplicate window): read it.
    if (cached === undefined || cached.msgId === msgId) {
      const stored = await this.readHead(subject);
      if (stored?.head.msgId === msgId) return this.alreadyStored(chainId, stored, 0);
      head = stored?.head ?? GENESIS_HEAD;
    } else {
      head = cached;
    }
    let attempts = 0;
    for (;;) {
      attempts += 1;
      const { receipt, canonical } = sealOnto(prepared, head);
      const data = this.encoder.encode(canonical);
      const limit = this.receiptByteLimit();
      if (data.byteLength > limit) {
        throw new CairnError('E_TOO_LARGE', `a receipt of ${data.byteLength} bytes exceeds ${limit}`, { chainId, bytes: data.byteLength, limit });
      }
      const hdrs = headers();
      hdrs.set(PubHeaders.MsgIdHdr, msgId);
      hdrs.set(PubHeaders.ExpectedLastSubjectSequenceHdr, String(head.streamSeq));
      hdrs.set(CHAIN_SEQ_HEADER, String(receipt.seq));
      if (prepared.traceparent !== null) hdrs.set('traceparent', prepared.traceparent);
      const outcome = await publisher.publish(subject, data, hdrs);
      switch (outcome.kind) {
        case 'stored': {
          if (outcome.stream !== this.streamName) {
            throw new CairnError('E_INTERNAL', `${subject} was stored by stream ${outcome.stream}, not ${this.streamName}`, { chainId });
          }
          if (outcome.duplicate) {
            // Stored before (inside the duplicate window), perhaps not as the head: return that one.
            const stored = await this.readStored(outcome.seq);
            if (stored.subject !== subject) {
              throw new CairnError('E_INTERNAL', `message id ${msgId} of ${chainId} is stored on ${stored.subject}`, { chainId });
            }
            return { receipt: stored.receipt, streamSeq: outcome.seq, duplicate: true, attempts };
          }
          this.heads.advance(chainId, { streamSeq: outcome.seq, seq: receipt.seq, hash: receipt.hash, msgId });
          return { receipt, streamSeq: outcome.seq, duplicate: false, attempts };
        }
        case 'rejected':
          this.heads.forget(chainId);
          if (outcome.errCode !== JetStreamApiCodes.StreamWrongLastSequence) {
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
          throw new CairnError('E_UNAVAILABLE', `no JetStream stream answers for ${subject} (is ${this.streamName} there?)`, { chainId });
        case 'closed':
          throw new CairnError('E_UNAVAILABLE', `append to ${chainId} cannot be acknowledged: ${outcome.reason}`, { chainId });
        default:
          return assertUnreachable(outcome, 'publish outcome');
      }
      await delay(Math.random() * Math.min(BACKOFF_CAP_MS, BACKOFF_BASE_MS * 2 ** (attempts - 1)));
      const stored = await this.readHead(subject);
      if (stored?.head.msgId === msgId) return this.alreadyStored(chainId, stored, attempts);
      head = stored?.head ?? GENESIS_HEAD;
    }
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
    const stored = await this.readHead(this.subjectFor(chainId));
    if (stored === null) return null;
    this.heads.advance(chainId, stored.head);
    const { streamSeq, seq, hash } = stored.head;
    return { streamSeq, seq, hash };
  }

  /** The chain's receipts in seq order from seq 1, exactly as stored, up to its head when called. */
  async *readChain(chainId: string): AsyncIterable<StoredReceipt> {
    const subject = this.subjectFor(chainId);
    const last = await this.directGet({ last_by_subj: subject });
    if (last === null) return;
    yield* this.readRange(subject, 1, last.seq, (m) => ({
      streamSeq: m.seq,
      subject: m.subject,
      receipt: parseStoredReceipt(m.data, { subject: m.subject, streamSeq: m.seq }),
    }));
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
    yield* this.readRange(evidenceSubjects(this.subjectPrefix), from, to, (m) => ({
      streamSeq: m.seq,
      subject: m.subject,
      data: m.data,
      time: m.timestamp,
    }));
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
    if (!this.ownsConnection || this.nc.isClosed()) return;
    await this.nc.drain();
  }

  /** An ordered consumer over `filter` from `from` to `to` (stream seqs), cleaned up however it ends. */
  private async *readRange<T>(filter: string, from: number, to: number, map: (m: JsMsg) => T): AsyncGenerator<T> {
    let consumer: Consumer;
    try {
      consumer = await this.js.consumers.get(this.streamName, { filter_subjects: filter, opt_start_seq: from });
    } catch (error) {
      throw unavailable(`cannot read ${filter}`, error);
    }
    let messages: ConsumerMessages | undefined;
    let reached = from - 1;
    try {
      messages = await consumer.consume({ max_messages: READ_BATCH });
      for await (const m of messages) {
        reached = m.seq;
        yield map(m);
        // pending 0: nothing after this one matches, even if `to` was never stored under the filter.
        if (reached >= to || m.info.pending === 0) return;
      }
    } finally {
      await messages?.close();
      await consumer.delete().catch(() => false);
    }
    throw new CairnError('E_UNAVAILABLE', `the read of ${filter} stopped at stream seq ${reached}, before ${to}`);
  }

  private async readHead(subject: string): Promise<StoredHead | null> {
    const m = await this.directGet({ last_by_subj: subject });
    if (m === null) return null;
    const receipt = parseStoredReceipt(m.data, { subject, streamSeq: m.seq });
    return { head: { streamSeq: m.seq, seq: receipt.seq, hash: receipt.hash, msgId: m.header.get(PubHeaders.MsgIdHdr) }, receipt };
  }

  private async readStored(streamSeq: number): Promise<StoredReceipt> {
    const m = await this.directGet({ seq: streamSeq });
    if (m === null) throw new CairnError('E_UNAVAILABLE', `stream seq ${streamSeq} of ${this.streamName} is missing`);
    return { streamSeq, subject: m.subject, receipt: parseStoredReceipt(m.data, { subject: m.subject, streamSeq }) };
  }

  private async directGet(query: { last_by_subj: string } | { seq: number }): Promise<StoredMsg | null> {
    try {
      return await this.jsm.direct.getMessage(this.streamName, query);
    } catch (error) {
      throw unavailable(`cannot read ${this.streamName}`, error);
    }
  }

  private async streamInfo(): Promise<StreamInfo | null> {
    try {
      return await this.jsm.streams.info(this.streamName);
    } catch (error) {
      if (error instanceof JetStreamApiError && error.code === JetStreamApiCodes.StreamNotFound) return null;
      throw unavailable(`cannot read stream ${this.streamName}`, error);
    }
  }
}

/** JetStream's "stream name already in use" (with a different config). */
const STREAM_NAME_IN_USE = 10058;

function unavailable(what: string, error: unknown): CairnError {
  if (isCairnError(error)) return error;
  const message = error instanceof Error ? error.message : String(error);
  return new CairnError('E_UNAVAILABLE', `${what}: ${message}`, { cause: message });
}
