import { CairnError, isCairnError } from '@cairn/contracts';
import type { EvidenceReceipt, EvidenceReceiptOf, GrantedCaps } from '@cairn/contracts';
import { LeaseStore, WorkerRegistry } from '@cairn/operational';
import type { LeaseRecord } from '@cairn/operational';
import { isTerminal, readSandboxChain, readValidRunChain } from '@cairn/lifecycle';
import type { ValidRunChain } from '@cairn/lifecycle';
import { grantLease, isExpired, placeRun, reservationFor } from '@cairn/scheduling';
import type { ReactionContext, ReactorHandler } from '@cairn/service-kit';
import { JsonLogger, SERVICE_CONFIG, SERVICE_LOGGER } from '@cairn/service-kit';
import { Inject, Injectable } from '@nestjs/common';
import { ApprovalDeadlines } from './approval-deadlines.store.js';
import { hasImage, imageMissing, withLeasedReservations } from './placement.js';
import type { SchedulerConfig } from './scheduler.config.js';
import { SerialGate } from './serial-gate.js';

/** Receipts after which a run holds nothing on its worker any more: its lease is released. */
const RELEASING = new Set(['run.executed', 'run.failed', 'run.rolled_back', 'run.cancelled', 'run.sealed']);
/** A sandbox session also gives its slot back when its sandbox is destroyed. */
const RELEASING_SANDBOX = new Set([...RELEASING, 'sandbox.destroyed']);
/** How soon a run that found no worker with room is tried again (with jitter). */
const NO_ROOM_RETRY_MS = 500;

/** Placements in this process happen one at a time, so two runs never take the same last slot. */
export const PLACEMENT_GATE = Symbol('cairn.placement-gate');

/**
 * Reacts to `policy.decided` allow (and to the `approval.granted` that releases a held run) by
 * placing the run on a worker: the lease goes to the lease store first, then `run.scheduled` onto
 * the chain. No room anywhere is an outage (E_UNAVAILABLE): the reactor naks and the run is tried
 * again later, never dropped. A crash between the two writes is safe: the redelivered receipt finds
 * the lease and announces it. It also keeps the index of approval deadlines (`ApprovalDeadlines`)
 * for the timer that rejects what nobody decided in time: an entry per `approval.requested`,
 * removed on its decision or the run's seal.
 */
@Injectable()
export class SchedulingHandler implements ReactorHandler {
  readonly types: ReadonlySet<string> = new Set(['policy.decided', 'approval.requested', 'approval.granted', 'approval.rejected', ...RELEASING_SANDBOX]);

  constructor(
    private readonly workers: WorkerRegistry,
    private readonly leases: LeaseStore,
    private readonly deadlines: ApprovalDeadlines,
    @Inject(PLACEMENT_GATE) private readonly gate: SerialGate,
    @Inject(SERVICE_CONFIG) private readonly config: SchedulerConfig,
    @Inject(SERVICE_LOGGER) private readonly logger: JsonLogger,
  ) {}

  async handle(ctx: ReactionContext): Promise<void> {
    const receipt: EvidenceReceipt = ctx.receipt;
    if (ctx.chainId.startsWith('sbx_')) return this.handleSandbox(ctx, receipt);
    if (RELEASING.has(receipt.type)) {
      if (await this.leases.delete(ctx.chainId)) this.logger.write('info', 'lease released', { run_id: ctx.chainId, by: receipt.type });
      // Every run is sealed last: what it still had waiting (a cancelled hold) goes then.
      if (receipt.type === 'run.sealed' && ctx.chainId.startsWith('run_') && (await this.deadlines.deleteRun(ctx.chainId))) {
        this.logger.write('info', 'approval deadlines dropped: the run ended', { run_id: ctx.chainId });
      }
      return;
    }
    if (!ctx.chainId.startsWith('run_')) return;
    // The approvals' deadlines, for the timer that rejects what nobody decided in time.
    if (receipt.type === 'approval.requested') {
      await this.deadlines.put({ run_id: ctx.chainId, approval_id: receipt.approval_id, expires_at: receipt.expires_at, requested_seq: receipt.seq });
      return;
    }
    if (receipt.type === 'approval.granted' || receipt.type === 'approval.rejected') {
      await this.deadlines.delete(ctx.chainId, receipt.approval_id);
      if (receipt.type === 'approval.rejected') return;
    }
    // Decided from the chain as read, announced onto that head only: a cancel landing in between
    // makes the reaction read again, find the run ended, and give its lease back (docs/adr/0003).
    let unannounced: string | null = null;
    await ctx.reactOnChain(async ({ receipts, headSeq }) => {
      const chain = readValidRunChain(receipts);
      if (chain === null) {
        this.logger.write('warn', 'not scheduling a chain that does not validate', { run_id: ctx.chainId });
        return;
      }
      const decided = runnableDecision(receipt, chain);
      if (decided !== null) {
        await this.scheduleOrFail(ctx, decided, headSeq, (leaseId) => (unannounced = leaseId));
      } else if (unannounced !== null && chain.view !== null && (chain.view.sealed || isTerminal(chain.view.state))) {
        // The lease this reaction wrote lost the race to the run's end: it was never announced.
        if (await this.leases.delete(ctx.chainId, unannounced)) this.logger.write('info', 'unannounced lease released: the run ended first', { run_id: ctx.chainId });
      }
    });
  }

