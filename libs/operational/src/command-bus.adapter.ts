import { CONSUMER_PULL_EXPIRES_MS, replicasHint, whileLeaderless } from '@cairn/config';
import { CairnError, COMMAND_SCHEMAS, CommandReplySchema, inputIssues, isCairnError } from '@cairn/contracts';
import type { CommandOk, CommandPayload, CommandReply, CommandVerb, ErrorBody, ErrorCode } from '@cairn/contracts';
import { AckPolicy, DeliverPolicy, jetstreamManager, JetStreamApiCodes, JetStreamApiError } from '@nats-io/jetstream';
import type { ConsumerMessages, JetStreamClient, JetStreamManager, JsMsg, StreamInfo } from '@nats-io/jetstream';
import { inboxOf } from '@cairn/evidence-log';
import { headers, nanos, nuid } from '@nats-io/transport-node';
import { injectTraceHeaders, inSpan, markSpanFailed, parentFromHeaders } from '@cairn/tracing';
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import { commandStreamConfig, commandStreamProblems, commandSubject, resolveCommandBusOptions } from './command-stream.config.js';
import type { CommandBusOptions, ResolvedCommandBusOptions } from './command-stream.config.js';

/** Header naming the core-NATS subject the reply goes to. */
export const REPLY_TO_HEADER = 'Cairn-Reply-To';
const MSG_ID_HEADER = 'Nats-Msg-Id';

export interface SendOptions {
  /** JetStream message id: the same id inside the duplicate window is stored once. */
  msgId: string;
  /** How long to wait for the reply; default 10 s. Past it the reply is `E_UNAVAILABLE`. */
  timeoutMs?: number;
}

export interface CommandMeta {
  /** The message id the sender gave (or JetStream's stream sequence when it gave none). */
  msgId: string;
  deliveryCount: number;
  streamSeq: number;
}

/** Does what the command asks; throws a `CairnError` to answer with its code. */
export type CommandHandler<V extends CommandVerb> = (command: CommandPayload<V>, meta: CommandMeta) => Promise<Omit<CommandOk, 'ok'>>;

export interface ServeOptions {
  /** Commands handled at once; default 8. */
  concurrency?: number;
  /** Unacked for this long, a command is delivered again; default 30 s. */
  ackWaitMs?: number;
  /** Deliveries of a command whose handler keeps failing on an outage before it is answered with the error; default 5. */
  maxDeliver?: number;
  /**
   * The longest one handling may take; default 60 s. Past it the command counts as an outage: it is
   * delivered again (commands are idempotent by message id), and after `maxDeliver` answered
   * `E_UNAVAILABLE`. The keep-alive would otherwise hold a stuck handler's command for ever.
   */
  handlerTimeoutMs?: number;
  /** Told when the consumer itself fails and serving stops (default: nothing; `stop()` rethrows it). */
  onError?: (error: unknown) => void;
}

export interface CommandServer {
  readonly verb: CommandVerb;
  readonly handledCount: number;
  /** Stops taking commands and waits for the ones in hand. */
  stop(): Promise<void>;
}

const DEFAULT_TIMEOUT_MS = 10_000;

/**
 * Commands before a run exists (docs/adr/0003): published to a bounded JetStream work queue with a
 * message id, answered by the serving service on a core-NATS inbox the sender names in a header.
 * `send` never throws for an answer it can give: a transport failure or a silence is an
 * `E_UNAVAILABLE` reply, a payload that breaks its contract an `E_INPUT` one.
 */
export class CommandBus {
  readonly streamName: string;
  readonly subjectPrefix: string;
  private readonly encoder = new TextEncoder();
  private readonly decoder = new TextDecoder();

  private constructor(
    private readonly nc: NatsConnection,
    private readonly jsm: JetStreamManager,
    private readonly js: JetStreamClient,
    private readonly options: ResolvedCommandBusOptions,
  ) {
    this.streamName = options.stream;
    this.subjectPrefix = options.subjectPrefix;
  }

  /** Uses the caller's connection (never closes it) and creates or checks the command stream. */
  static async open(nc: NatsConnection, options: CommandBusOptions = {}): Promise<CommandBus> {
    const resolved = resolveCommandBusOptions(options);
    const jsm = await unavailableOnError('JetStream is not available', () => jetstreamManager(nc));
    const bus = new CommandBus(nc, jsm, jsm.jetstream(), resolved);
    await bus.ensureStream();
    return bus;
  }

