import { CONSUMER_PULL_EXPIRES_MS, whileLeaderless } from '@cairn/config';
import { CairnError, deepFreeze, isCairnError, parseEvidenceReceipt, ReceiptEnvelopeSchema } from '@cairn/contracts';
import type { ReceiptEnvelope } from '@cairn/contracts';
import { EvidenceLog, isNotAReceipt, isSubjectType, KeyedSerialQueue, parseEvidenceSubject, typeSubjects } from '@cairn/evidence-log';
import { readRunChain } from '@cairn/lifecycle';
import { AckPolicy, DeliverPolicy, jetstreamManager, JetStreamApiCodes, JetStreamApiError, PubHeaders } from '@nats-io/jetstream';
import type { ConsumerMessages, JetStreamManager, JsMsg } from '@nats-io/jetstream';
import { nanos } from '@nats-io/transport-node';
import { inSpan, markSpanFailed, parentFromHeaders } from '@cairn/tracing';
import type { NatsConnection } from '@nats-io/transport-node';
import { recordChainBreak } from './chain-break.js';
import type { JsonLogger } from './json-logger.js';
import { ReactionContext } from './reaction-context.js';

/** What a service does with the receipts it reacts to. */
export interface ReactorHandler {
  /** Event types this service reacts to: its consumer takes only these (`<prefix>.*.<type>`). */
  readonly types: ReadonlySet<string>;
  handle(ctx: ReactionContext): Promise<void>;
  /**
   * Called once a receipt has failed `maxDeliver` times with an error that is not a passing
   * outage. The default fails a run chain with `E_UNKNOWN_STATE` (I-5): never hang, never guess.
   */
  giveUp?(ctx: ReactionContext, error: unknown): Promise<void>;
}

export interface EvidenceReactorOptions {
  service: string;
  /** Durable consumer name, e.g. `cairn-policy`. */
  durable: string;
  nc: NatsConnection;
  log: EvidenceLog;
  handler: ReactorHandler;
  logger: JsonLogger;
  /** Receipts handled at once, across chains; one chain's receipts are always handled in order. */
  concurrency?: number;
  ackWaitMs?: number;
  /** Deliveries of one receipt before `giveUp`. */
  maxDeliver?: number;
  /**
   * The longest one reaction may take. The keep-alive would otherwise extend a stuck handler
   * forever: past this the receipt counts as a passing outage and is delivered again (the
   * reactions are idempotent and guarded, so a late finish of the stuck one stores nothing twice).
   */
  handlerTimeoutMs?: number;
  /**
   * Where a durable made by `start` begins: a stream sequence, or only what is appended next.
   * An existing durable keeps its own position. Default: the whole stream.
   */
  startAt?: { seq: number } | 'new';
}

const DEFAULTS = { concurrency: 8, ackWaitMs: 30_000, maxDeliver: 5, handlerTimeoutMs: 60_000 } as const;

/**
 * A service's durable pull consumer on the evidence stream (docs/adr/0003), filtered to the types
 * its handler reacts to (docs/adr/0012): decode and validate each receipt, hand it to the handler,
 * ack after the handler's appends are stored. A passing outage (E_UNAVAILABLE) is retried without limit; any other
 * failure is retried `maxDeliver` times, then the handler gives up on the run, on the record.
 */
export class EvidenceReactor {
  private messages: ConsumerMessages | null = null;
  private loop: Promise<void> | null = null;
  private readonly perChain = new KeyedSerialQueue();
  private readonly inFlight = new Set<Promise<void>>();
  private readonly options: Required<Omit<EvidenceReactorOptions, 'handler' | 'logger' | 'nc' | 'log' | 'startAt'>> &
    Pick<EvidenceReactorOptions, 'handler' | 'logger' | 'nc' | 'log' | 'startAt'>;
  private handled = 0;

  constructor(options: EvidenceReactorOptions) {
    this.options = { ...DEFAULTS, ...options };
  }

  get handledCount(): number {
    return this.handled;
  }

