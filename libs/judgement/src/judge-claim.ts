import type { Verdict } from '@cairn/contracts';
import type { CheckEvaluation, CheckInput } from './evaluate-check.js';
import { evaluateCheck } from './evaluate-check.js';
import type { JudgementContext } from './judgement-context.js';

export interface ClaimJudgement {
  verdict: Verdict;
  /** One per check, in the claim's order; fits `verification.completed`'s `checks`. */
  checks: CheckEvaluation[];
}

/**
 * The verifier's verdict on a claim (PRODUCT.md "Checks, sources and claims"):
 * - `REJECTED` when any check is contradicted — a refutation stands even if other checks could
 *   not be read;
 * - else `INCONCLUSIVE` when any check is unresolved (its source missing, invalid or unreadable);
 * - else `SUPPORTS` (every check holds).
 * A claim with no checks asserts nothing that could be checked: `INCONCLUSIVE`.
 */
export function judgeClaim(checks: readonly CheckInput[], ctx: JudgementContext): ClaimJudgement {
  const evaluations = checks.map((check) => evaluateCheck(check, ctx));
  let verdict: Verdict;
  if (evaluations.length === 0) verdict = 'INCONCLUSIVE';
  else if (evaluations.some((e) => e.outcome === 'contradicted')) verdict = 'REJECTED';
  else if (evaluations.some((e) => e.outcome === 'unresolved')) verdict = 'INCONCLUSIVE';
  else verdict = 'SUPPORTS';
  return { verdict, checks: evaluations };
}