  private async ensureStream(): Promise<void> {
    let info = await this.streamInfo();
    if (info === null) {
      try {
        info = await whileLeaderless(() => this.jsm.streams.add(commandStreamConfig(this.options)));
      } catch (error) {
        // Another process may have created it first: then check theirs like any existing stream.
        info = await this.streamInfo();
        if (info === null) {
          const hint = replicasHint(error instanceof JetStreamApiError ? error.code : undefined, this.options.replicas);
          throw asUnavailable(`cannot create stream ${this.streamName}`, error, hint);
        }
      }
    }
    const problems = commandStreamProblems(info.config, this.options);
    if (problems.length > 0) {
      throw new CairnError('E_UNAVAILABLE', `stream ${this.streamName} cannot carry commands: ${problems.join('; ')}`, { problems });
    }
  }

  private async streamInfo(): Promise<StreamInfo | null> {
    try {
      return await whileLeaderless(() => this.jsm.streams.info(this.streamName));
    } catch (error) {
      if (error instanceof JetStreamApiError && error.code === JetStreamApiCodes.StreamNotFound) return null;
      throw asUnavailable(`cannot read stream ${this.streamName}`, error);
    }
  }

  subjectFor(verb: CommandVerb): string {
    return commandSubject(this.subjectPrefix, verb);
  }

  /** Publishes the command and waits for its reply. */
  async send<V extends CommandVerb>(verb: V, payload: CommandPayload<V>, options: SendOptions): Promise<CommandReply> {
    return inSpan(`command ${verb}`, { kind: 'producer', attributes: { 'cairn.command': verb } }, async (span) => {
      const reply = await this.sendTraced(verb, payload, options);
      if (!reply.ok) span?.setAttribute('cairn.error_code', reply.error.code);
      return reply;
    });
  }

  private async sendTraced<V extends CommandVerb>(verb: V, payload: CommandPayload<V>, options: SendOptions): Promise<CommandReply> {
    const parsed = COMMAND_SCHEMAS[verb].safeParse(payload);
    if (!parsed.success) {
      const issues = inputIssues(parsed.error);
      return failed({ code: 'E_INPUT', message: `invalid ${verb} command: ${issues.map((i) => `${i.path}: ${i.message}`).join('; ')}`, details: { issues } });
    }
    const data = this.encoder.encode(JSON.stringify(parsed.data));
    const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    const inbox = inboxOf(this.nc);
    const waiting = this.awaitReply(inbox, timeoutMs, verb);
    try {
      let ack = await this.publish(verb, data, inbox, options.msgId, timeoutMs);
      if (ack.duplicate) {
        // Stored before (perhaps already answered to another inbox): the handler is idempotent, so
        // ask again under a fresh id and this caller gets an answer of its own.
        ack = await this.publish(verb, data, inbox, `${options.msgId}~${nuid.next()}`, timeoutMs);
      }
    } catch (error) {
      waiting.cancel();
      return failed({ code: 'E_UNAVAILABLE', message: `cannot publish the ${verb} command: ${errorMessage(error)}` });
    }
    return waiting.reply;
  }

  private async publish(verb: CommandVerb, data: Uint8Array, inbox: string, msgId: string, timeoutMs: number) {
    const hdrs = headers();
    hdrs.set(REPLY_TO_HEADER, inbox);
    injectTraceHeaders(hdrs);
    return this.js.publish(this.subjectFor(verb), data, { msgID: msgId, headers: hdrs, timeout: Math.min(timeoutMs, 5000) });
  }