  async start(): Promise<void> {
    const { nc, log, durable, concurrency, ackWaitMs } = this.options;
    const jsm = await jetstreamManager(nc);
    // In a cluster a consumer answers once it has a leader: just made, or after losing one.
    await whileLeaderless(() => ensureDurable(jsm, log.streamName, {
      durable_name: durable,
      ack_policy: AckPolicy.Explicit,
      ...deliverFrom(this.options.startAt),
      filter_subjects: reactorFilters(log.subjectPrefix, this.options.handler.types),
      ack_wait: nanos(ackWaitMs),
      max_ack_pending: concurrency * 4,
      max_deliver: -1,
    }));
    const consumer = await whileLeaderless(() => jsm.jetstream().consumers.get(log.streamName, durable));
    this.messages = await consumer.consume({ max_messages: concurrency * 2, expires: CONSUMER_PULL_EXPIRES_MS });
    this.loop = this.run(this.messages);
  }

  /** Stops pulling and waits for the receipts in hand. */
  async stop(): Promise<void> {
    if (this.messages === null) return;
    await this.messages.close();
    await this.loop;
    await Promise.allSettled([...this.inFlight]);
    this.messages = null;
  }

  private async run(messages: ConsumerMessages): Promise<void> {
    for await (const msg of messages) {
      // In delivery order, before anything waits: the log can then serve this chain's reads from memory.
      this.options.log.observe(msg.subject, msg.seq, msg.data, msg.headers?.get('Cairn-Chain-Seq'));
      while (this.inFlight.size >= this.options.concurrency) await Promise.race(this.inFlight);
      // One chain at a time, whatever the type: its subject also names the type (ADR 0013).
      const chain = parseEvidenceSubject(this.options.log.subjectPrefix, msg.subject)?.chainId ?? msg.subject;
      const task = this.perChain.run(chain, () => this.process(msg));
      this.inFlight.add(task);
      void task.finally(() => this.inFlight.delete(task));
    }
  }

