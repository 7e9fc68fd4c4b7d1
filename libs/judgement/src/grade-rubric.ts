import type { CheckInput, CheckOutcome } from './evaluate-check.js';
import { evaluateCheck } from './evaluate-check.js';
import type { JudgementContext } from './judgement-context.js';
import { boundDetail } from './judgement-context.js';
import type { JudgementOutcome } from './judge.js';
import { resolveSource } from './resolve-source.js';

export interface RubricCheck extends CheckInput {
  kind?: 'check';
  weight: number;
}

/** Earns weight × the number its first resolving source holds, in [0, 1] (a Harbor reward). */
export interface RubricReward {
  id: string;
  kind: 'reward';
  sources: readonly string[];
  weight: number;
}

/** Earns weight × score / scale, the score a judge gave it (docs/adr/0030). */
export interface RubricJudge {
  id: string;
  kind: 'judge';
  criterion: string;
  source: string;
  scale?: number | undefined;
  weight: number;
}

export type RubricCriterion = RubricCheck | RubricReward | RubricJudge;

export interface CriterionGrade {
  id: string;
  kind: 'check' | 'reward' | 'judge';
  /** The weight as counted (quantised to 1e-6; an invalid weight counts 0). */
  weight: number;
  /** `weight` when the check holds, else 0; a reward's fraction of it. */
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
export function gradeRubric(checks: readonly RubricCriterion[], ctx: JudgementContext, judgements: ReadonlyMap<string, JudgementOutcome> = new Map()): RubricGrade {
  let score = 0;
  let max = 0;
  let unscored = 0;
  const criteria = checks.map((check): CriterionGrade => {
    const valid = typeof check.weight === 'number' && check.weight >= 0 && check.weight <= MAX_WEIGHT;
    const units = valid ? Math.round(check.weight * UNITS) : 0;
    const evaluation =
      check.kind === 'reward' ? evaluateReward(check, ctx, units) : check.kind === 'judge' ? evaluateJudge(check, judgements.get(check.id), units) : evaluateRubricCheck(check, ctx, units);
    max += units;
    score += evaluation.earned;
    if (!evaluation.scored) unscored += units;
    const detail = valid ? evaluation.detail : boundDetail(`weight ${String(check.weight)} is not a number in [0, 1000000], counted as 0; ${evaluation.detail}`);
    const kind = check.kind === 'reward' || check.kind === 'judge' ? check.kind : 'check';
    return { id: check.id, kind, weight: units / UNITS, earned: evaluation.earned / UNITS, outcome: evaluation.outcome, scored: evaluation.scored, detail };
  });
  return { score: score / UNITS, maxScore: max / UNITS, upperBound: (score + unscored) / UNITS, criteria };
}

interface Scored {
  outcome: CheckOutcome;
  scored: boolean;
  /** In millionths. */
  earned: number;
  detail: string;
}

function evaluateRubricCheck(check: RubricCheck, ctx: JudgementContext, units: number): Scored {
  const evaluation = evaluateCheck(check, ctx);
  return { outcome: evaluation.outcome, scored: evaluation.outcome !== 'unresolved', earned: evaluation.outcome === 'holds' ? units : 0, detail: evaluation.detail };
}

const DECIMAL = /^[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$/;

/** A reward as a number: a JSON number, or text (a file's bytes) holding one decimal number. */
function rewardValue(value: unknown): number | null {
  if (typeof value === 'number') return Number.isFinite(value) ? value : null;
  const text = value instanceof Uint8Array ? new TextDecoder('utf-8', { fatal: false }).decode(value) : typeof value === 'string' ? value : null;
  if (text === null || text.length > 64) return null;
  const trimmed = text.trim();
  return DECIMAL.test(trimmed) ? Number(trimmed) : null;
}

/**
 * The first source that resolves gives the reward; it must be a number in [0, 1]. Missing
 * everywhere, not a number, or out of range: unscored (it raises `upperBound`), never a silent 0.
 */
function evaluateReward(reward: RubricReward, ctx: JudgementContext, units: number): Scored {
  const misses: string[] = [];
  for (const source of reward.sources) {
    const resolved = resolveSource(ctx, source);
    if (!resolved.found) {
      misses.push(`${source}: ${resolved.reason}`);
      continue;
    }
    const value = rewardValue(resolved.value);
    if (value === null || value < 0 || value > 1) {
      return { outcome: 'unresolved', scored: false, earned: 0, detail: boundDetail(`reward ${source}: not a number in [0, 1]`) };
    }
    const earned = Math.round(units * value);
    return { outcome: value === 1 ? 'holds' : 'contradicted', scored: true, earned, detail: boundDetail(`reward ${source}: ${value}`) };
  }
  return { outcome: 'unresolved', scored: false, earned: 0, detail: boundDetail(`no reward: ${misses.join('; ')}`) };
}

/**
 * A judge's score, `weight × score / scale`, from the judgement recorded for it; none, or a failed
 * one, leaves it unscored (the grader records `grade.failed` rather than such a grade).
 */
function evaluateJudge(judge: RubricJudge, judgement: JudgementOutcome | undefined, units: number): Scored {
  if (judgement === undefined) return { outcome: 'unresolved', scored: false, earned: 0, detail: 'no judgement recorded' };
  if (judgement.kind === 'failed') return { outcome: 'unresolved', scored: false, earned: 0, detail: boundDetail(`judge failed (${judgement.cause}): ${judgement.reason}`) };
  const earned = Math.round((units * judgement.score) / judgement.scale);
  return {
    outcome: judgement.score === judgement.scale ? 'holds' : 'contradicted',
    scored: true,
    earned,
    detail: boundDetail(`judge: ${judgement.score}/${judgement.scale}: ${judgement.reason}`),
  };
}

/** The grade as `grade.recorded` carries it (snake_case; criteria without `outcome`). */
export function gradeRecordedFields(grade: RubricGrade): {
  score: number;
  max_score: number;
  upper_bound: number;
  criteria: { id: string; kind: 'check' | 'reward' | 'judge'; weight: number; earned: number; scored: boolean; detail: string }[];
} {
  return {
    score: grade.score,
    max_score: grade.maxScore,
    upper_bound: grade.upperBound,
    criteria: grade.criteria.map(({ id, kind, weight, earned, scored, detail }) => ({ id, kind, weight, earned, scored, detail })),
  };
}
