/*
 * RFC 8785 (JSON Canonicalization Scheme) in the browser, written for the page rather than
 * imported from the server's code: the chain badge must not take the server's word for anything,
 * including how it canonicalises. It accepts what JSON.parse produces — null, booleans, finite
 * numbers, well-formed strings, arrays and plain objects — and refuses anything else.
 * The unit tests hold it to libs/evidence on the same values.
 */

export class CanonicalJsonError extends Error {
  constructor(
    readonly path: string,
    problem: string,
  ) {
    super(`not canonicalisable JSON at ${path}: ${problem}`);
    this.name = 'CanonicalJsonError';
  }
}

export function canonicalJson(value: unknown): string {
  return serialise(value, '$', new Set());
}

function serialiseString(value: string, path: string): string {
  if (!value.isWellFormed()) throw new CanonicalJsonError(path, 'string contains a lone surrogate');
  // For well-formed strings JSON.stringify escapes exactly what RFC 8785 §3.2.2.2 requires.
  return JSON.stringify(value);
}

function serialise(value: unknown, path: string, ancestors: Set<object>): string {
  switch (typeof value) {
    case 'string':
      return serialiseString(value, path);
    case 'number':
      if (!Number.isFinite(value)) throw new CanonicalJsonError(path, `non-finite number ${String(value)}`);
      // ECMAScript's Number::toString is RFC 8785 §3.2.2.3's number form (and -0 becomes "0").
      return JSON.stringify(value);
    case 'boolean':
      return value ? 'true' : 'false';
    case 'object':
      return value === null ? 'null' : serialiseContainer(value, path, ancestors);
    default:
      throw new CanonicalJsonError(path, `${typeof value} is not JSON`);
  }
}

function serialiseContainer(value: object, path: string, ancestors: Set<object>): string {
  if (ancestors.has(value)) throw new CanonicalJsonError(path, 'cycle');
  if ('toJSON' in value) throw new CanonicalJsonError(path, 'objects with toJSON are not plain data');
  ancestors.add(value);
  try {
    if (Array.isArray(value)) {
      const parts: string[] = [];
      for (let i = 0; i < value.length; i++) {
        if (!Object.hasOwn(value, i)) throw new CanonicalJsonError(`${path}[${i}]`, 'sparse array');
        parts.push(serialise(value[i], `${path}[${i}]`, ancestors));
      }
      return `[${parts.join(',')}]`;
    }
    const proto: unknown = Object.getPrototypeOf(value);
    if (proto !== Object.prototype && proto !== null) throw new CanonicalJsonError(path, 'not a plain object');
    const record = value as Record<string, unknown>;
    // Array.prototype.sort without a comparator orders by UTF-16 code units: RFC 8785 §3.2.3.
    const keys = Object.keys(record).sort();
    const parts = keys.map((key) => `${serialiseString(key, `${path}.${key}`)}:${serialise(record[key], `${path}.${key}`, ancestors)}`);
    return `{${parts.join(',')}}`;
  } finally {
    ancestors.delete(value);
  }
}
