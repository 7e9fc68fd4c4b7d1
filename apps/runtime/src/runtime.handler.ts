import type { ArtifactStore } from '@cairn/artifact-store';
import { CairnError } from '@cairn/contracts';
import { pendingCancelRequest } from '@cairn/lifecycle';
import type { EvidenceLog } from '@cairn/evidence-log';
import type { LeaseStore } from '@cairn/operational';
import { EVIDENCE_LOG, NATS_CONNECTION, SERVICE_CONFIG, SERVICE_LOGGER } from '@cairn/service-kit';
import type { JsonLogger, ReactionContext, ReactorHandler } from '@cairn/service-kit';
import type { NatsConnection } from '@nats-io/transport-node';
import { Inject, Injectable } from '@nestjs/common';
import { LeaseKeeper } from './lease-keeper.js';
import { settleLostRun } from './lost-run.js';
import { assessScheduled, lastPlacementOn, parseChain, unknownStateEnding } from './run-assessment.js';
import type { Assessment } from './run-assessment.js';
import { describe, RunExecution } from './run-execution.js';
import { runFailedFields } from './runtime-receipts.builder.js';
import type { RuntimeConfig } from './runtime.config.js';
import { ARTIFACT_STORE, LEASE_STORE, RUNTIME_SECRETS, SANDBOX_ENGINE } from './runtime.tokens.js';
import { RuntimeWorker } from './runtime-worker.service.js';
import { SecretValuesReader } from '@cairn/secret-store';
import { SandboxSessionHost } from './sandbox-session.host.js';
import type { SandboxEngine } from './sandbox-engine.adapter.js';

/**
 * The runtime's reactions (docs/adr/0003): a `run.scheduled` placing a run on this worker, and a
 * `run.cancel_requested` of a run placed here that no execution here is running (it never
 * started, or outlived a crash). Thin: the chain decides (`assessScheduled`), `RunExecution` runs
 * (and answers a cancel asked while it runs), `settleLostRun` records a lost or cancelled run.
 * Receipts of other workers' runs are acked and ignored.
 */
@Injectable()
export class RuntimeHandler implements ReactorHandler {
  readonly types: ReadonlySet<string> = new Set(['run.scheduled', 'run.cancel_requested']);

  constructor(
    @Inject(SERVICE_CONFIG) private readonly config: RuntimeConfig,
    @Inject(SERVICE_LOGGER) private readonly logger: JsonLogger,
    @Inject(EVIDENCE_LOG) private readonly log: EvidenceLog,
    @Inject(NATS_CONNECTION) private readonly nc: NatsConnection,
    @Inject(SANDBOX_ENGINE) private readonly engine: SandboxEngine,
    @Inject(ARTIFACT_STORE) private readonly artifacts: ArtifactStore,
    @Inject(LEASE_STORE) private readonly leases: LeaseStore,
    @Inject(RuntimeWorker) private readonly worker: RuntimeWorker,
    @Inject(RUNTIME_SECRETS) private readonly secrets: SecretValuesReader,
    @Inject(SandboxSessionHost) private readonly sessions: SandboxSessionHost,
  ) {}

