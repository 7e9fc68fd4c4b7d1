import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import { chainMessageProblem } from './chain-message.js';

/**
 * Receipts that stop a run from outside while it executes: a cancel asked of it, or a
 * `run.cancelled` that won the race against its start (docs/adr/0003).
 */
export const CANCEL_EVENT_TYPES: ReadonlySet<string> = new Set(['run.cancel_requested', 'run.cancelled']);

/**
 * Watches a running run's chain subjects (`<prefix>.<chain id>.>`, a core subscription: JetStream's
 * stored messages are published on them too) and calls `onCancel` when a cancel lands, and
 * `onSuspect` when a message arrives that cannot be one of the chain's receipts (`chainMessageProblem`:
 * not a receipt at all, or a hash that does not recompute — ADR 0033). It only sees what arrives while
 * subscribed; the runtime also re-reads the chain between steps, so a message missed across a
 * reconnect is caught there.
 */
export class CancelWatch {
  private subscription: Subscription | null = null;
  private readonly decoder = new TextDecoder();

  constructor(
    private readonly nc: NatsConnection,
    private readonly subject: string,
    private readonly onCancel: (type: string) => void,
    private readonly onSuspect: (problem: string) => void = () => undefined,
  ) {}

  start(): void {
    this.subscription ??= this.nc.subscribe(this.subject, {
      callback: (error, msg) => {
        if (error !== null) return;
        const text = this.decoder.decode(msg.data);
        const problem = chainMessageProblem(text);
        if (problem !== null) {
          this.onSuspect(problem);
          return;
        }
        const type = receiptType(text);
        if (type !== null && CANCEL_EVENT_TYPES.has(type)) this.onCancel(type);
      },
    });
  }

  stop(): void {
    this.subscription?.unsubscribe();
    this.subscription = null;
  }
}

function receiptType(text: string): string | null {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === 'object' && value !== null && 'type' in value && typeof value.type === 'string' ? value.type : null;
  } catch {
    return null;
  }
}
