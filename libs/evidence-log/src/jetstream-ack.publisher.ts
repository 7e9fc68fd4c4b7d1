import { inboxOf } from './nats-connection.js';
import { randomUUID } from 'node:crypto';
import type { Msg, MsgHdrs, NatsConnection, Subscription } from '@nats-io/transport-node';

/** How a JetStream publish ended. A tagged union, so callers branch on it without exceptions. */
export type PublishOutcome =
  | { kind: 'stored'; stream: string; seq: number; duplicate: boolean; /** messages an atomic batch stored (its last at `seq`) */ count?: number }
  | { kind: 'rejected'; errCode: number; status: number; description: string }
  | { kind: 'timeout' }
  | { kind: 'no_responders' }
  | { kind: 'closed'; reason: string };

interface Pending {
  resolve: (outcome: PublishOutcome) => void;
  deadline: number;
}

interface AckBody {
  stream?: unknown;
  seq?: unknown;
  duplicate?: unknown;
  count?: unknown;
  error?: { code?: unknown; err_code?: unknown; description?: unknown };
}

const decoder = new TextDecoder();

/**
 * Publishes to JetStream and awaits each ack on one shared reply subscription (the pattern
 * other clients call async publish). `js.publish` builds a request per message — a mux entry,
 * a timer and two or three Error objects for async stack traces — which on this machine costs
 * several times the CPU of the publish itself (docs/adr/0001). Here a publish is one core
 * `publish` with a reply subject and one map entry; one sweeper times out what is left.
 */
export class JetStreamAckPublisher {
  private readonly inbox: string;
  private readonly pending = new Map<string, Pending>();
  private readonly subscription: Subscription;
  private readonly sweeper: NodeJS.Timeout;
  private next = 0;
  private closed = false;
  private closeReason = 'the connection is closed';

  constructor(
    private readonly nc: NatsConnection,
    private readonly timeoutMs: number,
  ) {
    this.inbox = inboxOf(nc);
    this.subscription = nc.subscribe(`${this.inbox}.*`, {
      callback: (error, msg) => {
        // The subscription is gone (e.g. no permission for the inbox): nothing more can be acked.
        if (error) this.close(`the ack subscription failed: ${error.message}`);
        else this.onAck(msg);
      },
    });
    this.sweeper = setInterval(() => this.expire(), Math.max(50, Math.floor(timeoutMs / 4)));
    this.sweeper.unref();
  }

  get inFlight(): number {
    return this.pending.size;
  }

  publish(subject: string, data: Uint8Array, headers: MsgHdrs): Promise<PublishOutcome> {
    if (this.closed || this.nc.isClosed()) return Promise.resolve({ kind: 'closed', reason: this.closeReason });
    const id = (this.next++).toString(36);
    return new Promise<PublishOutcome>((resolve) => {
      this.pending.set(id, { resolve, deadline: Date.now() + this.timeoutMs });
      try {
        this.nc.publish(subject, data, { reply: `${this.inbox}.${id}`, headers });
      } catch (error) {
        // Refused by the client before it left (closed, over max_payload, bad subject).
        this.pending.delete(id);
        resolve({ kind: 'rejected', errCode: 0, status: 0, description: error instanceof Error ? error.message : String(error) });
      }
    });
  }

  /**
   * Publishes `messages` as one atomic batch (2.12+, `allow_atomic`): stored all or none, in order
   * and at consecutive stream seqs, with every message's consistency checks (its message id, an
   * expectation) run before the commit. Only the commit asks for an ack: `stored` names the last
   * message's seq and the count. The headers protocol (`Nats-Batch-Id`, `-Sequence`, `-Commit`)
   * is written here because the client's batch publisher awaits a round trip for its first message.
   */
  publishBatch(messages: readonly { subject: string; data: Uint8Array; headers: MsgHdrs }[]): Promise<PublishOutcome> {
    if (messages.length === 0) return Promise.resolve({ kind: 'rejected', errCode: 0, status: 0, description: 'an empty batch' });
    if (this.closed || this.nc.isClosed()) return Promise.resolve({ kind: 'closed', reason: this.closeReason });
    const batchId = randomUUID();
    try {
      for (const [i, message] of messages.slice(0, -1).entries()) {
        message.headers.set('Nats-Batch-Id', batchId);
        message.headers.set('Nats-Batch-Sequence', String(i + 1));
        this.nc.publish(message.subject, message.data, { headers: message.headers });
      }
    } catch (error) {
      // Nothing committed: the server drops an uncommitted batch after its timeout.
      return Promise.resolve({ kind: 'rejected', errCode: 0, status: 0, description: error instanceof Error ? error.message : String(error) });
    }
    const commit = messages[messages.length - 1]!;
    commit.headers.set('Nats-Batch-Id', batchId);
    commit.headers.set('Nats-Batch-Sequence', String(messages.length));
    commit.headers.set('Nats-Batch-Commit', '1');
    return this.publish(commit.subject, commit.data, commit.headers);
  }

  /** Settles everything in flight as `closed` and stops listening. */
  close(reason = 'the publisher was closed'): void {
    if (this.closed) return;
    this.closed = true;
    this.closeReason = reason;
    clearInterval(this.sweeper);
    this.settleAll({ kind: 'closed', reason });
    if (!this.nc.isClosed()) this.subscription.unsubscribe();
  }

  private onAck(msg: Msg): void {
    const id = msg.subject.slice(this.inbox.length + 1);
    const pending = this.pending.get(id);
    if (pending === undefined) return; // already timed out
    this.pending.delete(id);
    pending.resolve(parseAck(msg));
  }

  private expire(): void {
    const now = Date.now();
    // Insertion order is deadline order: stop at the first entry still in time.
    for (const [id, pending] of this.pending) {
      if (pending.deadline > now) break;
      this.pending.delete(id);
      pending.resolve({ kind: 'timeout' });
    }
  }

  private settleAll(outcome: PublishOutcome): void {
    for (const pending of this.pending.values()) pending.resolve(outcome);
    this.pending.clear();
  }
}

/** A JetStream publish ack: `{stream, seq, duplicate?}` or `{error: {code, err_code, description}}`. */
export function parseAck(msg: Pick<Msg, 'data' | 'headers'>): PublishOutcome {
  if (msg.data.length === 0 && msg.headers?.code === 503) return { kind: 'no_responders' };
  let body: AckBody;
  try {
    body = JSON.parse(decoder.decode(msg.data)) as AckBody;
  } catch {
    return { kind: 'rejected', errCode: 0, status: 0, description: 'the publish ack is not JSON' };
  }
  if (body.error !== undefined) {
    const { code, err_code: errCode, description } = body.error;
    return {
      kind: 'rejected',
      errCode: typeof errCode === 'number' ? errCode : 0,
      status: typeof code === 'number' ? code : 0,
      description: typeof description === 'string' ? description : 'rejected without a description',
    };
  }
  if (typeof body.stream !== 'string' || typeof body.seq !== 'number') {
    return { kind: 'rejected', errCode: 0, status: 0, description: 'the publish ack has no stream and seq' };
  }
  const stored = { kind: 'stored' as const, stream: body.stream, seq: body.seq, duplicate: body.duplicate === true };
  return typeof body.count === 'number' ? { ...stored, count: body.count } : stored;
}
