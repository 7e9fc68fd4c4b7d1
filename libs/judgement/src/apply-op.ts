import type { CheckOp } from '@cairn/contracts';
import { CHECK_OPS } from '@cairn/contracts';
import { compileSafeRegex, decodeUtf8, safeRegexTest, sha256Hex } from '@cairn/kernel';

export type OpOutcome = 'holds' | 'fails' | 'unreadable';
export type OpResult = { outcome: OpOutcome; reason: string };

const KNOWN_OPS: ReadonlySet<string> = new Set(CHECK_OPS);
const SHA256 = /^[0-9a-fA-F]{64}$/;

/**
 * Applies a registered op to a resolved value. Never throws: an unknown op, a value of the wrong
 * type (no coercion: `"0"` is not `0`), undecodable bytes, a pattern outside the safe subset or a
 * search over its step budget is `unreadable`, not `fails` — a check that cannot be evaluated
 * contradicts nothing.
 *
 * | op | actual | expected | holds when |
 * |---|---|---|---|
 * | `eq`, `ne` | any JSON value, or bytes (read as UTF-8 text) | the same type | (not) equal; arrays and objects deeply |
 * | `lt`, `lte`, `gt`, `gte` | finite number | finite number | actual < ≤ > ≥ expected |
 * | `contains`, `not_contains` | text / bytes, or an array | string (any JSON scalar for an array) | substring / element (not) present |
 * | `matches` | text / bytes | pattern (safe-regex subset of JS `u` syntax) | the pattern matches somewhere |
 * | `sha256_eq` | text (hashed as UTF-8) / bytes | 64 hex digits | sha256(actual) equals it (case-insensitive) |
 * | `exists` | any | none | actual is not null (a missing source fails `exists`; see `evaluateCheck`) |
 */
export function applyOp(op: string, actual: unknown, expected: unknown): OpOutcome {
  return evaluateOp(op, actual, expected).outcome;
}

/** `applyOp` with the reason, for a check's detail. */
export function evaluateOp(op: string, actual: unknown, expected: unknown): OpResult {
  if (typeof op !== 'string' || !KNOWN_OPS.has(op)) return unreadable(`${JSON.stringify(op)} is not a registered op`);
  const known = op as CheckOp;
  switch (known) {
    case 'eq':
    case 'ne':
      return equality(known, actual, expected);
    case 'lt':
    case 'lte':
    case 'gt':
    case 'gte':
      return ordering(known, actual, expected);
    case 'contains':
    case 'not_contains':
      return containment(known, actual, expected);
    case 'matches':
      return matching(actual, expected);
    case 'sha256_eq':
      return hashing(actual, expected);
    case 'exists':
      if (expected !== undefined) return unreadable('exists takes no value');
      return actual === null || actual === undefined ? fails('the value is null') : holds('the value exists');
  }
}

function holds(reason: string): OpResult {
  return { outcome: 'holds', reason };
}
function fails(reason: string): OpResult {
  return { outcome: 'fails', reason };
}
function unreadable(reason: string): OpResult {
  return { outcome: 'unreadable', reason };
}

type Kind = 'null' | 'boolean' | 'number' | 'string' | 'bytes' | 'array' | 'object' | 'other';

function kindOf(value: unknown): Kind {
  if (value === null) return 'null';
  if (value instanceof Uint8Array) return 'bytes';
  if (Array.isArray(value)) return 'array';
  switch (typeof value) {
    case 'boolean':
      return 'boolean';
    case 'number':
      return Number.isFinite(value) ? 'number' : 'other';
    case 'string':
      return 'string';
    case 'object':
      return 'object';
    default:
      return 'other';
  }
}

/** Text, or bytes read as exact UTF-8; anything else is not text. */
function asText(value: unknown): { ok: true; text: string } | { ok: false; reason: string } {
  if (typeof value === 'string') return { ok: true, text: value };
  if (value instanceof Uint8Array) {
    const decoded = decodeUtf8(value);
    return decoded.ok ? decoded : { ok: false, reason: `the bytes are ${decoded.reason}` };
  }
  return { ok: false, reason: `a ${kindOf(value)} is not text` };
}

