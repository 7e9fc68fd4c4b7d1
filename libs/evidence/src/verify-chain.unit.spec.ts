import { GENESIS_HASH } from '@cairn/contracts';
import { describe, expect, it } from 'vitest';
import { canonicalJson } from './canonical-json.js';
import { receiptHash, sealReceipt, sha256Hex } from './receipt-hash.js';
import { ChainVerifier, verifyChain } from './verify-chain.js';

function body(seq: number, extra: Record<string, unknown> = {}) {
  return {
    v: 1,
    seq,
    run_id: 'run_abc',
    tenant: 'default',
    type: 'step.completed',
    actor: 'runtime',
    ts: '2026-11-30T00:00:00.000Z',
    causation: seq === 1 ? null : `run_abc:${seq - 1}`,
    ...extra,
  };
}

function chain(n: number) {
  const receipts: Record<string, unknown>[] = [];
  let prev = GENESIS_HASH;
  for (let seq = 1; seq <= n; seq++) {
    const r = sealReceipt(prev, body(seq, { argv: ['echo', String(seq)] }));
    receipts.push(r);
    prev = r.hash;
  }
  return receipts;
}

describe('receipt hash (I-4)', () => {
  it('is sha256 of prev_hash, a newline and the canonical body', () => {
    const b = body(1);
    const expected = sha256Hex(`${GENESIS_HASH}\n${canonicalJson(b)}`);
    expect(receiptHash(GENESIS_HASH, b)).toBe(expected);
    // Pinned so that a change to the preimage can never pass unnoticed.
    expect(receiptHash(GENESIS_HASH, { a: 1 })).toBe(sha256Hex(`${'0'.repeat(64)}\n{"a":1}`));
  });

  it('does not depend on key order', () => {
    expect(receiptHash(GENESIS_HASH, { a: 1, b: 2 })).toBe(receiptHash(GENESIS_HASH, { b: 2, a: 1 }));
  });

  it('refuses a body that already carries link fields', () => {
    expect(() => sealReceipt(GENESIS_HASH, { hash: 'x' })).toThrow(/hash/);
  });
});

describe('verifyChain', () => {
  it('verifies a good chain and returns its head', () => {
    const receipts = chain(5);
    const result = verifyChain(receipts);
    expect(result).toEqual({ ok: true, chainId: 'run_abc', count: 5, headHash: receipts[4]!.hash, headSeq: 5 });
  });

  it('verifies an empty chain unless one is required', () => {
    expect(verifyChain([])).toMatchObject({ ok: true, count: 0, headHash: GENESIS_HASH });
    expect(verifyChain([], { requireNonEmpty: true })).toMatchObject({ ok: false, firstBadSeq: 1, reason: 'empty' });
  });

  it('reports a tampered field at its seq', () => {
    const receipts = chain(5);
    receipts[2]!.argv = ['rm', '-rf', '/'];
    expect(verifyChain(receipts)).toMatchObject({ ok: false, code: 'E_CHAIN_BROKEN', firstBadSeq: 3, reason: 'hash_mismatch', verified: 2 });
  });

  it('reports a re-hashed tampered receipt at the next seq (prev_hash no longer matches)', () => {
    const receipts = chain(5);
    const { prev_hash, hash: _h, ...rest } = receipts[1]! as { prev_hash: string; hash: string };
    receipts[1] = sealReceipt(prev_hash, { ...rest, argv: ['evil'] });
    expect(verifyChain(receipts)).toMatchObject({ ok: false, firstBadSeq: 3, reason: 'prev_hash_mismatch' });
  });

  it('reports a removed receipt as a seq gap', () => {
    const receipts = chain(5);
    receipts.splice(3, 1);
    expect(verifyChain(receipts)).toMatchObject({ ok: false, firstBadSeq: 4, reason: 'seq_out_of_order' });
  });

  it('reports a duplicated receipt', () => {
    const receipts = chain(3);
    receipts.splice(2, 0, receipts[1]!);
    expect(verifyChain(receipts)).toMatchObject({ ok: false, firstBadSeq: 3, reason: 'seq_out_of_order' });
  });

  it('reports a receipt from another chain', () => {
    const receipts = chain(3);
    receipts[1]!.run_id = 'run_other';
    expect(verifyChain(receipts)).toMatchObject({ ok: false, firstBadSeq: 2, reason: 'chain_id_mismatch' });
    expect(verifyChain(chain(2), { chainId: 'run_xyz' })).toMatchObject({ ok: false, firstBadSeq: 1, reason: 'chain_id_mismatch' });
  });

  it('reports a malformed receipt and one that cannot be canonicalised', () => {
    expect(verifyChain([42])).toMatchObject({ ok: false, firstBadSeq: 1, reason: 'malformed' });
    const receipts = chain(2);
    receipts[1]!.extra = Number.POSITIVE_INFINITY;
    expect(verifyChain(receipts)).toMatchObject({ ok: false, firstBadSeq: 2, reason: 'not_canonicalisable' });
  });

  it('checks any event type and stops at the first break', () => {
    const receipts = chain(3).map((r) => ({ ...r }));
    const verifier = new ChainVerifier();
    expect(verifier.push(receipts[0])).toBe(true);
    verifier.breakHere('malformed', 'line 2 is not JSON');
    expect(verifier.push(receipts[1])).toBe(false);
    expect(verifier.result()).toMatchObject({ ok: false, firstBadSeq: 2, reason: 'malformed', verified: 1 });
  });
});
