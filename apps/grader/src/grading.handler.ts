import { CairnError } from '@cairn/contracts';
import { readRunChain, readSandboxChain } from '@cairn/lifecycle';
import type { RunChain } from '@cairn/lifecycle';
import type { JudgementOutcome } from '@cairn/judgement';
import { ArtifactLoader, endRunSecretSeen, JsonLogger, judgementContextOf, outputRefsOf, recordedRunOf, RunScanners, scanFields, SERVICE_CONFIG, SERVICE_LOGGER } from '@cairn/service-kit';
import type { ChainSnapshot, ReactionContext, ReactorHandler } from '@cairn/service-kit';
import type { NoteSigner } from '@cairn/transparency';
import { Inject, Injectable } from '@nestjs/common';
import type { GraderConfig } from './grader.config.js';
import { JUDGE_CLIENT } from './judge-client.js';
import type { JudgeClient } from './judge-client.js';
import { judgeRun } from './judging.js';
import { decideSeal, gradeRun, judgeCriteriaOf, SEAL_TRIGGERS, shouldGrade } from './run-seal.js';
import { decideSandboxSeal, SANDBOX_SEAL_TRIGGERS } from './sandbox-seal.js';
import { SEAL_LOG } from './seal-log.js';
import type { SealLog } from './seal-log.js';
import { SEAL_SIGNER, signedSealFields } from './seal-signing.js';

/**
 * Grades verified runs and seals every run that is over — the single sealer (docs/adr/0003). On
 * `verification.completed`: `grade.recorded` (unless a grade exists: the first wins), then
 * `run.sealed` SEALED — a rubric with `judge` criteria is judged first (./judging.ts), and a judge
 * that fails records `grade.failed` and leaves the run unsealed until a `grade.requested`
 * (`cairn regrade`) starts the next attempt (docs/adr/0030). On an event that ended the run: `run.sealed` with the run's final state and
 * error code. Nothing is appended to a sealed run. Both appends are keyed by this receipt, so a
 * redelivery after a crash between them stores each once. Each `run.sealed` delivered (its own,
 * delivered back) is appended to the log of seal heads (./seal-log.ts) before it is acked.
 */
@Injectable()
export class GradingHandler implements ReactorHandler {
  readonly types: ReadonlySet<string>;

  constructor(
    private readonly artifacts: ArtifactLoader,
    private readonly scanners: RunScanners,
    @Inject(SERVICE_CONFIG) private readonly config: GraderConfig,
    @Inject(SERVICE_LOGGER) private readonly logger: JsonLogger,
    @Inject(SEAL_SIGNER) private readonly signer: NoteSigner | null,
    @Inject(SEAL_LOG) private readonly sealLog: SealLog | null,
    @Inject(JUDGE_CLIENT) private readonly judge: JudgeClient | null,
  ) {
    this.types = new Set<string>([...SEAL_TRIGGERS, ...SANDBOX_SEAL_TRIGGERS, ...(sealLog === null ? [] : ['run.sealed'])]);
  }

  async handle(ctx: ReactionContext): Promise<void> {
    if (ctx.receipt.type === 'run.sealed') {
      await this.sealLog?.append(ctx.receipt);
      return;
    }
    if (ctx.chainId.startsWith('sbx_')) {
      await ctx.reactOnChain((chain) => this.sealSandbox(ctx, chain));
      return;
    }
    if (!ctx.chainId.startsWith('run_') || !(SEAL_TRIGGERS as readonly string[]).includes(ctx.receipt.type)) return;
    // Graded and sealed from the chain as read, each appended onto the head it was decided from:
    // a receipt landing in between (a late `sandbox.destroyed`, a cancel) makes the reaction read
    // again and decide again, so the seal covers the head it lands on and nothing follows it.
    await ctx.reactOnChain((chain) => this.react(ctx, chain));
  }

