import { FACTS_OPERATIONS } from '@cairn/kernel';
import { readRunChain } from '@cairn/lifecycle';
import { ArtifactLoader, JsonLogger, outputRefsOf, recordedRunOf, runFacts, SERVICE_LOGGER } from '@cairn/service-kit';
import type { ReactionContext, ReactorHandler } from '@cairn/service-kit';
import { Inject, Injectable } from '@nestjs/common';

/**
 * Reacts to `run.executed` with `kernel.facts`: the run's step receipts and collected files, read
 * from the artifact store by their recorded hashes (bounded, re-hashed), summarised by the kernel's
 * registered operations only. Nothing from the run is ever executed. An output that cannot be read
 * is named in the facts (`unavailable`), never a crash: the verifier judges it.
 */
@Injectable()
export class KernelFactsHandler implements ReactorHandler {
  readonly types: ReadonlySet<string> = new Set(['run.executed']);

  constructor(
    private readonly artifacts: ArtifactLoader,
    @Inject(SERVICE_LOGGER) private readonly logger: JsonLogger,
  ) {}

  async handle(ctx: ReactionContext): Promise<void> {
    if (ctx.receipt.type !== 'run.executed' || !ctx.chainId.startsWith('run_')) return;
    // Computed from the chain as read, appended onto that head only: a cancel (or any receipt)
    // landing in between makes the reaction read again and decide again (docs/adr/0003).
    await ctx.reactOnChain(async ({ receipts, headSeq }) => {
      const chain = readRunChain(receipts);
      if (chain === null) {
        this.logger.write('warn', 'not computing facts of a chain that does not validate', { run_id: ctx.chainId });
        return;
      }
      // Computed before (a redelivery, perhaps past the dedupe window), or the run moved on (cancelled, failed).
      if (chain.receipts.some((r) => r.type === 'kernel.facts') || chain.view?.state !== 'EXECUTED') return;

      const run = recordedRunOf(chain.receipts);
      const loaded = await this.artifacts.load(outputRefsOf(run).map((ref) => ref.sha256));
      ctx.working();
      const facts = runFacts(run, loaded);
      await ctx.appendAt(headSeq, 'kernel.facts', { facts, operations: [...FACTS_OPERATIONS] });
      const level = facts.unavailable.length === 0 ? 'info' : 'warn';
      this.logger.write(level, 'facts computed', {
        run_id: ctx.chainId,
        steps: facts.steps.length,
        artifacts: Object.keys(facts.artifacts).length,
        unavailable: facts.unavailable.map((u) => `${u.source}: ${u.state}`),
      });
    });
  }
}