  /**
   * A sandbox session holds a lease and a worker slot for its life (the runtime renews it): placed
   * on `policy.decided` allow like a run, released when its sandbox is destroyed or it fails.
   */
  private async handleSandbox(ctx: ReactionContext, receipt: EvidenceReceipt): Promise<void> {
    if (RELEASING_SANDBOX.has(receipt.type)) {
      if (await this.leases.delete(ctx.chainId)) this.logger.write('info', 'lease released', { sandbox_id: ctx.chainId, by: receipt.type });
      return;
    }
    if (receipt.type !== 'policy.decided' || receipt.decision !== 'allow') return;
    let unannounced: string | null = null;
    await ctx.reactOnChain(async ({ receipts, headSeq }) => {
      const chain = readSandboxChain(receipts);
      if (chain === null || chain.invalidSeqs.length > 0 || chain.view === null) {
        this.logger.write('warn', 'not scheduling a sandbox chain that does not validate', { sandbox_id: ctx.chainId });
        return;
      }
      const placed = chain.receipts.some((r) => r.type === 'run.scheduled');
      if (!placed && chain.view.state === 'PENDING' && !chain.view.sealed) {
        await this.scheduleOrFail(ctx, receipt, headSeq, (leaseId) => (unannounced = leaseId));
      } else if (unannounced !== null && chain.view.state !== 'PENDING') {
        if (await this.leases.delete(ctx.chainId, unannounced)) this.logger.write('info', 'unannounced lease released: the sandbox ended first', { sandbox_id: ctx.chainId });
      }
    });
  }

  /**
   * `schedule`, or — when no live worker has the run's image, past the grace a worker takes to
   * report a new one — the run fails `E_IMAGE_PULL` on the head it was decided from (there is no
   * registry to pull from: waiting longer would wait for an operator).
   */
  private async scheduleOrFail(ctx: ReactionContext, decided: EvidenceReceiptOf<'policy.decided'>, headSeq: number, leased: (leaseId: string) => void): Promise<void> {
    try {
      await this.schedule(ctx, decided, headSeq, leased);
    } catch (error) {
      if (!isCairnError(error) || error.code !== 'E_IMAGE_PULL') throw error;
      await ctx.appendAt(headSeq, 'run.failed', { error_code: 'E_IMAGE_PULL', message: error.message.slice(0, 2000) }, 'image-missing');
      this.logger.write('warn', 'no worker has the image', { run_id: ctx.chainId, message: error.message });
    }
  }

  private async schedule(ctx: ReactionContext, decided: EvidenceReceiptOf<'policy.decided'>, headSeq: number, leased: (leaseId: string) => void): Promise<void> {
    const runId = ctx.chainId;
    const caps = decided.caps;
    const image = decided.image;
    if (caps === undefined || image === undefined) {
      throw new CairnError('E_UNKNOWN_STATE', `${runId}: policy.decided ${decided.decision} carries no caps or image`);
    }
    // Runnable since the receipt this reaction answers (the decision, or the approval that released it).
    const lease = await this.gate.run(() => this.leaseFor(runId, caps, image, Date.parse(ctx.receipt.ts)));
    leased(lease.lease_id);
    await ctx.appendAt(headSeq, 'run.scheduled', {
      worker_id: lease.worker_id,
      lease_id: lease.lease_id,
      lease_expires_at: lease.expires_at,
      attempt: lease.attempt,
    });
    this.logger.write('info', 'scheduled', { run_id: runId, worker_id: lease.worker_id, lease_id: lease.lease_id });
  }

