import { existsSync } from 'node:fs';
import { CairnError, ChainIdSchema } from '@cairn/contracts';
import type { ChainVerification } from '@cairn/evidence';
import type { Command } from 'commander';
import { atomicFileSink } from '../chain-file.writer.js';
import type { CommandContext } from '../command-context.js';
import type { Output } from '../output.js';
import { formatScore } from '../run-report.js';
import { verifyBundleDocument, verifyFile } from '../verify-file.js';
import type { BundleClaims, EvidenceFileFormat, FileVerification } from '../verify-file.js';

type Verified = Extract<ChainVerification, { ok: true }>;
type Broken = Extract<ChainVerification, { ok: false }>;

/** `OK  <n> receipts  chain <id>  head <hash>` (and the machine shape beside it). */
export function formatVerified(result: Verified, format: EvidenceFileFormat, output: Pick<Output, 'okMark'>, from?: string): { human: string; machine: Record<string, unknown> } {
  const chain = result.chainId ?? '-';
  const noun = result.count === 1 ? 'receipt' : 'receipts';
  const origin = format === 'bundle' ? (from === undefined ? '  (proof bundle)' : `  (proof bundle from ${from})`) : '';
  return {
    human: `${output.okMark()}  ${result.count} ${noun}  chain ${chain}  head ${result.headHash}${origin}`,
    machine: { ok: true, chainId: result.chainId, count: result.count, headHash: result.headHash },
  };
}

/** The expected error for a chain that does not verify: the first bad seq and why. */
export function chainBrokenError(result: Broken): CairnError {
  return new CairnError('E_CHAIN_BROKEN', `chain broken at seq ${result.firstBadSeq} (${result.reason}): ${result.message}`, {
    firstBadSeq: result.firstBadSeq,
    reason: result.reason,
  });
}

/**
 * A bundle's own statements must agree with its receipts: the run they belong to and the head
 * they end in. A bundle that says otherwise is not evidence of what it claims.
 */
export function checkBundleClaims(result: Verified, claims: BundleClaims): void {
  if (claims.runId !== null && result.chainId !== null && claims.runId !== result.chainId) {
    throw new CairnError('E_CHAIN_BROKEN', `the bundle names run ${claims.runId}, but its receipts are the chain of ${result.chainId}`, { reason: 'run_id_mismatch' });
  }
  if (claims.headHash !== null && claims.headHash !== result.headHash) {
    throw new CairnError('E_CHAIN_BROKEN', `the bundle names head ${claims.headHash}, but its receipts recompute to ${result.headHash}`, {
      reason: 'head_mismatch',
      firstBadSeq: result.count,
    });
  }
}

/** `verdict SUPPORTS  grade 4/4  artifacts 2` for a bundle that carries them. */
export function formatClaims(claims: BundleClaims): { human: string; machine: Record<string, unknown> } {
  const grade = claims.grade;
  return {
    human: `verdict ${claims.verdict ?? '-'}  grade ${grade === null ? '-' : formatScore(grade.score, grade.maxScore, grade.upperBound)}  artifacts ${Object.keys(claims.artifacts).length}`,
    machine: { verdict: claims.verdict, grade, artifacts: claims.artifacts },
  };
}

/** A run, sandbox or admin chain id is fetched from the stack unless a file of that name is right here. */
export function isRunReference(target: string): boolean {
  return ChainIdSchema.safeParse(target).success && !existsSync(target);
}

function report(output: Output, checked: FileVerification, from?: string): void {
  if (!checked.verification.ok) throw chainBrokenError(checked.verification);
  const { human, machine } = formatVerified(checked.verification, checked.format, output, from);
  if (checked.claims === undefined) {
    output.result(human, machine);
    return;
  }
  checkBundleClaims(checked.verification, checked.claims);
  // A bare bundle (receipts only) reads like a chain file; one with a verdict or grade shows them.
  if (from === undefined && checked.claims.verdict === null && checked.claims.grade === null) {
    output.result(human, machine);
    return;
  }
  const claims = formatClaims(checked.claims);
  output.result(`${human}\n${claims.human}`, { ...machine, ...claims.machine });
}

export function registerVerifyCommand(program: Command, context: CommandContext): void {
  program
    .command('verify')
    .description('verify a run (its proof bundle fetched from the stack), a chain file (JSON Lines) or a proof bundle offline: recompute every hash from genesis')
    .argument('<run-id | file>', 'a run id (run_…), sandbox id (sbx_…) or admin chain (adm_<tenant>), a chain file (.jsonl, one receipt per line) or a proof bundle (.json, format cairn.bundle/v1)')
    .option('-o, --output <file>', 'with a run id: also save the fetched proof bundle to this file (verify it again later, offline)')
    .addHelpText(
      'after',
      '\nA run id fetches GET /v1/runs/<id>/bundle (a sandbox id GET /v1/sandboxes/<id>/bundle, adm_<tenant> GET /v1/tenants/<tenant>/bundle) from the stack (CAIRN_HOME, or CAIRN_URL + CAIRN_API_KEY), then checks it\n' +
        'locally like a file: the server is not trusted. A file is checked with no server contacted.\n' +
        'Prints the head hash, and for a bundle its verdict and grade.\n' +
        'Exit status: 0 when the chain verifies, 1 when it is broken (E_CHAIN_BROKEN with the first bad seq) or the run\n' +
        'is unknown (E_NOT_FOUND), 2 when the file cannot be read.',
    )
    .action(async (target: string, options: { output?: string }, command: Command) => {
      const output = context.output(command);
      if (!isRunReference(target)) {
        report(output, await verifyFile(target));
        return;
      }
      const { resolveTarget } = await import('../stack/stack-target.js');
      const { client } = await resolveTarget(context.env);
      const bundle = await client.bundle(target);
      if (options.output !== undefined) {
        const sink = await atomicFileSink(options.output);
        try {
          await sink.writeReceipt(bundle);
          await sink.commit();
        } catch (error) {
          await sink.abort();
          throw error;
        }
      }
      const checked = verifyBundleDocument(bundle, `the bundle of ${target}`);
      if (checked.verification.ok && checked.verification.chainId !== target) {
        throw new CairnError('E_CHAIN_BROKEN', `asked for ${target}, the gateway sent the chain of ${checked.verification.chainId ?? '?'}`, { reason: 'run_id_mismatch' });
      }
      report(output, checked, client.baseUrl);
    });
}
