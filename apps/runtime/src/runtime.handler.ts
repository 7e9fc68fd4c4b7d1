import type { ArtifactStore } from '@cairn/artifact-store';
import { CairnError } from '@cairn/contracts';
import type { EvidenceLog } from '@cairn/evidence-log';
import type { LeaseStore } from '@cairn/operational';
import { EVIDENCE_LOG, NATS_CONNECTION, SERVICE_CONFIG, SERVICE_LOGGER } from '@cairn/service-kit';
import type { JsonLogger, ReactionContext, ReactorHandler } from '@cairn/service-kit';
import type { NatsConnection } from '@nats-io/transport-node';
import { Inject, Injectable } from '@nestjs/common';
import { LeaseKeeper } from './lease-keeper.js';
import { failLostRun } from './lost-run.js';
import { assessScheduled, parseChain } from './run-assessment.js';
import type { Assessment } from './run-assessment.js';
import { describe, RunExecution } from './run-execution.js';
import { runFailedFields } from './runtime-receipts.builder.js';
import type { RuntimeConfig } from './runtime.config.js';
import { ARTIFACT_STORE, LEASE_STORE, SANDBOX_ENGINE } from './runtime.tokens.js';
import { RuntimeWorker } from './runtime-worker.service.js';
import type { SandboxEngine } from './sandbox-engine.adapter.js';

/**
 * The runtime's reaction (docs/adr/0003): a `run.scheduled` placing a run on this worker. Thin:
 * the chain decides (`assessScheduled`), `RunExecution` runs, `failLostRun` records a lost run.
 * Placements on other workers are acked and ignored.
 */
@Injectable()
export class RuntimeHandler implements ReactorHandler {
  readonly types: ReadonlySet<string> = new Set(['run.scheduled']);

  constructor(
    @Inject(SERVICE_CONFIG) private readonly config: RuntimeConfig,
    @Inject(SERVICE_LOGGER) private readonly logger: JsonLogger,
    @Inject(EVIDENCE_LOG) private readonly log: EvidenceLog,
    @Inject(NATS_CONNECTION) private readonly nc: NatsConnection,
    @Inject(SANDBOX_ENGINE) private readonly engine: SandboxEngine,
    @Inject(ARTIFACT_STORE) private readonly artifacts: ArtifactStore,
    @Inject(LEASE_STORE) private readonly leases: LeaseStore,
    @Inject(RuntimeWorker) private readonly worker: RuntimeWorker,
  ) {}

  async handle(ctx: ReactionContext): Promise<void> {
    const scheduled = ctx.receipt;
    if (scheduled.type !== 'run.scheduled' || scheduled.worker_id !== this.config.CAIRN_WORKER_ID) return;
    // Redelivered later, to this worker after its restart: a drain never drops a placement.
    if (this.worker.draining) throw new CairnError('E_UNAVAILABLE', 'the runtime is shutting down');

    const parsed = parseChain(await ctx.readChain());
    if (!parsed.ok) {
      this.logger.write('error', 'not acting on a chain that breaks its contract', { run_id: ctx.chainId, seq: parsed.seq, reason: parsed.message });
      return;
    }
    const assessment = assessScheduled(parsed.receipts, scheduled, this.config.CAIRN_WORKER_ID);
    const fields = { run_id: ctx.chainId, placement: ctx.eventId, decision: assessment.kind };
    switch (assessment.kind) {
      case 'ignore':
        this.logger.write('info', 'placement ignored', { ...fields, reason: assessment.reason });
        return;
      case 'lost':
        this.logger.write('warn', 'placement delivered again after its sandbox was created: failing the run', fields);
        await failLostRun(ctx, assessment, {
          workerId: this.config.CAIRN_WORKER_ID,
          leaseId: scheduled.lease_id,
          verifiedGone: await this.reapLeftovers(ctx.chainId),
          leases: this.leases,
        });
        return;
      case 'refuse':
        await this.refuse(ctx, assessment, scheduled.lease_id);
        return;
      case 'execute': {
        const execution = new RunExecution({
          ctx,
          scheduled,
          assessedSeq: parsed.receipts.at(-1)?.seq ?? scheduled.seq,
          plan: assessment.plan,
          engine: this.engine,
          artifacts: this.artifacts,
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

  /** A run that cannot start here fails before any sandbox exists — if this worker holds its lease. */
  private async refuse(ctx: ReactionContext, refusal: Extract<Assessment, { kind: 'refuse' }>, leaseId: string): Promise<void> {
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
    await ctx.append('run.failed', runFailedFields(refusal.code, refusal.message, refusal.stepIndex), 'failed');
    await this.leases.delete(ctx.chainId, leaseId);
  }

  /** Removes whatever sandbox of this run is left; true when the engine confirms it is gone. */
  private async reapLeftovers(chainId: string): Promise<boolean> {
    try {
      await this.engine.driver.reconcile(this.config.CAIRN_WORKER_ID, (other) => other !== chainId);
      return true;
    } catch (error) {
      this.logger.write('error', 'could not reap a lost run\'s sandbox', { run_id: chainId, error: describe(error) });
      return false;
    }
  }
}
