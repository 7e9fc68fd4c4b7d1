import { ArtifactHashesSchema, BUNDLE_FORMAT, CairnError, Sha256HexSchema, StepIndexSchema, VerdictSchema } from '@cairn/contracts';
import type { Grade, ProofBundle, Receipt } from '@cairn/contracts';
import { splitAttempts } from '@cairn/lifecycle';
import { z } from 'zod';

// Only the fields the bundle lifts out of a receipt; the receipts themselves go in untouched.
const StepOutputs = z.object({
  step_index: StepIndexSchema,
  stdout_sha256: Sha256HexSchema,
  stderr_sha256: Sha256HexSchema,
  artifact_hashes: ArtifactHashesSchema,
});
const Collected = z.object({ artifact_hashes: ArtifactHashesSchema });
const Verification = z.object({ verdict: VerdictSchema });
const GradeFields = z.object({ score: z.number(), max_score: z.number(), upper_bound: z.number() });
const ExecOutputs = z.object({ exec_id: z.string(), stdout_sha256: Sha256HexSchema, stderr_sha256: Sha256HexSchema });
const FileWritten = z.object({ path: z.string(), sha256: Sha256HexSchema });

/**
 * A chain's proof bundle (`cairn.bundle/v1`) from its receipts in chain order: a run's or a
 * sandbox session's (the format names the chain `runId` either way). Everything in it comes from
 * the receipts, so it says nothing the chain does not: artifact hashes from each `step.completed`
 * (outputs as `steps[i].stdout|stderr`, files by path) and from `run.executed` (the collected
 * files, which win), from each `sandbox.exec.completed` (`execs[<id>].stdout|stderr`) and
 * `sandbox.file.written` (the last write of a path); the verdict of the last
 * `verification.completed`; the first `grade.recorded` (the first grade wins, I-11); the head
 * hash of the last receipt. A run retried after a lost worker (ADR 0035) keeps every attempt's
 * receipts; the outputs of an earlier attempt `n` are named `attempts[n].steps[i].stdout|stderr`
 * and `attempts[n].<path>`, so the names without a prefix are the current attempt's alone.
 */
export function buildProofBundle(chainId: string, receipts: readonly Receipt[]): ProofBundle {
  const last = receipts.at(-1);
  if (last === undefined) throw new CairnError('E_NOT_FOUND', `chain ${chainId} has no receipts yet`, { chainId });
  const stepFiles = new Map<string, string>();
  const collected = new Map<string, string>();
  let verdict: ProofBundle['verdict'] = null;
  let grade: Grade | null = null;
  const earlier = new Map<Receipt, string>();
  for (const lost of splitAttempts(receipts).lost) for (const receipt of lost.receipts) earlier.set(receipt, `attempts[${lost.attempt}].`);
  for (const receipt of receipts) {
    switch (receipt.type) {
      case 'step.completed': {
        const step = StepOutputs.safeParse(receipt);
        if (!step.success) break;
        const prefix = earlier.get(receipt) ?? '';
        stepFiles.set(`${prefix}steps[${step.data.step_index}].stdout`, step.data.stdout_sha256);
        stepFiles.set(`${prefix}steps[${step.data.step_index}].stderr`, step.data.stderr_sha256);
        for (const [path, hash] of Object.entries(step.data.artifact_hashes)) stepFiles.set(`${prefix}${path}`, hash);
        break;
      }
      case 'run.executed': {
        const executed = Collected.safeParse(receipt);
        if (executed.success) for (const [path, hash] of Object.entries(executed.data.artifact_hashes)) collected.set(path, hash);
        break;
      }
      case 'sandbox.exec.completed': {
        const exec = ExecOutputs.safeParse(receipt);
        if (!exec.success) break;
        stepFiles.set(`execs[${exec.data.exec_id}].stdout`, exec.data.stdout_sha256);
        stepFiles.set(`execs[${exec.data.exec_id}].stderr`, exec.data.stderr_sha256);
        break;
      }
      case 'sandbox.file.written': {
        const written = FileWritten.safeParse(receipt);
        if (written.success) stepFiles.set(written.data.path, written.data.sha256);
        break;
      }
      case 'verification.completed': {
        const verification = Verification.safeParse(receipt);
        if (verification.success) verdict = verification.data.verdict;
        break;
      }
      case 'grade.recorded': {
        const recorded = GradeFields.safeParse(receipt);
        if (recorded.success && grade === null) grade = { score: recorded.data.score, maxScore: recorded.data.max_score, upperBound: recorded.data.upper_bound };
        break;
      }
      default:
        break;
    }
  }
  const merged = new Map([...stepFiles, ...collected]);
  const artifacts = Object.fromEntries([...merged].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
  return { format: BUNDLE_FORMAT, runId: chainId, receipts: [...receipts], artifacts, verdict, grade, headHash: last.hash };
}
