import { CairnError, isCairnError } from '@cairn/contracts';
import type { LeaseRecord, LeaseStore } from '@cairn/operational';
import { isExpired } from '@cairn/scheduling';
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
  /** Until when (epoch ms, this worker's clock) the lease was last known to be this worker's. */
  private heldUntil: number | null = null;
  /** When that was last confirmed (a renewal or a read of the lease that began then). */
  private confirmedAt: number | null = null;

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
    if (this.lostReason !== null) return this.lostReason;
    const asked = Date.now();
    try {
      const lease = await this.leases.renew(runId, workerId, asked + ttlMs);
      if (lease.lease_id !== leaseId) return this.markLost(`the run now holds lease ${lease.lease_id}, not ${leaseId}`);
      this.confirm(lease, asked);
      return null;
    } catch (error) {
      if (isCairnError(error) && (error.code === 'E_CONFLICT' || error.code === 'E_NOT_FOUND')) return this.markLost(error.message);
      this.logger.write('warn', 'lease renewal failed; will retry', { run_id: runId, error: describe(error) });
      return null;
    }
  }

  /**
   * The fence every append of this run passes first (docs/adr/0019): null while this worker still
   * holds the lease `run.scheduled` named — its epoch, `<run>:<attempt>`, every grant a new one —
   * and it has not expired; else why not, and the lease counts as lost from then on. Confirmed by a
   * renewal within the last `renewMs` and before its expiry on this worker's clock, else read from
   * the bucket: a runtime paused past its lease (SIGSTOP, a VM freeze) finds it expired, taken or
   * gone when it resumes, before it writes anything. A broker that cannot be read throws.
   */
  async fence(now: number = Date.now()): Promise<string | null> {
    if (this.lostReason !== null) return this.lostReason;
    const { runId, workerId, leaseId, renewMs } = this.options;
    if (this.heldUntil !== null && now >= this.heldUntil) {
      return this.markLost(`lease ${leaseId} expired at ${new Date(this.heldUntil).toISOString()} (this worker's clock) before it was renewed`);
    }
    if (this.heldUntil !== null && this.confirmedAt !== null && now - this.confirmedAt < renewMs) return null;
    const lease = await this.leases.get(runId);
    if (lease === null) return this.markLost(`the run holds no lease any more (lease ${leaseId} was released or settled)`);
    if (lease.lease_id !== leaseId || lease.worker_id !== workerId) return this.markLost(`the run now holds lease ${lease.lease_id} of worker ${lease.worker_id}, not ${leaseId}`);
    if (isExpired(lease, now)) return this.markLost(`lease ${leaseId} expired at ${lease.expires_at}`);
    this.confirm(lease, now);
    return null;
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

  private confirm(lease: LeaseRecord, at: number): void {
    this.heldUntil = Date.parse(lease.expires_at);
    this.confirmedAt = at;
  }

  private markLost(reason: string): string {
    if (this.lostReason === null) {
      this.lostReason = reason;
      // Before `start` the caller acts on the returned reason itself.
      if (this.timer !== null) this.options.onLost(reason);
    }
    return this.lostReason;
  }
}

function describe(error: unknown): string {
  if (error instanceof CairnError) return `${error.code}: ${error.message}`;
  return error instanceof Error ? error.message : String(error);
}