function equality(op: 'eq' | 'ne', actual: unknown, expected: unknown): OpResult {
  if (expected === undefined) return unreadable(`${op} needs a value`);
  let left = actual;
  if (kindOf(actual) === 'bytes' && typeof expected === 'string') {
    const text = asText(actual);
    if (!text.ok) return unreadable(text.reason);
    left = text.text;
  }
  const leftKind = kindOf(left);
  const rightKind = kindOf(expected);
  if (leftKind === 'other' || rightKind === 'other') return unreadable('not a JSON value');
  if (leftKind !== rightKind) return unreadable(`type mismatch: the value is a ${leftKind}, the expected value a ${rightKind}`);
  const equal = jsonEqual(left, expected);
  return equal === (op === 'eq') ? holds(equal ? 'equal' : 'not equal') : fails(equal ? 'equal' : 'not equal');
}

function ordering(op: 'lt' | 'lte' | 'gt' | 'gte', actual: unknown, expected: unknown): OpResult {
  if (kindOf(expected) !== 'number') return unreadable(`${op} needs a finite number value`);
  if (kindOf(actual) !== 'number') return unreadable(`${op} compares numbers; the value is a ${kindOf(actual)}`);
  const a = actual as number;
  const e = expected as number;
  const result = op === 'lt' ? a < e : op === 'lte' ? a <= e : op === 'gt' ? a > e : a >= e;
  return result ? holds(`${a} ${op} ${e}`) : fails(`not ${a} ${op} ${e}`);
}

function containment(op: 'contains' | 'not_contains', actual: unknown, expected: unknown): OpResult {
  let present: boolean;
  if (Array.isArray(actual)) {
    if (expected === undefined || kindOf(expected) === 'other') return unreadable(`${op} needs a value`);
    present = actual.some((element: unknown) => jsonEqual(element, expected));
  } else {
    if (typeof expected !== 'string') return unreadable(`${op} needs a string value`);
    const text = asText(actual);
    if (!text.ok) return unreadable(text.reason);
    present = text.text.includes(expected);
  }
  return present === (op === 'contains') ? holds(present ? 'present' : 'absent') : fails(present ? 'present' : 'absent');
}

function matching(actual: unknown, expected: unknown): OpResult {
  if (typeof expected !== 'string') return unreadable('matches needs a pattern');
  const compiled = compileSafeRegex(expected);
  if (!compiled.ok) return unreadable(`pattern refused: ${compiled.reason}`);
  const text = asText(actual);
  if (!text.ok) return unreadable(text.reason);
  const result = safeRegexTest(compiled.regex, text.text);
  if (!result.ok) return unreadable(result.reason);
  return result.matched ? holds('the pattern matches') : fails('the pattern does not match');
}

function hashing(actual: unknown, expected: unknown): OpResult {
  if (typeof expected !== 'string' || !SHA256.test(expected)) return unreadable('sha256_eq needs 64 hex digits');
  if (typeof actual !== 'string' && !(actual instanceof Uint8Array)) return unreadable(`sha256_eq hashes text or bytes; the value is a ${kindOf(actual)}`);
  const digest = sha256Hex(actual);
  return digest === expected.toLowerCase() ? holds('the sha256 matches') : fails(`the sha256 is ${digest}`);
}

/** Structural equality of JSON values (object key order does not matter). */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a)) {
    return Array.isArray(b) && a.length === b.length && a.every((item: unknown, k) => jsonEqual(item, b[k]));
  }
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null || Array.isArray(b)) return false;
  if (a instanceof Uint8Array || b instanceof Uint8Array) {
    return a instanceof Uint8Array && b instanceof Uint8Array && a.byteLength === b.byteLength && a.every((byte, k) => byte === b[k]);
  }
  const aKeys = Object.keys(a);
  const bKeys = Object.keys(b);
  return (
    aKeys.length === bKeys.length &&
    aKeys.every((key) => Object.hasOwn(b, key) && jsonEqual((a as Record<string, unknown>)[key], (b as Record<string, unknown>)[key]))
  );
}
