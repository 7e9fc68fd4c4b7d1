import type { NatsConnection, Subscription } from '@nats-io/transport-node';

/**
 * Wakes a run that waits on its chain (a step held for approval) when anything lands on it: a
 * core subscription to the chain's subjects (JetStream's stored messages are published on them too).
 * It only hints; the waiter re-reads the chain, and also wakes on its own timer, so a message
 * missed across a reconnect costs one poll interval, never a decision.
 */
export class ChainWake {
  private subscription: Subscription | null = null;
  private signalled = false;
  private readonly waiters = new Set<() => void>();

  constructor(
    private readonly nc: NatsConnection,
    private readonly subject: string,
  ) {}

  start(): void {
    this.subscription ??= this.nc.subscribe(this.subject, { callback: (error) => (error === null ? this.poke() : undefined) });
  }

  /** Wakes whoever waits now, or the next wait at once. */
  poke(): void {
    this.signalled = true;
    for (const wake of [...this.waiters]) wake();
  }

  /** Resolves on the next receipt on the chain (or a poke), or after `ms`. */
  next(ms: number): Promise<void> {
    if (this.signalled) {
      this.signalled = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.waiters.delete(done);
        this.signalled = false;
        resolve();
      };
      const timer = setTimeout(done, Math.max(0, ms));
      this.waiters.add(done);
    });
  }

  stop(): void {
    this.subscription?.unsubscribe();
    this.subscription = null;
    this.poke();
  }
}