  private async process(msg: JsMsg): Promise<void> {
    const { handler, logger, service } = this.options;
    let raw: unknown;
    try {
      raw = JSON.parse(new TextDecoder().decode(msg.data));
    } catch {
      // A poison message on a chain's subject: the chain is broken there, and its run stops on the record.
      logger.write('error', 'a message on a chain is not JSON: not a receipt', { subject: msg.subject, stream_seq: msg.seq });
      await this.brokenChain(msg, parseEvidenceSubject(this.options.log.subjectPrefix, msg.subject)?.chainId ?? null);
      return;
    }
    // Most receipts are for other services: skip them before paying for a full validation. What is
    // skipped is never acted on, so only what this service reacts to needs to be proven valid.
    const type = typeof raw === 'object' && raw !== null ? (raw as { type?: unknown }).type : undefined;
    if (typeof type === 'string' && !handler.types.has(type)) {
      msg.ack();
      return;
    }
    // Frozen, the receipt is checked once in this process: chain reads hand out this same object.
    const parsed = parseEvidenceReceipt(deepFreeze(raw));
    if (parsed.ok) this.options.log.adoptParsed(msg.subject, msg.seq, raw as ReceiptEnvelope);
    if (!parsed.ok) {
      if (!ReceiptEnvelopeSchema.safeParse(raw).success) {
        // Not even the envelope: no receipt at all, so the chain is broken at it (ADR 0033).
        logger.write('error', 'a message on a chain is not a receipt', { subject: msg.subject, stream_seq: msg.seq, reason: parsed.reason });
        await this.brokenChain(msg, parseEvidenceSubject(this.options.log.subjectPrefix, msg.subject)?.chainId ?? null);
        return;
      }
      // The projector records it as poison; a service never acts on what does not validate.
      logger.write('warn', 'skipping an invalid receipt', { subject: msg.subject, stream_seq: msg.seq, reason: parsed.reason });
      msg.ack();
      return;
    }
    const receipt = parsed.receipt;
    if (!handler.types.has(receipt.type)) {
      msg.ack();
      return;
    }
    const delivery = { streamSeq: msg.seq, msgId: msg.headers?.get(PubHeaders.MsgIdHdr) ?? '', latest: msg.info.pending === 0 };
    const ctx = new ReactionContext(receipt, service, this.options.log, () => msg.working(), delivery);
    const keepAlive = setInterval(() => msg.working(), Math.max(1000, Math.floor(this.options.ackWaitMs / 3)));
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_resolve, reject) => {
      timer = setTimeout(
        () => reject(new CairnError('E_UNAVAILABLE', `${service} took longer than ${this.options.handlerTimeoutMs} ms on ${ctx.eventId}`)),
        this.options.handlerTimeoutMs,
      );
    });
    try {
      // The receipt's own append span is the parent: one run is one trace across every service (ADR 0031).
      const attributes = { 'cairn.chain_id': ctx.chainId, 'cairn.receipt.type': receipt.type, 'cairn.receipt.seq': receipt.seq, 'messaging.message.delivery_count': msg.info.deliveryCount };
      await inSpan(`${service} handle ${receipt.type}`, { kind: 'consumer', parent: parentFromHeaders(msg.headers), attributes }, async (span) => {
        try {
          await Promise.race([handler.handle(ctx), timeout]);
          msg.ack();
          this.handled += 1;
        } catch (error) {
          markSpanFailed(span, error);
          await this.failed(msg, ctx, error);
        }
      });
    } finally {
      clearInterval(keepAlive);
      clearTimeout(timer);
    }
  }

  private async failed(msg: JsMsg, ctx: ReactionContext, error: unknown): Promise<void> {
    const { logger, handler, maxDeliver } = this.options;
    const deliveries = msg.info.deliveryCount;
    const code = isCairnError(error) ? error.code : 'E_INTERNAL';
    const detail = { event: ctx.eventId, type: ctx.receipt.type, deliveries, code, error: error instanceof Error ? error.message : String(error) };
    if (isNotAReceipt(error)) {
      // Redelivering cannot help: the message that is not a receipt is stored for good. The run stops on the record.
      logger.write('error', 'reaction met a message that is not a receipt on its chain; stopping the run on the record', detail);
      await this.brokenChain(msg, ctx.chainId);
      return;
    }
    if (code === 'E_UNAVAILABLE') {
      logger.write('warn', 'reaction failed on an outage; will retry', detail);
      msg.nak(retryAfterMs(error) ?? backoffMs(deliveries));
      return;
    }
    if (deliveries < maxDeliver) {
      logger.write('error', 'reaction failed; will retry', detail);
      msg.nak(backoffMs(deliveries));
      return;
    }
    logger.write('error', 'reaction failed for good; giving up on the chain', detail);
    try {
      await (handler.giveUp ?? defaultGiveUp)(ctx, error);
      msg.ack();
    } catch (giveUpError) {
      if (isNotAReceipt(giveUpError)) {
        await this.brokenChain(msg, ctx.chainId);
        return;
      }
      logger.write('fatal', 'could not record giving up; will retry', { ...detail, giveUpError: String(giveUpError) });
      msg.nak(backoffMs(deliveries));
    }
  }

  /**
   * A chain whose subjects hold a message that is not a receipt (ADR 0033): `recordChainBreak`
   * ends its run on the record (alert.raised and run.failed E_CHAIN_BROKEN), then the message is
   * acked. An outage is tried again without limit; any other failure `maxDeliver` times, then the
   * message is terminated with a fatal log line — never redelivered for ever.
   */
  private async brokenChain(msg: JsMsg, chainId: string | null): Promise<void> {
    const { logger, log, service, maxDeliver } = this.options;
    if (chainId === null) {
      msg.ack();
      return;
    }
    const deliveries = msg.info.deliveryCount;
    try {
      const outcome = await recordChainBreak({ log, actor: service, logger }, chainId);
      logger.write('info', 'a broken chain is on the record', { run_id: chainId, outcome, stream_seq: msg.seq });
      msg.ack();
    } catch (error) {
      const detail = { run_id: chainId, stream_seq: msg.seq, deliveries, error: error instanceof Error ? error.message : String(error) };
      if (isCairnError(error) && error.code === 'E_UNAVAILABLE') {
        logger.write('warn', 'could not record a broken chain on an outage; will retry', detail);
        msg.nak(backoffMs(deliveries));
      } else if (deliveries < maxDeliver) {
        logger.write('error', 'could not record a broken chain; will retry', detail);
        msg.nak(backoffMs(deliveries));
      } else {
        logger.write('fatal', 'could not record a broken chain; giving up on this message', detail);
        msg.term();
      }
    }
  }
}