  private awaitReply(inbox: string, timeoutMs: number, verb: CommandVerb): { reply: Promise<CommandReply>; cancel: () => void } {
    let sub: Subscription | null = null;
    let timer: NodeJS.Timeout | undefined;
    const reply = new Promise<CommandReply>((resolve) => {
      if (this.nc.isClosed()) {
        resolve(failed({ code: 'E_UNAVAILABLE', message: `cannot send ${verb}: the NATS connection is closed` }));
        return;
      }
      sub = this.nc.subscribe(inbox, {
        max: 1,
        callback: (error, msg) => {
          clearTimeout(timer);
          if (error !== null) {
            resolve(failed({ code: 'E_UNAVAILABLE', message: `the reply to ${verb} was lost: ${error.message}` }));
            return;
          }
          resolve(this.decodeReply(msg.data, verb));
        },
      });
      timer = setTimeout(() => {
        sub?.unsubscribe();
        resolve(failed({ code: 'E_UNAVAILABLE', message: `no reply to the ${verb} command within ${timeoutMs} ms` }));
      }, timeoutMs);
    });
    return {
      reply,
      cancel: () => {
        clearTimeout(timer);
        sub?.unsubscribe();
      },
    };
  }

  private decodeReply(data: Uint8Array, verb: CommandVerb): CommandReply {
    try {
      const parsed = CommandReplySchema.safeParse(JSON.parse(this.decoder.decode(data)));
      if (parsed.success) return parsed.data;
    } catch {
      // falls through: not JSON
    }
    return failed({ code: 'E_INTERNAL', message: `the reply to ${verb} does not match its contract` });
  }

  /**
   * Takes `verb` commands with the durable pull consumer `durable` and answers each: the handler's
   * result as `{ ok: true, … }`, a `CairnError` it throws as `{ ok: false, error }`. An outage
   * (`E_UNAVAILABLE`, or an error that is not a CairnError) is retried `maxDeliver` times before it
   * is answered, so a short database hiccup does not fail a submission.
   */
  async serve<V extends CommandVerb>(verb: V, durable: string, handler: CommandHandler<V>, options: ServeOptions = {}): Promise<CommandServer> {
    const concurrency = options.concurrency ?? 8;
    const maxDeliver = options.maxDeliver ?? 5;
    const ackWaitMs = options.ackWaitMs ?? 30_000;
    const handlerTimeoutMs = options.handlerTimeoutMs ?? 60_000;
    await this.ensureConsumer(durable, this.subjectFor(verb), ackWaitMs, concurrency);
    const consumer = await unavailableOnError(`cannot open consumer ${durable}`, () => whileLeaderless(() => this.js.consumers.get(this.streamName, durable)));
    const messages = await unavailableOnError(`cannot consume ${durable}`, () => consumer.consume({ max_messages: concurrency * 2, expires: CONSUMER_PULL_EXPIRES_MS }));
    return new ServingLoop(verb, messages, concurrency, (msg) => this.handleOne(verb, msg, handler, maxDeliver, handlerTimeoutMs), options.onError);
  }

  private async ensureConsumer(durable: string, subject: string, ackWaitMs: number, concurrency: number): Promise<void> {
    try {
      const info = await whileLeaderless(() => this.jsm.consumers.info(this.streamName, durable));
      if (info.config.filter_subject !== subject) {
        throw new CairnError('E_CONFLICT', `consumer ${durable} on ${this.streamName} takes ${String(info.config.filter_subject)}, not ${subject}`);
      }
    } catch (error) {
      if (isCairnError(error)) throw error;
      if (!(error instanceof JetStreamApiError && error.code === JetStreamApiCodes.ConsumerNotFound)) throw asUnavailable(`cannot read consumer ${durable}`, error);
      await unavailableOnError(`cannot create consumer ${durable}`, () =>
        whileLeaderless(() => this.jsm.consumers.add(this.streamName, {
          durable_name: durable,
          filter_subject: subject,
          ack_policy: AckPolicy.Explicit,
          deliver_policy: DeliverPolicy.All,
          ack_wait: nanos(ackWaitMs),
          max_ack_pending: concurrency * 4,
          max_deliver: -1,
        })),
      );
    }
  }

