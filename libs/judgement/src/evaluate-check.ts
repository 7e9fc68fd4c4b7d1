import { evaluateOp } from './apply-op.js';
import type { JudgementContext } from './judgement-context.js';
import { boundDetail } from './judgement-context.js';
import { resolveSource } from './resolve-source.js';

/** A check as the verifier and grader read it; the RunSpec's `Check`/`ClaimCheck` fit. */
export interface CheckInput {
  id: string;
  source: string;
  op: string;
  value?: unknown;
}

/**
 * The contracts' vocabulary (`CheckOutcomeSchema`): `holds`; `contradicted` (the op fails);
 * `unresolved` (the source is missing, invalid or unreadable, or the op could not be evaluated).
 */
export type CheckOutcome = 'holds' | 'contradicted' | 'unresolved';

export interface CheckEvaluation {
  id: string;
  outcome: CheckOutcome;
  /** What was found and why, for people: at most 1024 characters, no NUL. */
  detail: string;
}

/**
 * Resolves the check's source and applies its op. A source that resolves to nothing leaves the
 * check unresolved — except for `exists`, where a well-formed source naming nothing that exists
 * (a file not collected, a key not present) is a plain `contradicted`.
 */
export function evaluateCheck(check: CheckInput, ctx: JudgementContext): CheckEvaluation {
  const resolved = resolveSource(ctx, check.source);
  const expected = check.value === undefined ? '' : ` ${preview(check.value)}`;
  const asked = `${check.source} ${check.op}${expected}`;
  if (!resolved.found) {
    if (check.op === 'exists' && resolved.kind === 'absent' && check.value === undefined) {
      return done(check.id, 'contradicted', `${asked}: does not exist (${resolved.reason})`);
    }
    const why = resolved.kind === 'invalid' ? 'invalid source' : resolved.kind === 'absent' ? 'source missing' : 'source unreadable';
    return done(check.id, 'unresolved', `${asked}: ${why}: ${resolved.reason}`);
  }
  const result = evaluateOp(check.op, resolved.value, check.value);
  const found = `${asked}: found ${preview(resolved.value)}`;
  switch (result.outcome) {
    case 'holds':
      return done(check.id, 'holds', `${found}; ${result.reason}`);
    case 'fails':
      return done(check.id, 'contradicted', `${found}; ${result.reason}`);
    case 'unreadable':
      return done(check.id, 'unresolved', `${found}; unreadable: ${result.reason}`);
  }
}

function done(id: string, outcome: CheckOutcome, detail: string): CheckEvaluation {
  return { id, outcome, detail: boundDetail(detail) };
}

const PREVIEW = 80;

/** A short, escaped rendering of a value: output may hold anything, a detail holds 1024 characters. */
function preview(value: unknown): string {
  if (value instanceof Uint8Array) {
    return `${value.byteLength} bytes`;
  }
  if (typeof value === 'string') {
    const shown = JSON.stringify(value.length > PREVIEW ? `${value.slice(0, PREVIEW).toWellFormed()}…` : value);
    return value.length > PREVIEW ? `${shown} (${value.length} characters)` : shown;
  }
  if (Array.isArray(value)) return `an array of ${value.length}`;
  if (typeof value === 'object' && value !== null) return 'an object';
  if (value === undefined) return 'nothing';
  return typeof value === 'number' || typeof value === 'boolean' || value === null ? String(value) : typeof value;
}
