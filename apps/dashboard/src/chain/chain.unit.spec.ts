import { webcrypto } from 'node:crypto';
import * as evidence from '@cairn/evidence';
import { awkwardName, awkwardText, foreignJson } from '@cairn/testing';
import { describe, expect, it } from 'vitest';
import { canonicalJson, CanonicalJsonError } from './canonical-json.js';
import { GENESIS_HASH, sha256Hex, verifyChain } from './verify-chain.js';

/*
 * The page's own JCS and chain check, held to the server's (libs/evidence) on the same values and
 * the same receipts: both must agree on every byte and every break.
 */

function fromIeee(hex: string): number {
  const view = new DataView(new ArrayBuffer(8));
  view.setBigUint64(0, BigInt(`0x${hex}`));
  return view.getFloat64(0);
}

// RFC 8785 Appendix B's IEEE 754 vectors and the §3.2.2 example's inputs.
const NUMBER_VECTORS = [
  '0000000000000000', '8000000000000000', '0000000000000001', '8000000000000001', '7fefffffffffffff', 'ffefffffffffffff',
  '4340000000000000', 'c340000000000000', '4430000000000000', '44b52d02c7e14af5', '44b52d02c7e14af6', '44b52d02c7e14af7',
  '444b1ae4d6e2ef4e', '444b1ae4d6e2ef4f', '444b1ae4d6e2ef50', '3eb0c6f7a0b5ed8c', '3eb0c6f7a0b5ed8d', '41b3de4355555553',
  '41b3de4355555554', '41b3de4355555555', '41b3de4355555556', 'becbf647612f3696', '43143ff3c1cb0959',
].map(fromIeee);

const VALUES: unknown[] = [
  null,
  true,
  'plain',
  '€$\u000f\nA\'B"\\\\"/',
  '\u2028\u2029\u007f\u0000 emoji 😀',
  NUMBER_VECTORS,
  // Parsed from text as the receipts are: some of these literals have more digits than a double keeps.
  JSON.parse('[333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001, -0, 1, -1.5]'),
  { '\u20ac': 1, '\r': 2, '\ufb33': 3, '1': 4, '\ud83d\ude00': 5, '\u0080': 6, '\u00f6': 7, b: { z: [], a: {} }, a: [null, false] },
  { v: 1, seq: 3, run_id: 'run_x', argv: ['sh', '-c', 'echo "hi" > /out/a'], limits: { memory: 1.5e9 }, nested: [[[{ k: 'v' }]]] },
];

describe('canonicalJson in the page (RFC 8785)', () => {
  it.each(VALUES.map((value, i) => [i, value] as const))('value %i serialises byte for byte as libs/evidence does', (_i, value) => {
    expect(canonicalJson(value)).toBe(evidence.canonicalJson(value));
  });

  it("serialises RFC 8785 §3.2.2's example exactly", () => {
    const input = JSON.parse(
      '{"numbers":[333333333.33333329,1E30,4.50,2e-3,0.000000000000000000000000001],' +
        '"string":"\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/","literals":[null,true,false]}',
    ) as unknown;
    expect(canonicalJson(input)).toBe('{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}');
  });

  it.each([
    ['a lone surrogate', { a: '\ud800' }, '$.a'],
    ['a lone surrogate key', { '\udc00': 1 }, '$.\udc00'],
    ['NaN', [1, Number.NaN], '$[1]'],
    ['Infinity', { n: Number.POSITIVE_INFINITY }, '$.n'],
    ['undefined', { u: undefined }, '$.u'],
    ['a Date', { d: new Date(0) }, '$.d'],
    ['a class instance', { m: new Map() }, '$.m'],
    ['a sparse array', [1, , 3], '$[1]'], // eslint-disable-line no-sparse-arrays
  ])('refuses %s, naming where', (_what, value, path) => {
    expect(() => canonicalJson(value)).toThrow(CanonicalJsonError);
    try {
      canonicalJson(value);
    } catch (error) {
      expect((error as CanonicalJsonError).path).toBe(path);
    }
    expect(() => evidence.canonicalJson(value)).toThrow();
  });
});

