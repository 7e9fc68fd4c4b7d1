import { readSandboxChain, readValidRunChain } from '@cairn/lifecycle';
import type { EvidenceReceiptOf } from '@cairn/contracts';
import { liveImageDigests, WorkerRegistry } from '@cairn/operational';
import { decidePolicy, hasTenantQuota, policyDecidedFields, summariseUsage } from '@cairn/policy';
import type { PolicyContext, PolicyDocument, PolicyOutcome } from '@cairn/policy';
import type { ReactionContext, ReactorHandler } from '@cairn/service-kit';
import { JsonLogger, SERVICE_CONFIG, SERVICE_LOGGER } from '@cairn/service-kit';
import { Inject, Injectable, Optional } from '@nestjs/common';
import { UsageLedgerService } from './usage-ledger.service.js';
import type { PolicyServiceConfig } from './policy.config.js';
import { decideSandboxPolicy } from './sandbox-policy.js';
import { SecretAccessRepository } from './secret-access.repository.js';

/** Injection token of the policy document in force (validated at boot). */
export const POLICY_DOCUMENT = Symbol('cairn.policy-document');

/**
 * Reacts to `run.submitted` with `policy.decided` (allow / hold / deny), decided by the pure
 * `decidePolicy` over the policy in force, the images the live workers have and — for a run of a
 * job, or under a tenant quota — the usage of the tenant's earlier runs (policy's own ledger, folded from the log: `UsageLedgerService`).
 * A held run also gets one `approval.requested` per run-scope approval it waits for, so a grant
 * can name it.
 */
@Injectable()
export class PolicyDecisionHandler implements ReactorHandler {
  readonly types: ReadonlySet<string> = new Set(['run.submitted', 'sandbox.requested']);

  constructor(
    @Inject(POLICY_DOCUMENT) private readonly policy: PolicyDocument,
    private readonly workers: WorkerRegistry,
    private readonly usage: UsageLedgerService,
    @Inject(SERVICE_CONFIG) private readonly config: PolicyServiceConfig,
    @Inject(SERVICE_LOGGER) private readonly logger: JsonLogger,
    /** Absent (no store): a run that names a secret is denied, fail closed. */
    @Optional() @Inject(SecretAccessRepository) private readonly secretAccess: SecretAccessRepository | null = null,
  ) {}

  async handle(ctx: ReactionContext): Promise<void> {
    const submitted = ctx.receipt;
    if (submitted.type === 'sandbox.requested') return this.handleSandbox(ctx, submitted);
    if (submitted.type !== 'run.submitted') return;
    // Decided from the chain as read, appended onto that head only: a cancel landing in between
    // makes the reaction read again and find nothing to decide (docs/adr/0003).
    await ctx.reactOnChain(async ({ receipts, headSeq }) => {
      const chain = readValidRunChain(receipts);
      if (chain === null) {
        this.logger.write('warn', 'not deciding a chain that does not validate', { run_id: ctx.chainId });
        return;
      }
      const earlier = chain.receipts.find((r): r is EvidenceReceiptOf<'policy.decided'> => r.type === 'policy.decided');
      if (earlier !== undefined) {
        // Decided before (a redelivery, perhaps past the dedupe window): never decide twice, but
        // finish a hold whose approval requests were cut off by a crash, while the run still waits.
        const cutOff = earlier.decision === 'hold' && chain.view?.state === 'AWAITING_APPROVAL' && !chain.receipts.some((r) => r.type === 'approval.requested');
        if (cutOff) await this.requestApprovals(ctx, await this.decide(submitted), Date.now(), headSeq);
        return;
      }
      // Cancelled (or otherwise moved on) before policy got to it: nothing to decide.
      if (chain.view?.state !== 'SUBMITTED') return;

      const outcome = await this.decide(submitted);
      const decided = await ctx.appendAt(headSeq, 'policy.decided', { ...policyDecidedFields(outcome) });
      if (outcome.decision === 'hold') await this.requestApprovals(ctx, outcome, Date.now(), decided.receipt.seq);
      this.logger.write('info', 'decided', { run_id: ctx.chainId, decision: outcome.decision, error_code: outcome.error_code ?? null });
    });
  }

  /** A sandbox session is decided once, as a run would be, on the head it read (allow or deny: never hold). */
  private async handleSandbox(ctx: ReactionContext, requested: EvidenceReceiptOf<'sandbox.requested'>): Promise<void> {
    await ctx.reactOnChain(async ({ receipts, headSeq }) => {
      const chain = readSandboxChain(receipts);
      if (chain === null || chain.invalidSeqs.length > 0) {
        this.logger.write('warn', 'not deciding a sandbox chain that does not validate', { sandbox_id: ctx.chainId });
        return;
      }
      if (chain.receipts.some((r) => r.type === 'policy.decided') || chain.view?.state !== 'PENDING') return;
      const context = await this.contextFor(requested, requested.spec.secrets ?? [], undefined);
      const outcome = decideSandboxPolicy(requested, context);
      await ctx.appendAt(headSeq, 'policy.decided', { ...policyDecidedFields(outcome) });
      this.logger.write('info', 'decided', { sandbox_id: ctx.chainId, decision: outcome.decision, error_code: outcome.error_code ?? null });
    });
  }

  /**
   * What a decision depends on besides the spec: the live images, the secrets' grants and the
   * submitting key (as its first receipt recorded it), usage where budgets need it.
   */
  private async contextFor(
    first: EvidenceReceiptOf<'run.submitted'> | EvidenceReceiptOf<'sandbox.requested'>,
    secrets: readonly string[],
    job: string | undefined,
  ): Promise<PolicyContext> {
    const { tenant, run_id: chainId } = first;
    const now = Date.now();
    const workers = await this.workers.list();
    const localImageDigests = liveImageDigests(workers, now, this.config.CAIRN_WORKER_STALE_AFTER_MS);
    const context: PolicyContext = { policy: this.policy, localImageDigests, kind: chainId.startsWith('sbx_') ? 'sandbox' : 'run' };
    if (first.principal !== undefined) context.submitter = first.principal;
    if (secrets.length > 0 && this.secretAccess !== null) context.secrets = await this.secretAccess.of(tenant, secrets);
    if (job !== undefined || hasTenantQuota(this.policy.budgets)) {
      const records = await this.usage.earlierRuns(chainId, tenant, job, now);
      const usage = summariseUsage(records, job, now);
      context.jobRuns = usage.jobRuns;
      context.tenantUsage = usage.tenant;
    }
    return context;
  }

  private async decide(submitted: EvidenceReceiptOf<'run.submitted'>): Promise<PolicyOutcome> {
    const context = await this.contextFor(submitted, submitted.spec.secrets ?? [], submitted.spec.job);
    return decidePolicy(submitted.spec, context);
  }

  /** One `approval.requested` per run-scope approval still wanted, each guarded on the receipt before it. */
  private async requestApprovals(ctx: ReactionContext, outcome: PolicyOutcome, now: number, headSeq: number): Promise<void> {
    let head = headSeq;
    for (const approval of outcome.approvals) {
      if (approval.scope !== 'run' || approval.granted) continue;
      const fields = {
        approval_id: approval.approval_id,
        scope: approval.scope,
        step_index: approval.step_index,
        reason: approval.reason,
        expires_at: new Date(now + approval.timeout_seconds * 1000).toISOString(),
      };
      head = (await ctx.appendAt(head, 'approval.requested', fields, approval.approval_id)).receipt.seq;
    }
  }
}
