import { CairnError } from '@cairn/contracts';

/**
 * RFC 8785 (JSON Canonicalization Scheme). Accepts plain JSON data only — null, booleans,
 * finite numbers, well-formed strings, arrays and plain objects — and refuses everything else
 * instead of guessing how it would serialise (`undefined`, `BigInt`, `Date`, `toJSON`, class
 * instances, non-finite numbers, lone surrogates, sparse arrays, symbol keys, cycles).
 */
export function canonicalJson(value: unknown): string {
  return serialise(value, '$', new Set());
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
