import { describe, expect, it } from 'vitest';
import { canonicalJson, CanonicalJsonError } from './canonical-json.js';

function fromIeee(hex: string): number {
  const view = new DataView(new ArrayBuffer(8));
  view.setBigUint64(0, BigInt(`0x${hex}`));
  return view.getFloat64(0);
}

describe('canonicalJson (RFC 8785)', () => {
  it('serialises the RFC 8785 §3.2.2 example exactly', () => {
    const input = JSON.parse(
      '{"numbers":[333333333.33333329,1E30,4.50,2e-3,0.000000000000000000000000001],' +
        '"string":"\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/","literals":[null,true,false]}',
    ) as unknown;
    expect(canonicalJson(input)).toBe(
      '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}',
    );
  });

  it('orders keys by UTF-16 code units (RFC 8785 §3.2.3): the emoji sorts before U+FB33', () => {
    const input = {
      '\u20ac': 'Euro Sign',
      '\r': 'Carriage Return',
      '\ufb33': 'Hebrew Letter Dalet With Dagesh',
      '1': 'One',
      '\ud83d\ude00': 'Emoji: Grinning Face',
      '\u0080': 'Control',
      '\u00f6': 'Latin Small Letter O With Diaeresis',
    };
    const keys = Object.keys(JSON.parse(canonicalJson(input)) as object);
    // JSON.parse keeps insertion order except for integer-like keys, so compare the text.
    const text = canonicalJson(input);
    const order = ['\\r', '1', '\u0080', '\u00f6', '\u20ac', '\ud83d\ude00', '\ufb33'].map((k) => text.indexOf(`"${k}"`));
    expect(order.every((pos, i) => pos >= 0 && (i === 0 || pos > order[i - 1]!))).toBe(true);
    expect(keys).toHaveLength(7);
  });

  it.each([
    ['0000000000000000', '0'],
    ['8000000000000000', '0'],
    ['0000000000000001', '5e-324'],
    ['8000000000000001', '-5e-324'],
    ['7fefffffffffffff', '1.7976931348623157e+308'],
    ['ffefffffffffffff', '-1.7976931348623157e+308'],
    ['4340000000000000', '9007199254740992'],
    ['c340000000000000', '-9007199254740992'],
    ['4430000000000000', '295147905179352830000'],
    ['44b52d02c7e14af5', '9.999999999999997e+22'],
    ['44b52d02c7e14af6', '1e+23'],
    ['44b52d02c7e14af7', '1.0000000000000001e+23'],
    ['444b1ae4d6e2ef4e', '999999999999999700000'],
    ['444b1ae4d6e2ef4f', '999999999999999900000'],
    ['444b1ae4d6e2ef50', '1e+21'],
    ['3eb0c6f7a0b5ed8c', '9.999999999999997e-7'],
    ['3eb0c6f7a0b5ed8d', '0.000001'],
    ['41b3de4355555553', '333333333.3333332'],
    ['41b3de4355555554', '333333333.33333325'],
    ['41b3de4355555555', '333333333.3333333'],
    ['41b3de4355555556', '333333333.3333334'],
    ['41b3de4355555557', '333333333.33333343'],
    ['becbf647612f3696', '-0.0000033333333333333333'],
    ['43143ff3c1cb0959', '1424953923781206.2'],
  ])('serialises the IEEE 754 value %s as %s (RFC 8785 Appendix B)', (hex, expected) => {
    expect(canonicalJson(fromIeee(hex))).toBe(expected);
  });

  it('writes 1e-7 and -0 in their canonical forms', () => {
    expect(canonicalJson(1e-7)).toBe('1e-7');
    expect(canonicalJson(-0)).toBe('0');
    expect(canonicalJson({ a: -0 })).toBe('{"a":0}');
  });

  it('emits no whitespace and sorts nested objects', () => {
    expect(canonicalJson({ b: [1, { z: 1, a: [true, null] }], a: 'x' })).toBe('{"a":"x","b":[1,{"a":[true,null],"z":1}]}');
  });

  it('accepts a deep value that is not a cycle', () => {
    let deep: unknown = 'leaf';
    for (let i = 0; i < 400; i++) deep = { d: deep };
    const text = canonicalJson(deep);
    expect(text.startsWith('{"d":{"d":')).toBe(true);
    expect(text.endsWith(`"leaf"${'}'.repeat(400)}`)).toBe(true);
  });

  it('accepts objects without a prototype', () => {
    const bare = Object.create(null) as Record<string, unknown>;
    bare.k = 1;
    expect(canonicalJson(bare)).toBe('{"k":1}');
  });

  class Point {
    constructor(public x = 1) {}
  }
  const cyclic: Record<string, unknown> = {};
  cyclic.self = cyclic;
  const sparse: unknown[] = new Array<unknown>(3);
  sparse[0] = 1;
  sparse[2] = 3;

  it.each<[string, unknown, string]>([
    ['NaN', NaN, '$'],
    ['Infinity', { a: Infinity }, '$.a'],
    ['-Infinity', [-Infinity], '$[0]'],
    ['a lone high surrogate', 'a\ud800b', '$'],
    ['a lone low surrogate in a key', { '\udc00': 1 }, '$.\udc00'],
    ['undefined', { a: undefined }, '$.a'],
    ['undefined in an array', [undefined], '$[0]'],
    ['a BigInt', { n: 10n }, '$.n'],
    ['a Date', { d: new Date(0) }, '$.d'],
    ['a toJSON object', { t: { toJSON: () => 1 } }, '$.t'],
    ['a class instance', { p: new Point() }, '$.p'],
    ['a Map', new Map(), '$'],
    ['a function', { f: () => 1 }, '$.f'],
    ['a symbol', Symbol('s'), '$'],
    ['a symbol key', { [Symbol('k')]: 1 }, '$'],
    ['a cycle', cyclic, '$.self'],
    ['a sparse array', sparse, '$[1]'],
    ['a typed array', new Uint8Array(2), '$'],
  ])('refuses %s', (_label, value, path) => {
    let thrown: unknown;
    try {
      canonicalJson(value);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(CanonicalJsonError);
    expect((thrown as CanonicalJsonError).code).toBe('E_INPUT');
    expect((thrown as CanonicalJsonError).path).toBe(path);
  });
});