  private async handleOne<V extends CommandVerb>(verb: V, msg: JsMsg, handler: CommandHandler<V>, maxDeliver: number, handlerTimeoutMs: number): Promise<void> {
    const replyTo = msg.headers?.get(REPLY_TO_HEADER) ?? '';
    const answer = (reply: CommandReply) => {
      if (replyTo !== '') this.nc.publish(replyTo, this.encoder.encode(JSON.stringify(reply)));
    };
    let raw: unknown;
    try {
      raw = JSON.parse(this.decoder.decode(msg.data));
    } catch {
      answer(failed({ code: 'E_INPUT', message: `the ${verb} command is not JSON` }));
      msg.term('not JSON');
      return;
    }
    const parsed = COMMAND_SCHEMAS[verb].safeParse(raw);
    if (!parsed.success) {
      const issues = inputIssues(parsed.error);
      answer(failed({ code: 'E_INPUT', message: `invalid ${verb} command: ${issues.map((i) => `${i.path}: ${i.message}`).join('; ')}`, details: { issues } }));
      msg.term('invalid');
      return;
    }
    const meta: CommandMeta = { msgId: msg.headers?.get(MSG_ID_HEADER) || String(msg.seq), deliveryCount: msg.info.deliveryCount, streamSeq: msg.seq };
    const keepAlive = setInterval(() => msg.working(), 5000);
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_resolve, reject) => {
      timer = setTimeout(() => reject(new CairnError('E_UNAVAILABLE', `the ${verb} handler did not finish within ${handlerTimeoutMs} ms`)), handlerTimeoutMs);
    });
    const attributes = { 'cairn.command': verb, 'messaging.message.delivery_count': meta.deliveryCount };
    try {
      // The sender's span is the parent: a run's trace starts at the request that submitted it (ADR 0031).
      await inSpan(`handle command ${verb}`, { kind: 'consumer', parent: parentFromHeaders(msg.headers), attributes }, async (span) => {
        try {
          const result = await Promise.race([handler(parsed.data as CommandPayload<V>, meta), timeout]);
          answer({ ok: true, run_id: result.run_id, duplicate: result.duplicate });
          msg.ack();
        } catch (error) {
          markSpanFailed(span, error);
          const body = errorBody(error);
          if (isOutage(body.code) && meta.deliveryCount < maxDeliver) {
            msg.nak(Math.min(5000, 200 * 2 ** (meta.deliveryCount - 1)));
            return;
          }
          answer(failed(body));
          msg.ack();
        }
      });
    } finally {
      clearInterval(keepAlive);
      clearTimeout(timer);
    }
  }
}

/** Pulls and hands messages to `handle`, at most `concurrency` at once. */
class ServingLoop implements CommandServer {
  private handled = 0;
  private readonly inFlight = new Set<Promise<void>>();
  private readonly loop: Promise<void>;
  private stopping: Promise<void> | null = null;
  private failure: unknown = null;

  constructor(
    readonly verb: CommandVerb,
    private readonly messages: ConsumerMessages,
    private readonly concurrency: number,
    private readonly handle: (msg: JsMsg) => Promise<void>,
    onError: ((error: unknown) => void) | undefined,
  ) {
    // Never an unhandled rejection: a failed consumer is reported, and rethrown by stop().
    this.loop = this.run().catch((error: unknown) => {
      this.failure = error;
      onError?.(error);
    });
  }

  get handledCount(): number {
    return this.handled;
  }

  private async run(): Promise<void> {
    for await (const msg of this.messages) {
      while (this.inFlight.size >= this.concurrency) await Promise.race(this.inFlight);
      const task = this.handle(msg)
        .catch(() => msg.nak(1000))
        .finally(() => {
          this.handled += 1;
          this.inFlight.delete(task);
        });
      this.inFlight.add(task);
    }
  }

  stop(): Promise<void> {
    this.stopping ??= (async () => {
      await this.messages.close();
      await this.loop;
      await Promise.allSettled([...this.inFlight]);
      if (this.failure !== null) throw asUnavailable(`serving ${this.verb} failed`, this.failure);
    })();
    return this.stopping;
  }
}

function failed(error: ErrorBody): CommandReply {
  return { ok: false, error };
}

function isOutage(code: ErrorCode): boolean {
  return code === 'E_UNAVAILABLE' || code === 'E_INTERNAL';
}

function errorBody(error: unknown): ErrorBody {
  if (isCairnError(error)) return error.toBody();
  return { code: 'E_INTERNAL', message: errorMessage(error) };
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function asUnavailable(what: string, error: unknown, hint = ''): CairnError {
  if (isCairnError(error)) return error;
  return new CairnError('E_UNAVAILABLE', `${what}: ${errorMessage(error)}${hint}`);
}

async function unavailableOnError<T>(what: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (error) {
    throw asUnavailable(what, error);
  }
}
