import type { EvidenceReceipt, EvidenceReceiptOf } from '@cairn/contracts';
import { LeaseStore } from '@cairn/operational';
import { isTerminal, readSandboxChain, readValidRunChain } from '@cairn/lifecycle';
import type { ReactionContext, ReactorHandler } from '@cairn/service-kit';
import { JsonLogger, SERVICE_LOGGER } from '@cairn/service-kit';
import { Inject, Injectable } from '@nestjs/common';
import { ApprovalDeadlines } from './approval-deadlines.store.js';
import { placementAttempt, Placements, runnableDecision } from './placements.service.js';

/** Receipts after which a run holds nothing on its worker any more: its lease is released. */
const RELEASING = new Set(['run.executed', 'run.failed', 'run.rolled_back', 'run.cancelled', 'run.sealed']);
/** A sandbox session also gives its slot back when its sandbox is destroyed. */
const RELEASING_SANDBOX = new Set([...RELEASING, 'sandbox.destroyed']);

export { PLACEMENT_GATE } from './placements.service.js';

/**
 * Reacts to `policy.decided` allow (and to the `approval.granted` that releases a held run, and
 * to the `run.retried` that gives a lost attempt back, ADR 0035: the next attempt, with its own
 * lease `<run>:<n+1>`) by placing the run on a worker (`Placements`): the lease goes to the lease store first, then
 * `run.scheduled` onto the chain. No room anywhere queues it in the placement queue — the receipt
 * is acknowledged, so a full fleet never holds up the receipts behind it — or, for a sandbox
 * create that did not ask to wait, fails it at once (`E_CAPACITY`). A crash between the two writes
 * is safe: the redelivered receipt finds the lease and announces it. A run or sandbox that ends
 * gives its lease back, leaves the queue, and has the queue planned again (its room is free). It
 * also keeps the index of approval deadlines (`ApprovalDeadlines`) for the timer that rejects what
 * nobody decided in time: an entry per `approval.requested`, removed on its decision or the run's seal.
 */
@Injectable()
export class SchedulingHandler implements ReactorHandler {
  readonly types: ReadonlySet<string> = new Set(['policy.decided', 'approval.requested', 'approval.granted', 'approval.rejected', 'run.retried', ...RELEASING_SANDBOX]);

  constructor(
    private readonly leases: LeaseStore,
    private readonly deadlines: ApprovalDeadlines,
    private readonly placements: Placements,
    @Inject(SERVICE_LOGGER) private readonly logger: JsonLogger,
  ) {}

  async handle(ctx: ReactionContext): Promise<void> {
    const receipt: EvidenceReceipt = ctx.receipt;
    if (ctx.chainId.startsWith('sbx_')) return this.handleSandbox(ctx, receipt);
    if (RELEASING.has(receipt.type)) {
      await this.release(ctx.chainId, receipt.type);
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
        await this.placements.admit(ctx, decided, headSeq, null, (leaseId) => (unannounced = leaseId), placementAttempt(chain.receipts));
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
      await this.release(ctx.chainId, receipt.type);
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
        const requested = chain.receipts.find((r): r is EvidenceReceiptOf<'sandbox.requested'> => r.type === 'sandbox.requested');
        const waitSeconds = requested?.spec.waitSeconds ?? 0;
        await this.placements.admit(ctx, receipt, headSeq, waitSeconds > 0 ? waitSeconds : null, (leaseId) => (unannounced = leaseId));
      } else if (unannounced !== null && chain.view.state !== 'PENDING') {
        if (await this.leases.delete(ctx.chainId, unannounced)) this.logger.write('info', 'unannounced lease released: the sandbox ended first', { sandbox_id: ctx.chainId });
      }
    });
  }

  /** The chain ended: its lease goes, it leaves the queue, and the queue is planned again over the room it freed. */
  private async release(chainId: string, by: string): Promise<void> {
    const released = await this.leases.delete(chainId);
    if (released) this.logger.write('info', 'lease released', { run_id: chainId, by });
    const dequeued = await this.placements.dequeue(chainId);
    if (dequeued) this.logger.write('info', 'left the queue: it ended first', { run_id: chainId, by });
    this.placements.kick();
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
