import * as evidence from '@cairn/evidence';
import { randomJson, seededRandom } from '@cairn/testing';
import canonicalize from 'canonicalize';
import { describe, expect, it } from 'vitest';
import { canonicalJson } from './canonical-json.js';

/*
 * Cairn keeps two RFC 8785 serialisers of its own — the server's (libs/evidence, every receipt
 * hash) and the page's (the dashboard's chain badge, no dependencies) — and holds both to
 * `canonicalize`, the RFC's reference implementation for JavaScript, on the RFC's vectors and on
 * 100,000 seeded random documents (ADR 0016).
 */

const IMPLEMENTATIONS = { page: canonicalJson, server: evidence.canonicalJson, reference: canonicalize } as const;

function expectAgreement(value: unknown, label: string): string {
  const reference = canonicalize(value);
  expect(reference, `${label}: the reference serialises it`).toBeTypeOf('string');
  expect(evidence.canonicalJson(value), `${label}: libs/evidence`).toBe(reference);
  expect(canonicalJson(value), `${label}: the page`).toBe(reference);
  return reference!;
}

function fromIeee(hex: string): number {
  const view = new DataView(new ArrayBuffer(8));
  view.setBigUint64(0, BigInt(`0x${hex}`));
  return view.getFloat64(0);
}

describe('RFC 8785 vectors: libs/evidence, the page and canonicalize agree', () => {
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
  ])('Appendix B: the double %s is %s', (hex, expected) => {
    expect(expectAgreement(fromIeee(hex), hex)).toBe(expected);
    expect(expectAgreement([fromIeee(hex)], hex)).toBe(`[${expected}]`);
  });

  it('§3.2.2: the example serialises to the RFC text', () => {
    const input = JSON.parse(
      '{"numbers":[333333333.33333329,1E30,4.50,2e-3,0.000000000000000000000000001],' +
        '"string":"\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/","literals":[null,true,false]}',
    ) as unknown;
    expect(expectAgreement(input, '§3.2.2')).toBe(
      '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}',
    );
  });

  it('§3.2.3: keys sort by UTF-16 code units, so the emoji precedes U+FB33', () => {
    const input = JSON.parse(
      '{"\\u20ac":"Euro Sign","\\r":"Carriage Return","\\ufb33":"Hebrew Letter Dalet With Dagesh","1":"One",' +
        '"\\ud83d\\ude00":"Emoji: Grinning Face","\\u0080":"Control","\\u00f6":"Latin Small Letter O With Diaeresis"}',
    ) as unknown;
    expect(expectAgreement(input, '§3.2.3')).toBe(
      '{"\\r":"Carriage Return","1":"One","\u0080":"Control","ö":"Latin Small Letter O With Diaeresis","€":"Euro Sign",' +
        '"😀":"Emoji: Grinning Face","\ufb33":"Hebrew Letter Dalet With Dagesh"}',
    );
  });

  it('escapes only what the RFC says: U+2028, U+2029, DEL and C1 stay raw, C0 controls are escaped', () => {
    expect(expectAgreement('\u2028\u2029\u007f\u0080\u001f\b\f\n\r\t', 'escapes')).toBe('"\u2028\u2029\u007f\u0080\\u001f\\b\\f\\n\\r\\t"');
  });
});

describe('100,000 random documents: libs/evidence, the page and canonicalize agree byte for byte', () => {
  it('serialises every document alike (seeded: nested containers, awkward text and keys, edge numbers)', () => {
    const next = randomJson(8785);
    let bytes = 0;
    for (let k = 0; k < 100_000; k++) {
      const document = next();
      const reference = canonicalize(document);
      // Compared without expect() per document: 100,000 assertions cost more than the serialising.
      const server = evidence.canonicalJson(document);
      const page = canonicalJson(document);
      if (server !== reference || page !== reference) {
        expect(server, `libs/evidence on document ${k}: ${reference}`).toBe(reference);
        expect(page, `the page on document ${k}: ${reference}`).toBe(reference);
      }
      bytes += reference!.length;
    }
    // The documents are not trivially small: over 100 characters each on average.
    expect(bytes).toBeGreaterThan(10_000_000);
    // A few seconds on an idle machine; generous for two shared cores.
  }, 180_000);

  it('refuses a lone surrogate anywhere, as the reference does (RFC 8785 §3.2.2.2)', () => {
    const next = randomJson(2028, { maxDepth: 3 });
    const random = seededRandom(2029);
    for (let k = 0; k < 2_000; k++) {
      const lone = random() < 0.5 ? '\ud800' : '\udfff';
      const document = random() < 0.5 ? { [`k${lone}`]: next() } : [next(), { v: `x${lone}y` }];
      for (const [name, serialise] of Object.entries(IMPLEMENTATIONS)) expect(() => serialise(document), `${name}, document ${k}`).toThrow();
    }
  });
});
