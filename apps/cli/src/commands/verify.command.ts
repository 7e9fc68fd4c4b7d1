import { existsSync } from 'node:fs';
import { CairnError, ChainIdSchema, parseEvidenceReceipt } from '@cairn/contracts';
import { checkJudgedGrade } from '@cairn/judgement';
import type { ChainVerification } from '@cairn/evidence';
import type { Command } from 'commander';
import { atomicFileSink } from '../chain-file.writer.js';
import { usageError } from '../exit-codes.js';
import type { CommandContext } from '../command-context.js';
import type { Output } from '../output.js';
import { formatScore } from '../run-report.js';
import { BUNDLE_V2_FORMAT, verifyBundleDocument, verifyFile } from '../verify-file.js';
import { checkBundleLog, checkConsistency, formatLogCheck, readCheckpointFile, readConsistencyProofFile } from '../verify-log.js';
import { checkSeal, formatSealCheck, trustedKeys } from '../verify-seal.js';
import type { NoteVerifier } from '@cairn/transparency';
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

/**
 * Every judge criterion of the grade re-derived from the recorded answers (docs/adr/0030); one
 * that does not re-derive is E_CHAIN_BROKEN `judge_grade_mismatch`. The receipts verified already.
 */
function checkJudged(raw: readonly unknown[]): number {
  const receipts = raw.flatMap((r) => {
    const parsed = parseEvidenceReceipt(r);
    return parsed.ok ? [parsed.receipt] : [];
  });
  const checked = checkJudgedGrade(receipts);
  if (checked.problems.length > 0) {
    throw new CairnError('E_CHAIN_BROKEN', `the grade does not re-derive from the recorded judgements: ${checked.problems.join('; ')}`.slice(0, 2000), { reason: 'judge_grade_mismatch' });
  }
  return checked.judged;
}

async function report(output: Output, checked: FileVerification, trusted: readonly NoteVerifier[], from?: string): Promise<void> {
  if (!checked.verification.ok) throw chainBrokenError(checked.verification);
  const recorded = checked.recordedBreaks?.[0];
  if (recorded !== undefined) {
    // The receipts verify, but the chain says its log was broken (a message there that was no receipt): never reported as OK.
    throw new CairnError('E_CHAIN_BROKEN', `the receipts verify, but the chain records at seq ${recorded.seq} that it was broken: ${recorded.message}`, {
      firstBadSeq: recorded.seq,
      reason: 'break_recorded',
    });
  }
  const verified = formatVerified(checked.verification, checked.format, output, from);
  if (checked.claims !== undefined) checkBundleClaims(checked.verification, checked.claims);
  const judged = checkJudged(checked.judgedReceipts ?? []);
  const seal = await checkSeal(checked.last, trusted);
  // The seal line only when there is something to say about a signature.
  const sealLine = seal.status === 'not_sealed' && trusted.length === 0 ? null : formatSealCheck(seal);
  let human = verified.human;
  let machine = verified.machine;
  // A bare bundle (receipts only) reads like a chain file; one with a verdict or grade shows them.
  if (checked.claims !== undefined && !(from === undefined && checked.claims.verdict === null && checked.claims.grade === null)) {
    const claims = formatClaims(checked.claims);
    human = `${human}\n${claims.human}`;
    machine = { ...machine, ...claims.machine };
  }
  if (judged > 0) {
    human = `${human}\njudged  ${judged} judge criteri${judged === 1 ? 'on' : 'a'} re-derived from the recorded answers`;
    machine = { ...machine, judged };
  }
  if (sealLine !== null) {
    human = `${human}\n${sealLine.human}`;
    machine = { ...machine, ...sealLine.machine };
  }
  // A v2 bundle proves its seal is in the log; a v1 bundle says what it does not prove (once a key asks for proof).
  const bundle = checked.bundle;
  if (bundle !== undefined && (bundle.format === BUNDLE_V2_FORMAT || trusted.length > 0)) {
    const log = formatLogCheck(bundle.format === BUNDLE_V2_FORMAT ? await checkBundleLog(bundle.document, checked.last, trusted) : { status: 'no_proof' }, bundle.format);
    human = `${human}\n${log.human}`;
    machine = { ...machine, format: bundle.format, ...log.machine };
  }
  output.result(human, machine);
}