  async handle(ctx: ReactionContext): Promise<void> {
    const scheduled = ctx.receipt;
    if (scheduled.type === 'run.cancel_requested') {
      await this.cancelRequested(ctx);
      return;
    }
    if (scheduled.type !== 'run.scheduled' || scheduled.worker_id !== this.config.CAIRN_WORKER_ID) return;
    if (this.worker.draining) throw new CairnError('E_UNAVAILABLE', 'the runtime is shutting down');
    // A sandbox session: the host starts it and keeps it for its life (the reaction ends once it is live).
    if (ctx.chainId.startsWith('sbx_')) return this.sessions.start(ctx, scheduled);
    // Redelivered later, to this worker after its restart: a drain never drops a placement.
    if (this.worker.draining) throw new CairnError('E_UNAVAILABLE', 'the runtime is shutting down');

    const stored = await ctx.readChain();
    const parsed = parseChain(stored);
    if (!parsed.ok) {
      // I-5: never run it, and — when its lease is this worker's — stop it on the record.
      this.logger.write('error', 'not running a chain that breaks its contract', { run_id: ctx.chainId, seq: parsed.seq, reason: parsed.message });
      const unknown = unknownStateEnding(stored);
      const headSeq = (stored.at(-1) as { seq?: number } | undefined)?.seq ?? scheduled.seq;
      if (unknown.kind === 'failed') await this.refuse(ctx, { kind: 'refuse', code: 'E_UNKNOWN_STATE', message: unknown.message }, scheduled.lease_id, headSeq);
      return;
    }
    const assessment = assessScheduled(parsed.receipts, scheduled, this.config.CAIRN_WORKER_ID);
    const fields = { run_id: ctx.chainId, placement: ctx.eventId, decision: assessment.kind };
    switch (assessment.kind) {
      case 'ignore':
        this.logger.write('info', 'placement ignored', { ...fields, reason: assessment.reason });
        return;
      case 'lost':
        this.logger.write('warn', 'placement delivered again after its sandbox was created: ending the run', fields);
        await settleLostRun(ctx, {
          workerId: this.config.CAIRN_WORKER_ID,
          leaseId: scheduled.lease_id,
          verifiedGone: await this.reapLeftovers(ctx.chainId),
          leases: this.leases,
        });
        return;
      case 'refuse':
        await this.refuse(ctx, assessment, scheduled.lease_id, parsed.receipts.at(-1)?.seq ?? scheduled.seq);
        return;
      case 'execute': {
        const execution = new RunExecution({
          ctx,
          scheduled,
          assessedSeq: parsed.receipts.at(-1)?.seq ?? scheduled.seq,
          plan: assessment.plan,
          engine: this.engine,
          artifacts: this.artifacts,
          secrets: this.secrets,
          leases: this.leases,
          log: this.log,
          nc: this.nc,
          config: this.config,
          logger: this.logger,
        });
        await this.worker.track(ctx.chainId, assessment.plan.caps, () => execution.run());
        return;
      }
    }
  }

  /**
   * A cancel asked of a run placed here. While an execution here runs it, its watch answers;
   * otherwise nothing here will (the run never started, or this worker restarted under it): its
   * leftovers are reaped and the request answered now, teardown first.
   */
  private async cancelRequested(ctx: ReactionContext): Promise<void> {
    if (this.worker.isActive(ctx.chainId)) return;
    const parsed = parseChain(await ctx.readChain());
    if (!parsed.ok) {
      this.logger.write('error', 'not acting on a chain that breaks its contract', { run_id: ctx.chainId, seq: parsed.seq, reason: parsed.message });
      return;
    }
    const placement = lastPlacementOn(parsed.receipts, this.config.CAIRN_WORKER_ID);
    if (placement === null || pendingCancelRequest(parsed.receipts) === null) return;
    const settled = await settleLostRun(ctx.causedBy(placement), {
      workerId: this.config.CAIRN_WORKER_ID,
      leaseId: placement.lease_id,
      verifiedGone: await this.reapLeftovers(ctx.chainId),
      leases: this.leases,
    });
    this.logger.write('warn', 'a cancel asked of a run not running here', { run_id: ctx.chainId, outcome: settled });
  }

  /** A run that cannot start here fails before any sandbox exists — if this worker holds its lease, and onto the chain it was assessed on. */
  private async refuse(ctx: ReactionContext, refusal: Extract<Assessment, { kind: 'refuse' }>, leaseId: string, assessedSeq: number): Promise<void> {
    const keeper = new LeaseKeeper(
      this.leases,
      { runId: ctx.chainId, workerId: this.config.CAIRN_WORKER_ID, leaseId, renewMs: this.config.CAIRN_LEASE_RENEW_MS, ttlMs: this.config.CAIRN_LEASE_TTL_MS, onTick: () => undefined, onLost: () => undefined },
      this.logger,
    );
    const notOurs = await keeper.renewNow();
    if (notOurs !== null) {
      this.logger.write('warn', 'not refusing a run whose lease is not ours', { run_id: ctx.chainId, reason: notOurs });
      return;
    }
    this.logger.write('warn', 'run refused before start', { run_id: ctx.chainId, code: refusal.code, reason: refusal.message });
    // A chain that moved since (a cancel) is assessed again on the redelivery.
    await ctx.appendAt(assessedSeq, 'run.failed', runFailedFields(refusal.code, refusal.message, refusal.stepIndex), 'failed');
    await this.leases.delete(ctx.chainId, leaseId);
  }

  /** Removes whatever sandbox of this run is left; true when the engine confirms it is gone. */
  private async reapLeftovers(chainId: string): Promise<boolean> {
    try {
      await this.engine.driver.reapChain(this.config.CAIRN_WORKER_ID, chainId);
      return true;
    } catch (error) {
      this.logger.write('error', 'could not reap a lost run\'s sandbox', { run_id: chainId, error: describe(error) });
      return false;
    }
  }
}