  private async react(ctx: ReactionContext, snapshot: ChainSnapshot): Promise<void> {
    let raw = snapshot.receipts;
    const headSeq = snapshot.headSeq;
    const trigger = ctx.receipt;
    let chain = this.parse(ctx, raw);
    let head = headSeq;
    if (chain === null || chain.view === null || chain.view.sealed) return;

    if (shouldGrade(chain, trigger)) {
      const loaded = await this.artifacts.load(outputRefsOf(recordedRunOf(chain.receipts)).map((ref) => ref.sha256));
      ctx.working();
      const scanner = await this.scanners.forRun(chain.receipts);
      let judgements = new Map<string, JudgementOutcome>();
      const criteria = judgeCriteriaOf(chain.receipts);
      if (criteria.length > 0) {
        // The judge you bring (docs/adr/0030): each judgement on the chain before the grade; a failure ends the reaction unsealed.
        const facts = chain.receipts.find((r) => r.type === 'kernel.facts')?.facts ?? {};
        const judged = await judgeRun(ctx, { receipts: raw, headSeq }, chain.receipts, criteria, judgementContextOf(recordedRunOf(chain.receipts), loaded, facts), {
          judge: this.judge,
          config: this.config,
          scanner,
          logger: this.logger,
        });
        if (judged.kind === 'stopped') return;
        judgements = judged.judgements;
        const reread = this.parse(ctx, judged.snapshot.receipts);
        if (reread === null) return;
        chain = reread;
        head = judged.snapshot.headSeq;
        raw = judged.snapshot.receipts;
      }
      // A criterion's detail may quote what it read from an output (decoded): scanned with the run's secrets first.
      const scanned = scanFields(scanner, gradeRun(chain.receipts, loaded, judgements));
      if (scanned.findings.length > 0) {
        this.logger.write('fatal', 'secret seen in a grade: not recorded, run stopped', { run_id: ctx.chainId, error_code: 'E_SECRET_SEEN', findings: scanned.findings.length });
        // Its run.failed is delivered here next, and seals the run.
        await endRunSecretSeen(ctx, head, 'grade.recorded', scanned.findings);
        return;
      }
      const grade = scanned.fields;
      const graded = await ctx.appendAt(head, 'grade.recorded', grade);
      this.logger.write('info', 'graded', { run_id: ctx.chainId, score: grade.score, max_score: grade.max_score, upper_bound: grade.upper_bound });
      // Stored onto the head read, the grade is the new head; a duplicate (stored by an earlier
      // delivery) may sit anywhere, so the chain is read again.
      const after = graded.duplicate ? await ctx.snapshot() : { receipts: [...raw, graded.receipt], headSeq: graded.receipt.seq };
      chain = this.parse(ctx, after.receipts);
      head = after.headSeq;
      if (chain === null) return;
    }

    const decision = decideSeal(chain, trigger, Date.now(), this.config.CAIRN_GRADER_TEARDOWN_GRACE_MS);
    switch (decision.kind) {
      case 'none':
        return;
      case 'wait':
        // E_UNAVAILABLE: the reactor naks with a back-off and delivers the trigger again, without limit.
        throw new CairnError('E_UNAVAILABLE', `not sealing ${ctx.chainId} yet: ${decision.reason}`);
      case 'seal':
        await ctx.appendAt(head, 'run.sealed', await signedSealFields(this.signer, ctx.chainId, chain.receipts, head, decision.fields));
        this.logger.write('info', 'sealed', { run_id: ctx.chainId, final_state: decision.fields.final_state, error_code: decision.fields.error_code ?? null });
        return;
    }
  }

  /** A sandbox session is sealed once it has ended (no grade: a session has no claim). */
  private async sealSandbox(ctx: ReactionContext, { receipts, headSeq }: ChainSnapshot): Promise<void> {
    const chain = readSandboxChain(receipts);
    if (chain === null || chain.view === null) {
      this.logger.write('warn', 'not sealing a sandbox chain that does not validate', { sandbox_id: ctx.chainId });
      return;
    }
    const decision = decideSandboxSeal(chain, ctx.receipt, Date.now(), this.config.CAIRN_GRADER_TEARDOWN_GRACE_MS);
    switch (decision.kind) {
      case 'none':
        return;
      case 'wait':
        throw new CairnError('E_UNAVAILABLE', `not sealing ${ctx.chainId} yet: ${decision.reason}`);
      case 'seal':
        await ctx.appendAt(headSeq, 'run.sealed', await signedSealFields(this.signer, ctx.chainId, chain.receipts, headSeq, decision.fields));
        this.logger.write('info', 'sealed', { sandbox_id: ctx.chainId, final_state: decision.fields.final_state, error_code: decision.fields.error_code ?? null });
        return;
    }
  }

  private parse(ctx: ReactionContext, raw: readonly unknown[]): RunChain | null {
    const chain = readRunChain(raw);
    if (chain === null) this.logger.write('warn', 'not sealing a chain that does not validate', { run_id: ctx.chainId });
    return chain;
  }
}