/** `cairn verify --checkpoint old new`: both signed by a pinned key, the new one extending the old (proof from --proof, else fetched). */
async function verifyCheckpoints(output: Output, context: CommandContext, olderPath: string, newerPath: string, proofPath: string | undefined, trusted: readonly NoteVerifier[]): Promise<void> {
  const [olderNote, newerNote] = [await readCheckpointFile(olderPath), await readCheckpointFile(newerPath)];
  const outcome = await checkConsistency(olderNote, newerNote, trusted, async (from, to) => {
    if (proofPath !== undefined) return readConsistencyProofFile(proofPath);
    const { resolveTarget } = await import('../stack/stack-target.js');
    return (await resolveTarget(context.env)).client.tlog.consistency(from, to);
  });
  const root = Buffer.from(outcome.newer.rootHash).toString('base64');
  output.result(`${output.okMark()}  checkpoint ${outcome.newer.size} extends ${outcome.older.size} (+${outcome.grew})  origin ${outcome.newer.origin}  root ${root}  signed by ${outcome.key}`, {
    ok: true,
    origin: outcome.newer.origin,
    from: outcome.older.size,
    to: outcome.newer.size,
    rootHash: root,
    key: outcome.key,
  });
}

function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
}

export function registerVerifyCommand(program: Command, context: CommandContext): void {
  program
    .command('verify')
    .description('verify a run (its proof bundle fetched from the stack), a chain file (JSON Lines) or a proof bundle offline: recompute every hash from genesis')
    .argument('<run-id | file>', 'a run id (run_…), sandbox id (sbx_…) or admin chain (adm_<tenant>), a chain file (.jsonl, one receipt per line) or a proof bundle (.json, format cairn.bundle/v1 or v2); with --checkpoint, the newer checkpoint file')
    .option('-o, --output <file>', 'with a run id: also save the fetched proof bundle to this file (verify it again later, offline)')
    .option('--key <verifier-key>', "a trusted seal key (<name>+<key id>+<base64>, from GET /.well-known/cairn/keys): the seal's signature must verify with it (repeatable)", collect, [])
    .option('--trust-file <file>', 'a file of trusted seal keys, one a line (repeatable)', collect, [])
    .option('--checkpoint <older>', 'check that the checkpoint file given as the argument extends this older one (both signed notes, as GET /v1/tlog/checkpoint serves them)')
    .option('--proof <file>', "with --checkpoint: the consistency proof (GET /v1/tlog/proof/consistency's JSON); fetched from the stack when absent")
    .addHelpText(
      'after',
      '\nA run id fetches GET /v1/runs/<id>/bundle (a sandbox id GET /v1/sandboxes/<id>/bundle, adm_<tenant> GET /v1/tenants/<tenant>/bundle) from the stack (CAIRN_HOME, or CAIRN_URL + CAIRN_API_KEY), then checks it\n' +
        'locally like a file: the server is not trusted. A file is checked with no server contacted.\n' +
        'Prints the head hash, and for a bundle its verdict and grade.\n' +
        'With --key or --trust-file the seal must carry an Ed25519 signature by one of those keys over its chain, head, digest and state\n' +
        '(E_CHAIN_BROKEN: seal_unsigned, seal_key_unknown, seal_signature_invalid, not_sealed); without them a signature is shown, not checked.\n' +
        'A cairn.bundle/v2 (cairn export --bundle) also proves its seal is a leaf of the checkpoint it carries, signed by a pinned key\n' +
        '(E_CHAIN_BROKEN: leaf_mismatch, proof_chain_mismatch, inclusion_invalid, tree_size_mismatch, checkpoint_signature_invalid,\n' +
        'checkpoint_key_unknown, checkpoint_origin_mismatch, bundle_signature_mismatch); a v1 bundle says it proves no inclusion.\n' +
        '--checkpoint <older> <newer> checks two signed checkpoints of the log: log_rolled_back, checkpoint_inconsistent.\n' +
        'Exit status: 0 when the chain verifies, 1 when it is broken (E_CHAIN_BROKEN with the first bad seq) or the run\n' +
        'is unknown (E_NOT_FOUND), 2 when the file cannot be read.',
    )
    .action(async (target: string, options: { output?: string; key: string[]; trustFile: string[]; checkpoint?: string; proof?: string }, command: Command) => {
      const output = context.output(command);
      const trusted = await trustedKeys(options.key, options.trustFile);
      if (options.checkpoint !== undefined) {
        await verifyCheckpoints(output, context, options.checkpoint, target, options.proof, trusted);
        return;
      }
      if (options.proof !== undefined) throw usageError('--proof goes with --checkpoint <older> <newer>');
      if (!isRunReference(target)) {
        await report(output, await verifyFile(target), trusted);
        return;
      }
      const { resolveTarget } = await import('../stack/stack-target.js');
      const { client } = await resolveTarget(context.env);
      const bundle = await client.chains.bundle(target);
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
      await report(output, checked, trusted, client.url);
    });
}
