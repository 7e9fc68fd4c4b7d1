import { isCairnError } from '@cairn/contracts';
import { verifyChain } from '@cairn/evidence';
import type { ChainVerification } from '@cairn/evidence';
import { readRunChain } from '@cairn/lifecycle';
import type { RunChain } from '@cairn/lifecycle';
import { ArtifactLoader, endRunSecretSeen, JsonLogger, outputRefsOf, recordedRunOf, RunScanners, scanFields, SERVICE_LOGGER } from '@cairn/service-kit';
import type { ChainSnapshot, ReactionContext, ReactorHandler } from '@cairn/service-kit';
import { Inject, Injectable } from '@nestjs/common';
import { chainBreakMessage, chainBreakResponse, verifyRun } from './run-verification.js';

/**
 * Reacts to `kernel.facts` with `verification.completed`. Independent of everything that produced
 * the run: it recomputes the chain from genesis, re-reads and re-hashes every artifact the receipts
 * name, recomputes the facts, checks the run's invariants, judges the claim and the regression gate
 * (a gate that fails is `E_GATE_FAIL` on the same receipt, which ends the run ROLLBACK with its
 * patch rejected: one append, so nothing can seal the run between the two). A chain that does
 * not verify gets a critical alert (a `fatal` log line, `alert.raised`) and `run.failed`
 * E_CHAIN_BROKEN where the chain can still take them (see `chainBreakResponse`).
 */
@Injectable()
export class VerificationHandler implements ReactorHandler {
  readonly types: ReadonlySet<string> = new Set(['kernel.facts']);

  constructor(
    private readonly artifacts: ArtifactLoader,
    private readonly scanners: RunScanners,
    @Inject(SERVICE_LOGGER) private readonly logger: JsonLogger,
  ) {}

  async handle(ctx: ReactionContext): Promise<void> {
    if (ctx.receipt.type !== 'kernel.facts' || !ctx.chainId.startsWith('run_')) return;
    try {
      // Judged from the chain as read, appended onto that head only: a cancel (or any receipt)
      // landing in between makes the reaction read again and judge again (docs/adr/0003).
      await ctx.reactOnChain((chain) => this.react(ctx, chain));
    } catch (error) {
      if (!(isCairnError(error) && error.code === 'E_CHAIN_BROKEN')) throw error;
      // A message under the chain's subject that is not a receipt: the head may be that message,
      // and whether the run is sealed cannot be told, so nothing is appended.
      this.logger.write('fatal', 'evidence chain broken: a stored message is not a receipt; nothing appended', {
        run_id: ctx.chainId,
        code: 'E_CHAIN_BROKEN',
        error: error.message,
      });
    }
  }

  private async react(ctx: ReactionContext, { receipts: raw, headSeq }: ChainSnapshot): Promise<void> {
    const chain = readRunChain(raw);
    const integrity = verifyChain(raw, { chainId: ctx.chainId });
    if (!integrity.ok) {
      await this.chainBroken(ctx, chain, integrity, headSeq);
      return;
    }
    if (chain === null) return; // every item verified, so each is a receipt envelope: not reached
    const { receipts, view } = chain;
    // Verified before (a redelivery), or the run moved on: verify a run once, while it is EXECUTED.
    if (view?.state !== 'EXECUTED' || receipts.some((r) => r.type === 'verification.completed')) return;

    const loaded = await this.artifacts.load(outputRefsOf(recordedRunOf(receipts)).map((ref) => ref.sha256));
    ctx.working();
    // A check's detail may quote what it read from an output (decoded): scanned with the run's secrets first.
    const scanned = scanFields(await this.scanners.forRun(receipts), verifyRun(integrity, receipts, loaded));
    if (scanned.findings.length > 0) {
      this.logger.write('fatal', 'secret seen in a verification: not recorded, run stopped', { run_id: ctx.chainId, error_code: 'E_SECRET_SEEN', findings: scanned.findings.length });
      await endRunSecretSeen(ctx, headSeq, 'verification.completed', scanned.findings);
      return;
    }
    const fields = scanned.fields;
    await ctx.appendAt(headSeq, 'verification.completed', fields);
    const failed = fields.invariants.filter((i) => !i.ok);
    this.logger.write(failed.length === 0 ? 'info' : 'error', 'verified', {
      run_id: ctx.chainId,
      verdict: fields.verdict,
      failed_invariants: failed.map((i) => `${i.id}: ${i.detail ?? ''}`),
      ...(fields.gate === undefined ? {} : { gate_passed: fields.gate.passed, patch_rejected: fields.gate.patch.rejected, error_code: fields.error_code ?? null }),
    });
  }

  /** The alert, then `run.failed`, each guarded on the receipt before it, so neither lands after a seal. */
  private async chainBroken(ctx: ReactionContext, chain: RunChain | null, broken: Extract<ChainVerification, { ok: false }>, headSeq: number): Promise<void> {
    const message = chainBreakMessage(broken);
    const response = chainBreakResponse(chain?.view ?? null);
    // Recorded before for this receipt (a redelivery past the dedupe window): never twice.
    const recorded = (type: string) => chain?.receipts.some((r) => r.type === type && r.actor === ctx.service && r.causation === ctx.eventId) ?? false;
    this.logger.write('fatal', 'evidence chain broken', {
      run_id: ctx.chainId,
      code: 'E_CHAIN_BROKEN',
      first_bad_seq: broken.firstBadSeq,
      reason: broken.reason,
      recorded: response.alert ? (response.fail ? 'alert.raised, run.failed' : 'alert.raised') : 'nothing: the run is sealed',
    });
    let head = headSeq;
    if (response.alert && !recorded('alert.raised')) {
      head = (await ctx.appendAt(head, 'alert.raised', { severity: 'critical', error_code: 'E_CHAIN_BROKEN', message }, 'chain-broken')).receipt.seq;
    }
    if (response.fail && !recorded('run.failed')) await ctx.appendAt(head, 'run.failed', { error_code: 'E_CHAIN_BROKEN', message }, 'chain-broken');
  }
}