  /** The lease the run holds, or a new one on the best worker with room and the image. */
  private async leaseFor(runId: string, caps: GrantedCaps, image: string, runnableSince: number): Promise<LeaseRecord> {
    const now = Date.now();
    const [workers, leases] = await Promise.all([this.workers.list(), this.leases.list()]);
    // A run placed before (a redelivery) holds its lease: read it, not what the list says of it. A
    // run the list shows without one is placed at once: should another writer have leased it
    // meanwhile, the create below finds that lease instead of writing a second one.
    if (leases.some((lease) => lease.run_id === runId)) {
      const held = await this.leases.get(runId);
      if (held !== null && !isExpired(held, now)) return held;
      // A lease written but never announced, then left to expire (a crash and a long outage): no
      // runtime ever saw it, so it is replaced.
      if (held !== null) await this.leases.delete(runId, held.lease_id);
    }
    const candidates = withLeasedReservations(
      workers.filter((worker) => hasImage(worker, image)),
      leases.filter((lease) => !isExpired(lease, now)),
    );
    const request = reservationFor(runId, caps);
    const worker = placeRun(candidates, request, now, { staleAfterMs: this.config.CAIRN_WORKER_STALE_AFTER_MS });
    if (worker === null) {
      const missing = imageMissing(workers, image, runnableSince, now, this.config.CAIRN_WORKER_STALE_AFTER_MS);
      if (missing !== null) {
        throw new CairnError('E_IMAGE_PULL', `no live worker has image ${image} (${missing} live worker(s) report their images); build it on a worker — \`cairn images build\` — and submit again`, {
          runId,
          image,
        });
      }
      throw new CairnError('E_UNAVAILABLE', `no worker has room for ${runId} (${image}); it waits`, {
        // Room frees when any run ends: look again soon rather than after a growing backoff.
        retryAfterMs: NO_ROOM_RETRY_MS,
        runId,
        workers: workers.length,
        withImage: candidates.length,
      });
    }
    // Attempt 1: a run is placed once; a lost worker fails it (E_WORKER_LOST), re-offers come later.
    const granted = grantLease(runId, worker.workerId, now, this.config.CAIRN_LEASE_TTL_MS, 1);
    const reservation = { runId, memoryMiB: request.memoryMiB, cpus: request.cpus, diskMiB: request.diskMiB };
    const { lease, created } = await this.leases.create({ ...granted, reservation });
    if (!created && isExpired(lease, now)) {
      // Leased by someone else and left to expire: replaced on the next delivery, like the one above.
      await this.leases.delete(runId, lease.lease_id);
      throw new CairnError('E_UNAVAILABLE', `${runId} held an expired lease; it is placed again`, { retryAfterMs: NO_ROOM_RETRY_MS, runId });
    }
    return lease;
  }

  /** Placement gave up (not for lack of room: that waits): fail the run, on the record. Releases never fail a run. */
  async giveUp(ctx: ReactionContext, error: unknown): Promise<void> {
    if (ctx.chainId.startsWith('sbx_') && ctx.receipt.type === 'policy.decided') {
      const message = `scheduler could not place the sandbox: ${error instanceof Error ? error.message : String(error)}`;
      await ctx.append('run.failed', { error_code: 'E_UNKNOWN_STATE', message: message.slice(0, 2000) }, 'give-up');
      return;
    }
    if (RELEASING_SANDBOX.has(ctx.receipt.type) || !ctx.chainId.startsWith('run_')) {
      this.logger.write('error', 'giving up on a lease release', { run_id: ctx.chainId, error: String(error) });
      return;
    }
    const message = `scheduler could not place the run: ${error instanceof Error ? error.message : String(error)}`;
    await ctx.append('run.failed', { error_code: 'E_UNKNOWN_STATE', message: message.slice(0, 2000) }, 'give-up');
  }
}

/**
 * The allowing decision to place the run by, or null when this receipt does not call for a
 * placement: the run is placed already, has ended, or (on a grant) still waits for another approval.
 */
function runnableDecision(receipt: EvidenceReceipt, chain: ValidRunChain): EvidenceReceiptOf<'policy.decided'> | null {
  const { receipts, view } = chain;
  if (view === null || view.sealed || receipts.some((r) => r.type === 'run.scheduled')) return null;
  const decided = receipts.find((r): r is EvidenceReceiptOf<'policy.decided'> => r.type === 'policy.decided');
  if (decided === undefined) return null;
  if (receipt.type === 'policy.decided') {
    return receipt.decision === 'allow' && view.state === 'SUBMITTED' ? decided : null;
  }
  if (receipt.type !== 'approval.granted' || decided.decision !== 'hold' || view.state !== 'AWAITING_APPROVAL') return null;
  const granted = new Set(receipts.flatMap((r) => (r.type === 'approval.granted' ? [r.approval_id] : [])));
  const pending = receipts.filter((r) => r.type === 'approval.requested' && r.scope === 'run' && !granted.has(r.approval_id));
  return pending.length === 0 ? decided : null;
}
