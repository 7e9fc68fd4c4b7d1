import { FACTS_OPERATIONS } from '@cairn/kernel';
import { readRunChain } from '@cairn/lifecycle';
import { ArtifactLoader, endRunSecretSeen, JsonLogger, outputRefsOf, recordedRunOf, runFacts, RunScanners, scanFields, SERVICE_LOGGER } from '@cairn/service-kit';
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
    private readonly scanners: RunScanners,
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
      // A test's name or a JSON value may decode (an XML entity, a `\u` escape) to a secret the
      // runtime's scan of the raw bytes could not see: the facts are scanned with the run's secrets.
      const scanned = scanFields(await this.scanners.forRun(chain.receipts), { facts: runFacts(run, loaded), operations: [...FACTS_OPERATIONS] });
      if (scanned.findings.length > 0) {
        this.logger.write('fatal', 'secret seen in the facts of a run: not recorded, run stopped', { run_id: ctx.chainId, error_code: 'E_SECRET_SEEN', findings: scanned.findings.length });
        await endRunSecretSeen(ctx, headSeq, 'kernel.facts', scanned.findings);
        return;
      }
      const { facts } = scanned.fields;
      await ctx.appendAt(headSeq, 'kernel.facts', scanned.fields);
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
