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
  /**
   * Until when (this process's monotonic clock, ms) the lease may still be this worker's: `ttlMs`
   * after its last renewal began. The scheduler counts the TTL from when it sees that renewal's
   * revision — later — so this worker stops first, whatever either wall clock says (ADR 0033).
   */
  private heldUntil: number | null = null;
  /** When that was last confirmed (a renewal or a read of the lease that began then; monotonic). */
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
    const asked = performance.now();
    if (this.heldUntil !== null && asked >= this.heldUntil) {
      // Paused (or cut off) past a TTL since the last renewal: the scheduler may have judged it expired; never revived.
      return this.markLost(`lease ${leaseId} went unrenewed for its TTL (${ttlMs} ms, this process's monotonic clock)`);
    }
    try {
      const lease = await this.leases.renew(runId, workerId, Date.now() + ttlMs);
      if (lease.lease_id !== leaseId) return this.markLost(`the run now holds lease ${lease.lease_id}, not ${leaseId}`);
      this.heldUntil = asked + ttlMs;
      this.confirmedAt = asked;
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
   * renewal within the last `renewMs` and less than a TTL ago on this process's monotonic clock
   * (never by comparing the lease's `expires_at`, written by some machine's wall clock, with this
   * one's: ADR 0033), else read from the bucket: a runtime paused past its lease (SIGSTOP, a VM
   * freeze) finds it expired, taken or gone when it resumes, before it writes anything. A broker
   * that cannot be read throws.
   */
  async fence(now: number = performance.now()): Promise<string | null> {
    if (this.lostReason !== null) return this.lostReason;
    const { runId, workerId, leaseId, renewMs, ttlMs } = this.options;
    if (this.heldUntil !== null && now >= this.heldUntil) {
      return this.markLost(`lease ${leaseId} went unrenewed for its TTL (${ttlMs} ms, this process's monotonic clock)`);
    }
    if (this.heldUntil !== null && this.confirmedAt !== null && now - this.confirmedAt < renewMs) return null;
    const lease = await this.leases.get(runId);
    if (lease === null) return this.markLost(`the run holds no lease any more (lease ${leaseId} was released or settled)`);
    if (lease.lease_id !== leaseId || lease.worker_id !== workerId) return this.markLost(`the run now holds lease ${lease.lease_id} of worker ${lease.worker_id}, not ${leaseId}`);
    this.confirmedAt = now;
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