/**
 * Fails the run E_UNKNOWN_STATE, on the head it read: a seal landing first (or any other receipt,
 * then read again) is never followed by it — nothing may follow `run.sealed` (I-11).
 */
export async function defaultGiveUp(ctx: ReactionContext, error: unknown): Promise<void> {
  if (!ctx.chainId.startsWith('run_')) return;
  const message = error instanceof Error ? error.message : String(error);
  const fields = { error_code: 'E_UNKNOWN_STATE', message: `${ctx.service} could not handle ${ctx.receipt.type}: ${message}`.slice(0, 2000) };
  await ctx.reactOnChain(async ({ receipts, headSeq }) => {
    if (readRunChain(receipts)?.view?.sealed ?? false) return;
    await ctx.appendAt(headSeq, 'run.failed', fields, 'give-up');
  });
}

/**
 * A wait the handler asked for (`details.retryAfterMs` of an E_UNAVAILABLE), with jitter: a run
 * waiting for room is tried again soon, however long it has waited, not after a growing backoff.
 */
function retryAfterMs(error: unknown): number | null {
  const asked = isCairnError(error) ? (error.details as { retryAfterMs?: unknown } | undefined)?.retryAfterMs : undefined;
  if (typeof asked !== 'number' || !Number.isFinite(asked) || asked <= 0) return null;
  const bounded = Math.min(30_000, asked);
  return Math.round(bounded * (0.75 + Math.random() * 0.5));
}

function backoffMs(deliveries: number): number {
  return Math.min(30_000, 250 * 2 ** Math.max(0, deliveries - 1));
}

function deliverFrom(startAt: EvidenceReactorOptions['startAt']): { deliver_policy: DeliverPolicy; opt_start_seq?: number } {
  if (startAt === undefined) return { deliver_policy: DeliverPolicy.All };
  if (startAt === 'new') return { deliver_policy: DeliverPolicy.New };
  return { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: Math.max(1, startAt.seq) };
}

/** A reactor's filter subjects: one per type its handler reacts to, sorted (E_INTERNAL for a type that cannot be a subject). */
export function reactorFilters(subjectPrefix: string, types: ReadonlySet<string>): string[] {
  if (types.size === 0) throw new CairnError('E_INTERNAL', 'a reactor handler reacts to no type');
  for (const type of types) if (!isSubjectType(type)) throw new CairnError('E_INTERNAL', `a reactor handler reacts to ${JSON.stringify(type)}, which is no receipt type`);
  return [...types].sort().map((type) => typeSubjects(subjectPrefix, type));
}

type DurableConfig = Parameters<JetStreamManager['consumers']['add']>[1] & { durable_name: string; filter_subjects: string[] };

async function ensureDurable(jsm: JetStreamManager, stream: string, config: DurableConfig): Promise<void> {
  try {
    const existing = await jsm.consumers.info(stream, config.durable_name);
    if (existing.config.ack_policy !== AckPolicy.Explicit) {
      throw new CairnError('E_CONFLICT', `consumer ${config.durable_name} on ${stream} has another ack policy`);
    }
    const filters = existing.config.filter_subjects ?? (existing.config.filter_subject ? [existing.config.filter_subject] : []);
    // The handler's types are what it takes: a release that reacts to another type, or a consumer made
    // before receipts were routed by type (all of `<prefix>.>`), keeps its position and takes the new filters.
    const refilter = [...filters].sort().join(' ') !== config.filter_subjects.join(' ');
    if (refilter || existing.config.ack_wait !== config.ack_wait || existing.config.max_ack_pending !== config.max_ack_pending) {
      await jsm.consumers.update(stream, config.durable_name, {
        ack_wait: config.ack_wait,
        max_ack_pending: config.max_ack_pending,
        ...(refilter ? { filter_subjects: config.filter_subjects, filter_subject: '' } : {}),
      });
    }
  } catch (error) {
    if (!(error instanceof JetStreamApiError && error.code === JetStreamApiCodes.ConsumerNotFound)) throw error;
    await jsm.consumers.add(stream, config);
  }
}
