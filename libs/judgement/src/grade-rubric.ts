import type { CheckInput, CheckOutcome } from './evaluate-check.js';
import { evaluateCheck } from './evaluate-check.js';
import type { JudgementContext } from './judgement-context.js';
import { boundDetail } from './judgement-context.js';

export interface RubricCheck extends CheckInput {
  weight: number;
}

export interface CriterionGrade {
  id: string;
  kind: 'check';
  /** The weight as counted (quantised to 1e-6; an invalid weight counts 0). */
  weight: number;
  /** `weight` when the check holds, else 0. */
  earned: number;
  outcome: CheckOutcome;
  /** False when the check is unresolved: it earns 0 and raises `upperBound` instead. */
  scored: boolean;
  detail: string;
}

export interface RubricGrade {
  /** Weight earned. */
  score: number;
  /** Total weight. */
  maxScore: number;
  /** score + the weight of criteria that could not be scored; score ≤ upperBound ≤ maxScore. */
  upperBound: number;
  criteria: CriterionGrade[];
}

/** Weights are counted in millionths, as integers, so sums are exact and independent of order. */
const UNITS = 1_000_000;
/** The RunSpec's largest weight; with it, 9000 criteria still sum exactly in a double. */
const MAX_WEIGHT = 1_000_000;

/**
 * Scores a rubric of deterministic checks. A holding check earns its weight; a contradicted one
 * earns 0; an unresolved one earns 0 and adds its weight to `upperBound`. Each weight is rounded to
 * the nearest millionth (`Math.round(weight × 10⁶)`) and every sum is an exact integer count of
 * millionths, so the same rubric always gives the same numbers, bit for bit. A weight that is not a
 * number in [0, 10⁶] counts 0 (the RunSpec schema admits only that range, minus 0).
 */
export function gradeRubric(checks: readonly RubricCheck[], ctx: JudgementContext): RubricGrade {
  let score = 0;
  let max = 0;
  let unscored = 0;
  const criteria = checks.map((check): CriterionGrade => {
    const valid = typeof check.weight === 'number' && check.weight >= 0 && check.weight <= MAX_WEIGHT;
    const units = valid ? Math.round(check.weight * UNITS) : 0;
    const evaluation = evaluateCheck(check, ctx);
    const scored = evaluation.outcome !== 'unresolved';
    const earned = evaluation.outcome === 'holds' ? units : 0;
    max += units;
    score += earned;
    if (!scored) unscored += units;
    const detail = valid ? evaluation.detail : boundDetail(`weight ${String(check.weight)} is not a number in [0, 1000000], counted as 0; ${evaluation.detail}`);
    return { id: check.id, kind: 'check', weight: units / UNITS, earned: earned / UNITS, outcome: evaluation.outcome, scored, detail };
  });
  return { score: score / UNITS, maxScore: max / UNITS, upperBound: (score + unscored) / UNITS, criteria };
}

/** The grade as `grade.recorded` carries it (snake_case; criteria without `outcome`). */
export function gradeRecordedFields(grade: RubricGrade): {
  score: number;
  max_score: number;
  upper_bound: number;
  criteria: { id: string; kind: 'check'; weight: number; earned: number; scored: boolean; detail: string }[];
} {
  return {
    score: grade.score,
    max_score: grade.maxScore,
    upper_bound: grade.upperBound,
    criteria: grade.criteria.map(({ id, kind, weight, earned, scored, detail }) => ({ id, kind, weight, earned, scored, detail })),
  };
}
