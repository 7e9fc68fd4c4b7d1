import { CairnError } from '@cairn/contracts';
import type { ReactionContext, ReactorHandler } from '@cairn/service-kit';
import { JsonLogger, SERVICE_CONFIG, SERVICE_LOGGER } from '@cairn/service-kit';
import { Inject, Injectable } from '@nestjs/common';
import { ArtifactLoader } from './artifact.loader.js';
import type { GraderConfig } from './grader.config.js';
import { readRunChain } from './run-chain.reader.js';
import type { RunChain } from './run-chain.reader.js';
import { outputRefsOf, recordedRunOf } from './run-outputs.reader.js';
import { decideSeal, gradeRun, SEAL_TRIGGERS, shouldGrade } from './run-seal.js';

/**
 * Grades verified runs and seals every run that is over — the single sealer (docs/adr/0003). On
 * `verification.completed`: `grade.recorded` (unless a grade exists: the first wins), then
 * `run.sealed` SEALED. On an event that ended the run: `run.sealed` with the run's final state and
 * error code. Nothing is appended to a sealed run. Both appends are keyed by this receipt, so a
 * redelivery after a crash between them stores each once.
 */
@Injectable()
export class GradingHandler implements ReactorHandler {
  readonly types: ReadonlySet<string> = new Set(SEAL_TRIGGERS);

  constructor(
    private readonly artifacts: ArtifactLoader,
    @Inject(SERVICE_CONFIG) private readonly config: GraderConfig,
    @Inject(SERVICE_LOGGER) private readonly logger: JsonLogger,
  ) {}

  async handle(ctx: ReactionContext): Promise<void> {
    if (!ctx.chainId.startsWith('run_')) return;
    const trigger = ctx.receipt;
    let chain = await this.read(ctx);
    if (chain === null || chain.view === null || chain.view.sealed) return;

    if (shouldGrade(chain, trigger)) {
      const loaded = await this.artifacts.load(outputRefsOf(recordedRunOf(chain.receipts)).map((ref) => ref.sha256));
      const grade = gradeRun(chain.receipts, loaded);
      await ctx.append('grade.recorded', grade);
      this.logger.write('info', 'graded', { run_id: ctx.chainId, score: grade.score, max_score: grade.max_score, upper_bound: grade.upper_bound });
      chain = await this.read(ctx);
      if (chain === null) return;
    }

    const decision = decideSeal(chain, trigger, Date.now(), this.config.CAIRN_GRADER_TEARDOWN_GRACE_MS);
    switch (decision.kind) {
      case 'none':
        return;
      case 'wait':
        // E_UNAVAILABLE: the reactor naks with a back-off and delivers the trigger again, without limit.
        throw new CairnError('E_UNAVAILABLE', `not sealing ${ctx.chainId} yet: ${decision.reason}`);
      case 'seal': {
        const sealed = await ctx.append('run.sealed', decision.fields);
        if (sealed.receipt.prev_hash !== decision.fields.evidence_digest) {
          // Something was appended between the read and the seal (the log re-seals onto the new head).
          this.logger.write('error', 'the seal landed on another head than the one it covers', {
            run_id: ctx.chainId,
            evidence_digest: decision.fields.evidence_digest,
            prev_hash: sealed.receipt.prev_hash,
          });
        }
        this.logger.write('info', 'sealed', { run_id: ctx.chainId, final_state: decision.fields.final_state, error_code: decision.fields.error_code ?? null });
        return;
      }
    }
  }

  private async read(ctx: ReactionContext): Promise<RunChain | null> {
    const chain = readRunChain(await ctx.readChain());
    if (chain === null) this.logger.write('warn', 'not sealing a chain that does not validate', { run_id: ctx.chainId });
    return chain;
  }
}
