import { inboxOf } from './nats-connection.js';
import type { Msg, MsgHdrs, NatsConnection, Subscription } from '@nats-io/transport-node';

/** A message as a batch direct get returns it: where it is stored, its own headers, its bytes. */
export interface DirectMessage {
  streamSeq: number;
  subject: string;
  headers: MsgHdrs;
  data: Uint8Array;
}

/** How a batch direct get ended. */
export type DirectBatchOutcome =
  | { kind: 'read'; messages: DirectMessage[]; /** matching messages left past the batch */ pending: number }
  | { kind: 'failed'; reason: string };

interface PendingRead {
  messages: DirectMessage[];
  resolve: (outcome: DirectBatchOutcome) => void;
  deadline: number;
}

const encoder = new TextEncoder();

/**
 * Batch direct gets (2.11+: `$JS.API.DIRECT.GET.<stream>` with `next_by_subj` and `batch`) on one
 * shared reply subscription: one request returns every message of a chain from a stream seq on,
 * ended by an EOB status. It replaces an ordered consumer per chain read (a consumer created,
 * pulled and deleted: three API round trips and server state) with one round trip.
 */
export class DirectBatchReader {
  private readonly inbox: string;
  private readonly pending = new Map<string, PendingRead>();
  private readonly subscription: Subscription;
  private readonly sweeper: NodeJS.Timeout;
  private next = 0;
  private closed = false;

  constructor(
    private readonly nc: NatsConnection,
    private readonly stream: string,
    private readonly timeoutMs: number,
  ) {
    this.inbox = inboxOf(nc);
    this.subscription = nc.subscribe(`${this.inbox}.*`, {
      callback: (error, msg) => {
        if (error) this.close(`the direct get subscription failed: ${error.message}`);
        else this.onMessage(msg);
      },
    });
    this.sweeper = setInterval(() => this.expire(), Math.max(50, Math.floor(timeoutMs / 4)));
    this.sweeper.unref();
  }

  /** Up to `batch` messages matching `subject` from stream seq `from` on, as stored now. */
  read(subject: string, from: number, batch: number): Promise<DirectBatchOutcome> {
    if (this.closed || this.nc.isClosed()) return Promise.resolve({ kind: 'failed', reason: 'the connection is closed' });
    const id = (this.next++).toString(36);
    return new Promise<DirectBatchOutcome>((resolve) => {
      this.pending.set(id, { messages: [], resolve, deadline: Date.now() + this.timeoutMs });
      try {
        const request = encoder.encode(JSON.stringify({ seq: from, next_by_subj: subject, batch }));
        this.nc.publish(`$JS.API.DIRECT.GET.${this.stream}`, request, { reply: `${this.inbox}.${id}` });
      } catch (error) {
        this.pending.delete(id);
        resolve({ kind: 'failed', reason: error instanceof Error ? error.message : String(error) });
      }
    });
  }

  close(reason = 'the reader was closed'): void {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.sweeper);
    for (const read of this.pending.values()) read.resolve({ kind: 'failed', reason });
    this.pending.clear();
    if (!this.nc.isClosed()) this.subscription.unsubscribe();
  }

  private onMessage(msg: Msg): void {
    const id = msg.subject.slice(this.inbox.length + 1);
    const read = this.pending.get(id);
    if (read === undefined) return; // timed out
    const headers = msg.headers;
    const code = headers?.code ?? 0;
    if (code === 0 || code === 200) {
      const streamSeq = Number(headers?.get('Nats-Sequence'));
      const subject = headers?.get('Nats-Subject') ?? '';
      if (headers === undefined || !Number.isSafeInteger(streamSeq) || streamSeq < 1 || subject === '') {
        return this.settle(id, { kind: 'failed', reason: 'a direct get answered a message without its stream seq or subject' });
      }
      read.messages.push({ streamSeq, subject, headers, data: msg.data });
      return;
    }
    // 204 EOB ends a batch; 404: nothing matches from there.
    if (code === 204) return this.settle(id, { kind: 'read', messages: read.messages, pending: Number(headers?.get('Nats-Num-Pending') || 0) });
    if (code === 404) return this.settle(id, { kind: 'read', messages: read.messages, pending: 0 });
    this.settle(id, { kind: 'failed', reason: `direct get answered ${code} ${headers?.description ?? ''}`.trim() });
  }

  private settle(id: string, outcome: DirectBatchOutcome): void {
    const read = this.pending.get(id);
    if (read === undefined) return;
    this.pending.delete(id);
    read.resolve(outcome);
  }

  private expire(): void {
    const now = Date.now();
    for (const [id, read] of this.pending) {
      if (read.deadline > now) break;
      this.settle(id, { kind: 'failed', reason: `no answer to a direct get within ${this.timeoutMs} ms` });
    }
  }
}
