import { CairnError } from '@cairn/contracts';

/**
 * RFC 8785 (JSON Canonicalization Scheme). Accepts plain JSON data only — null, booleans,
 * finite numbers, well-formed strings, arrays and plain objects — and refuses everything else
 * instead of guessing how it would serialise (`undefined`, `BigInt`, `Date`, `toJSON`, class
 * instances, non-finite numbers, lone surrogates, sparse arrays, symbol keys, cycles).
 */
export function canonicalJson(value: unknown): string {
  try {
    return fast(value, 0);
  } catch (error) {
    if (error !== REFUSED) throw error;
    // Something is not plain JSON data: the precise path finds it and names where it is.
    return serialise(value, '$', new Set());
  }
}

/** Thrown by the fast path; never escapes `canonicalJson`. */
const REFUSED = new Error('not plain JSON data'); // created once: throwing it costs no stack capture
/** Deeper than this is treated as a possible cycle and left to the precise path. */
const MAX_FAST_DEPTH = 256;

/**
 * The hot path: no path strings, no cycle set. Anything unusual throws REFUSED so the precise
 * path can reject it with its location (or, for a deep but acyclic value, accept it).
 */
function fast(value: unknown, depth: number): string {
  switch (typeof value) {
    case 'string':
      if (!value.isWellFormed()) throw REFUSED;
      return JSON.stringify(value);
    case 'number':
      if (!Number.isFinite(value)) throw REFUSED;
      return JSON.stringify(value);
    case 'boolean':
      return value ? 'true' : 'false';
    case 'object': {
      if (value === null) return 'null';
      if (depth > MAX_FAST_DEPTH) throw REFUSED;
      if (Array.isArray(value)) {
        if (Object.getPrototypeOf(value) !== Array.prototype || 'toJSON' in value) throw REFUSED;
        let out = '[';
        for (let i = 0; i < value.length; i++) {
          if (!(i in value)) throw REFUSED;
          out += (i === 0 ? '' : ',') + fast(value[i], depth + 1);
        }
        return `${out}]`;
      }
      const proto: unknown = Object.getPrototypeOf(value);
      if ((proto !== Object.prototype && proto !== null) || 'toJSON' in value) throw REFUSED;
      if (Object.getOwnPropertySymbols(value).length > 0) throw REFUSED;
      const record = value as Record<string, unknown>;
      const keys = Object.keys(record).sort();
      let out = '{';
      for (let i = 0; i < keys.length; i++) {
        const key = keys[i]!;
        if (!key.isWellFormed()) throw REFUSED;
        out += `${i === 0 ? '' : ','}${JSON.stringify(key)}:${fast(record[key], depth + 1)}`;
      }
      return `${out}}`;
    }
    default:
      throw REFUSED;
  }
}

export class CanonicalJsonError extends CairnError {
  readonly path: string;
  constructor(path: string, problem: string) {
    super('E_INPUT', `not canonicalisable JSON at ${path}: ${problem}`, { path });
    this.name = 'CanonicalJsonError';
    this.path = path;
  }
}

function serialise(value: unknown, path: string, ancestors: Set<object>): string {
  switch (typeof value) {
    case 'string':
      return serialiseString(value, path);
    case 'number':
      if (!Number.isFinite(value)) throw new CanonicalJsonError(path, `non-finite number ${String(value)}`);
      // ECMAScript's Number-to-String is exactly RFC 8785's number form; -0 becomes "0".
      return JSON.stringify(value);
    case 'boolean':
      return value ? 'true' : 'false';
    case 'object':
      if (value === null) return 'null';
      return serialiseContainer(value, path, ancestors);
    case 'undefined':
      throw new CanonicalJsonError(path, 'undefined is not JSON');
    case 'bigint':
      throw new CanonicalJsonError(path, 'BigInt is not JSON');
    case 'function':
      throw new CanonicalJsonError(path, 'a function is not JSON');
    case 'symbol':
      throw new CanonicalJsonError(path, 'a symbol is not JSON');
  }
}

function serialiseString(value: string, path: string): string {
  if (!value.isWellFormed()) throw new CanonicalJsonError(path, 'string contains a lone surrogate');
  // JSON.stringify escapes exactly what RFC 8785 requires for well-formed strings.
  return JSON.stringify(value);
}

function serialiseContainer(value: object, path: string, ancestors: Set<object>): string {
  if (ancestors.has(value)) throw new CanonicalJsonError(path, 'cycle');
  if ('toJSON' in value) throw new CanonicalJsonError(path, 'objects with toJSON are not plain data');
  if (Object.getOwnPropertySymbols(value).length > 0) throw new CanonicalJsonError(path, 'symbol keys are not JSON');
  ancestors.add(value);
  try {
    if (Array.isArray(value)) {
      if (Object.getPrototypeOf(value) !== Array.prototype) throw new CanonicalJsonError(path, 'array subclass');
      const parts: string[] = [];
      for (let i = 0; i < value.length; i++) {
        if (!Object.hasOwn(value, i)) throw new CanonicalJsonError(`${path}[${i}]`, 'sparse array');
        parts.push(serialise(value[i], `${path}[${i}]`, ancestors));
      }
      return `[${parts.join(',')}]`;
    }
    const proto: unknown = Object.getPrototypeOf(value);
    if (proto !== Object.prototype && proto !== null) {
      const name = (value.constructor as { name?: unknown } | undefined)?.name;
      throw new CanonicalJsonError(path, `${typeof name === 'string' ? name : 'class'} instance is not plain data`);
    }
    // Default sort compares UTF-16 code units, which is RFC 8785's key order.
    const keys = Object.keys(value).sort();
    const record = value as Record<string, unknown>;
    const parts: string[] = [];
    for (const key of keys) {
      const childPath = `${path}.${key}`;
      parts.push(`${serialiseString(key, childPath)}:${serialise(record[key], childPath, ancestors)}`);
    }
    return `{${parts.join(',')}}`;
  } finally {
    ancestors.delete(value);
  }
}
