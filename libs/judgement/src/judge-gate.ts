import type { CheckOutcome } from './evaluate-check.js';
import { evaluateCheck } from './evaluate-check.js';
import type { JudgementContext } from './judgement-context.js';
import { boundDetail } from './judgement-context.js';
import { resolveSource } from './resolve-source.js';

/** A gate check as the verifier reads it; the RunSpec's `GateCheck` fits. */
export interface GateCheckInput {
  id: string;
  /** The source read on the baseline: what ran before the patch step. */
  before: string;
  /** The source read after the patch step. */
  after: string;
  op: string;
  value?: unknown;
}

/** A gate with its patch step resolved to an index (`gatePatchStepIndex`). */
export interface GateInput {
  patchStep: number;
  /** The patch artifact's path. */
  patch: string;
  checks: readonly GateCheckInput[];
}

/** What a gate check's two outcomes make it; only `held` and `fixed` pass. */
export type GateCheckResult = 'held' | 'fixed' | 'regressed' | 'failing' | 'unresolved';

export interface GateCheckJudgement {
  id: string;
  before: CheckOutcome;
  after: CheckOutcome;
  result: GateCheckResult;
  detail: string;
}

/** Fits `verification.completed`'s `gate` (`GateOutcomeSchema`). */
export interface GateJudgement {
  passed: boolean;
  patch_step: number;
  patch_exit_code: number | null;
  patch: { path: string; sha256: string | null; rejected: boolean };
  checks: GateCheckJudgement[];
  detail: string;
}

/**
 * The result of one gate check from its outcome before and after the patch: `after` decides
 * (a check that does not hold after the patch fails the gate, fail-closed when it cannot be read);
 * `before` says whether the patch broke it (`regressed`) or it was broken already (`failing`), or
 * whether the patch mended it (`fixed`) or left it holding (`held`).
 */
export function gateCheckResult(before: CheckOutcome, after: CheckOutcome): GateCheckResult {
  switch (after) {
    case 'unresolved':
      return 'unresolved';
    case 'holds':
      return before === 'holds' ? 'held' : 'fixed';
    case 'contradicted':
      return before === 'holds' ? 'regressed' : 'failing';
  }
}

const PASSING: ReadonlySet<GateCheckResult> = new Set(['held', 'fixed']);
const HALF_DETAIL = 500;

function half(text: string): string {
  return text.length > HALF_DETAIL ? `${text.slice(0, HALF_DETAIL - 1)}…` : text;
}

/**
 * The verifier's judgement of a regression gate (docs/adr/0004) against the run's recomputed facts
 * and re-hashed bytes. The gate passes when the patch step exited 0, the patch artifact was
 * collected and re-hashed, and every check holds after the patch (`held` or `fixed`). Otherwise
 * the patch is rejected. Pure; never throws on user input.
 */
export function judgeGate(gate: GateInput, ctx: JudgementContext): GateJudgement {
  const checks = gate.checks.map((check): GateCheckJudgement => {
    const value = check.value === undefined ? {} : { value: check.value };
    const before = evaluateCheck({ id: check.id, source: check.before, op: check.op, ...value }, ctx);
    const after = evaluateCheck({ id: check.id, source: check.after, op: check.op, ...value }, ctx);
    const result = gateCheckResult(before.outcome, after.outcome);
    return {
      id: check.id,
      before: before.outcome,
      after: after.outcome,
      result,
      detail: boundDetail(`${result}: before ${before.outcome} (${half(before.detail)}); after ${after.outcome} (${half(after.detail)})`),
    };
  });

  const exit = resolveSource(ctx, `steps[${gate.patchStep}].exit_code`);
  const patchExitCode = exit.found && typeof exit.value === 'number' ? exit.value : null;
  const sha = resolveSource(ctx, `artifacts[${JSON.stringify(gate.patch)}].sha256`);
  const patchSha256 = sha.found && typeof sha.value === 'string' ? sha.value : null;

  const problems: string[] = [];
  if (patchExitCode !== 0) {
    problems.push(`the patch step (step ${gate.patchStep}) ${patchExitCode === null ? 'did not exit on its own' : `exited ${patchExitCode}`}`);
  }
  if (patchSha256 === null) problems.push(`the patch ${gate.patch} was not collected or did not re-hash`);
  const failing = checks.filter((c) => !PASSING.has(c.result));
  if (failing.length > 0) problems.push(`${failing.length} of ${checks.length} checks do not hold after the patch: ${failing.map((c) => `${c.id} ${c.result}`).join(', ')}`);
  const passed = problems.length === 0;

  return {
    passed,
    patch_step: gate.patchStep,
    patch_exit_code: patchExitCode,
    patch: { path: gate.patch, sha256: patchSha256, rejected: !passed },
    checks,
    detail: boundDetail(
      passed
        ? `all ${checks.length} checks hold after the patch (${checks.filter((c) => c.result === 'fixed').length} fixed by it); the gate passes`
        : `the patch is rejected: ${problems.join('; ')}`,
    ),
  };
}