/** A chain sealed by the server's code: a run's receipts as the gateway serves them. */
function sealedChain(runId: string): Record<string, unknown>[] {
  const bodies = [
    { type: 'run.submitted', actor: 'key:abc', spec: { name: 'café ☕', steps: [{ argv: ['sh', '-c', 'echo "€"'] }], caps: { cpus: 0.5, memoryMiB: 64 } } },
    { type: 'policy.decided', actor: 'policy', decision: 'allow', policy_version: 'a'.repeat(64), reasons: [] },
    { type: 'step.completed', actor: 'runtime', argv: ['sh', '-c', 'exit 3'], exit_code: 3, duration_ms: 1234, limits_hit: ['memory'], ratio: 1e-7 },
    { type: 'run.sealed', actor: 'kernel', final_state: 'SEALED' },
  ];
  const receipts: Record<string, unknown>[] = [];
  let prev = GENESIS_HASH;
  bodies.forEach((fields, i) => {
    const receipt = evidence.sealReceipt(prev, { v: 1, seq: i + 1, run_id: runId, tenant: 'default', ts: '2026-01-01T00:00:00.000Z', causation: null, ...fields });
    receipts.push(receipt);
    prev = receipt.hash;
  });
  return receipts;
}

describe('verifyChain in the page (WebCrypto SHA-256)', () => {
  it('runs on WebCrypto here as in the browser', () => {
    expect(globalThis.crypto.subtle).toBe(webcrypto.subtle);
  });

  it('hashes as libs/evidence does', async () => {
    for (const text of ['', 'abc', `${GENESIS_HASH}\n{"a":"€😀"}`]) expect(await sha256Hex(text)).toBe(evidence.sha256Hex(text));
  });

  it('accepts a chain the server sealed, with the same head hash as libs/evidence', async () => {
    const receipts = sealedChain('run_ok');
    const server = evidence.verifyChain(receipts, { chainId: 'run_ok' });
    const page = await verifyChain(JSON.parse(JSON.stringify(receipts)) as unknown[], 'run_ok');
    expect(server.ok).toBe(true);
    expect(page).toEqual({ ok: true, count: 4, headHash: server.ok ? server.headHash : '', headSeq: 4 });
  });

  it('accepts a chain whose strings hold every control character, U+2028 and U+2029, from its raw or escaped JSON text', async () => {
    const text = awkwardText({ nul: true });
    let prev = GENESIS_HASH;
    const receipts = [
      { type: 'run.submitted', actor: 'key:abc', spec: { name: awkwardName(), steps: [{ argv: ['sh', '-c', text] }], claim: { statement: text } } },
      { type: 'step.completed', actor: 'runtime', argv: ['sh', '-c', text], artifact_hashes: { [`/out/${awkwardName()}`]: 'a'.repeat(64) } },
    ].map((fields, i) => {
      const receipt = evidence.sealReceipt(prev, { v: 1, seq: i + 1, run_id: 'run_awkward', tenant: 'default', ts: '2026-01-01T00:00:00.000Z', causation: null, ...fields });
      prev = receipt.hash;
      return receipt;
    });
    const page = { items: receipts };
    const texts = { stringify: JSON.stringify(page), escaped: evidence.jsonLine(page), foreign: foreignJson(page) };
    expect(texts.foreign).toMatch(/\u2028/);
    expect(texts.escaped).not.toMatch(/\u2028/);
    for (const [form, json] of Object.entries(texts)) {
      const check = await verifyChain((JSON.parse(json) as typeof page).items, 'run_awkward');
      expect(check, form).toEqual({ ok: true, count: 2, headHash: prev, headSeq: 2 });
    }
  });

  it.each([
    ['an exit code changed', (r: Record<string, unknown>[]) => void (r[2]!.exit_code = 0), 3, 'hash_mismatch'],
    ['a nested spec field changed', (r: Record<string, unknown>[]) => void ((r[0]!.spec as { name: string }).name = 'cafe'), 1, 'hash_mismatch'],
    ['a field added', (r: Record<string, unknown>[]) => void (r[1]!.extra = true), 2, 'hash_mismatch'],
    ['a receipt dropped', (r: Record<string, unknown>[]) => void r.splice(1, 1), 2, 'seq_out_of_order'],
    ['a hash rewritten to match', (r: Record<string, unknown>[]) => void (r[1]!.hash = 'f'.repeat(64)), 2, 'hash_mismatch'],
    ['another run spliced in', (r: Record<string, unknown>[]) => void (r[3] = sealedChain('run_other')[3]!), 4, 'chain_id_mismatch'],
  ])('breaks where libs/evidence breaks when %s', async (_what, tamper, seq, reason) => {
    const receipts = JSON.parse(JSON.stringify(sealedChain('run_ok'))) as Record<string, unknown>[];
    tamper(receipts);
    const server = evidence.verifyChain(receipts, { chainId: 'run_ok' });
    const page = await verifyChain(receipts, 'run_ok');
    expect(page).toMatchObject({ ok: false, firstBadSeq: seq, reason });
    expect(server).toMatchObject({ ok: false, firstBadSeq: seq, reason });
  });
});
