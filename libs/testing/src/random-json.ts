/*
 * Seeded random JSON documents, for tests that hold two serialisers to each other (RFC 8785's
 * canonical form above all): the same seed gives the same documents on every run and machine.
 */

/** A small deterministic PRNG (mulberry32): uniform in [0, 1). */
export function seededRandom(seed: number): () => number {
  let a = seed | 0;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// Numbers where serialisers differ when they differ at all: the -0, exponent and subnormal edges.
const EDGE_NUMBERS: readonly number[] = [
  0, -0, 1, -1, 0.1, 1e21, 1e20, 999999999999999900000, 1e-6, 1e-7, 5e-324, -5e-324, Number.MIN_VALUE, Number.MAX_VALUE,
  -Number.MAX_VALUE, Number.MAX_SAFE_INTEGER, Number.MIN_SAFE_INTEGER, 2 ** 53, 2 ** 53 + 2, 2 ** 64, 1e300, Number('333333333.33333329'),
  4.5, 2e-3, 1e-27, 1.7976931348623157e308, 2.2250738585072014e-308, 2.225073858507201e-308,
];

// Text where escaping and key order differ: controls, quote, backslash, DEL, C1, U+2028/U+2029, BOM,
// the BMP's top, a U+FB33 that sorts after an astral character, and astral characters (surrogate pairs).
const CHARACTERS: readonly string[] = [
  'a', 'Z', '0', ' ', '"', '\\', '/', '\b', '\f', '\n', '\r', '\t', '\u0000', '\u0001', '\u001f', '\u007f', '\u0080', '\u009f',
  '\u00e9', '\u00f6', '\u20ac', '\u2028', '\u2029', '\ufeff', '\ufb33', '\uffff', '\ud83d\ude00', '\ud800\udc00', '\udbff\udfff',
  '\u{1f9ea}', '\u0301', '\u05d3',
];

const KEYS: readonly string[] = ['', 'a', 'b', 'A', '1', '10', '01', '-1', '__proto__', 'constructor', 'toString', '\u20ac', '\ud83d\ude00', '\ufb33', '\r'];

export interface RandomJsonOptions {
  /** Deepest nesting of arrays and objects. */
  maxDepth?: number;
  /** Most members of one array or object. */
  maxWidth?: number;
}

/** A generator of random plain JSON documents (no lone surrogates, no non-finite numbers, no undefined). */
export function randomJson(seed: number, options: RandomJsonOptions = {}): () => unknown {
  const random = seededRandom(seed);
  const maxDepth = options.maxDepth ?? 5;
  const maxWidth = options.maxWidth ?? 6;
  const int = (below: number) => Math.floor(random() * below);
  const pick = <T>(items: readonly T[]): T => items[int(items.length)]!;
  const bits = new DataView(new ArrayBuffer(8));

  const number = (): number => {
    switch (int(6)) {
      case 0:
        return pick(EDGE_NUMBERS);
      case 1: {
        // Any finite double, from its bit pattern: subnormals, huge and tiny exponents alike.
        let value: number;
        do {
          bits.setUint32(0, int(2 ** 32));
          bits.setUint32(4, int(2 ** 32));
          value = bits.getFloat64(0);
        } while (!Number.isFinite(value));
        return value;
      }
      case 2: {
        // A long integer literal as a parser reads it: past 2^53 it rounds.
        const digits = 1 + int(30);
        return (random() < 0.5 ? -1 : 1) * Number(`${1 + int(9)}${Array.from({ length: digits }, () => int(10)).join('')}`);
      }
      case 3:
        // A decimal literal with an exponent, as another producer might write it (at most ~1e308: finite).
        return Number(`${int(1000)}.${int(1_000_000)}e${int(646) - 340}`);
      case 4:
        return int(2 ** 31) - 2 ** 30;
      default:
        return (random() - 0.5) * 10 ** (int(40) - 20);
    }
  };

  const string = (): string => {
    const length = int(12);
    let out = '';
    for (let k = 0; k < length; k++) out += random() < 0.5 ? String.fromCharCode(0x20 + int(0x5f)) : pick(CHARACTERS);
    return out;
  };

  const value = (depth: number): unknown => {
    // A document is an array or an object; below it, anything (and only scalars at the deepest level).
    const kind = depth === 0 ? 5 + int(2) : depth >= maxDepth ? int(5) : int(7);
    switch (kind) {
      case 0:
        return null;
      case 1:
        return random() < 0.5;
      case 2:
      case 3:
        return number();
      case 4:
        return string();
      case 5:
        return Array.from({ length: int(maxWidth + 1) }, () => value(depth + 1));
      default: {
        const entries: [string, unknown][] = [];
        for (let k = int(maxWidth + 1); k > 0; k--) entries.push([random() < 0.4 ? pick(KEYS) : string(), value(depth + 1)]);
        // fromEntries defines own properties, so even "__proto__" is a plain key here.
        return Object.fromEntries(entries);
      }
    }
  };

  return () => value(0);
}
