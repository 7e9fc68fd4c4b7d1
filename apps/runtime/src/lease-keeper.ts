import { CairnError, isCairnError } from '@cairn/contracts';
import type { LeaseStore } from '@cairn/operational';
import type { JsonLogger } from '@cairn/service-kit';

export interface LeaseKeeperOptions {
  runId: string;
  workerId: string;
  /** The lease `run.scheduled` named: a renewal that finds another one is not ours. */
  leaseId: string;
  renewMs: number;
  ttlMs: number;
  /** Called on every renewal tick (the reactor's message is still being worked on). */
  onTick: () => void;
  /** Called once when a renewal after `start` finds the lease lost: another holder, expired, or gone. */
  onLost: (reason: string) => void;
}

/**
 * Keeps a running run's lease alive: renews it every `renewMs` to `ttlMs` ahead. A refusal means
 * the lease is lost (the scheduler may have failed or re-offered the run), and the run must stop;
 * a broker hiccup is only logged, and the next tick tries again.
 */
export class LeaseKeeper {
  private timer: NodeJS.Timeout | null = null;
  private lostReason: string | null = null;
  private renewing: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly leases: LeaseStore,
    private readonly options: LeaseKeeperOptions,
    private readonly logger: JsonLogger,
  ) {}

  get lost(): string | null {
    return this.lostReason;
  }

  /** Renews once; null when the lease is ours and extended, else why it is not ours. */
  async renewNow(): Promise<string | null> {
    const { runId, workerId, leaseId, ttlMs } = this.options;
    try {
      const lease = await this.leases.renew(runId, workerId, Date.now() + ttlMs);
      if (lease.lease_id !== leaseId) return this.markLost(`the run now holds lease ${lease.lease_id}, not ${leaseId}`);
      return null;
    } catch (error) {
      if (isCairnError(error) && (error.code === 'E_CONFLICT' || error.code === 'E_NOT_FOUND')) return this.markLost(error.message);
      this.logger.write('warn', 'lease renewal failed; will retry', { run_id: runId, error: describe(error) });
      return null;
    }
  }

  start(): void {
    this.timer ??= setInterval(() => {
      this.options.onTick();
      this.renewing = this.renewing.then(() => this.renewNow());
    }, this.options.renewMs);
  }

  async stop(): Promise<void> {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    await this.renewing;
  }

  private markLost(reason: string): string {
    if (this.lostReason === null) {
      this.lostReason = reason;
      // Before `start` the caller acts on the returned reason itself.
      if (this.timer !== null) this.options.onLost(reason);
    }
    return reason;
  }
}

function describe(error: unknown): string {
  if (error instanceof CairnError) return `${error.code}: ${error.message}`;
  return error instanceof Error ? error.message : String(error);
}
