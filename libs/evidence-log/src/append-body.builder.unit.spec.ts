import { GENESIS_HASH, isCairnError } from '@cairn/contracts';
import { canonicalJson, receiptBody, receiptHash, sealReceipt, verifyChain } from '@cairn/evidence';
import { describe, expect, it } from 'vitest';
import { appendMsgId, ENVELOPE_KEYS, GENESIS_HEAD, prepareAppend, sealOnto } from './append-body.builder.js';
import type { AppendInput } from './append-body.builder.js';

const CHAIN = 'run_abc';
const FIXED_NOW = () => new Date('2026-11-30T01:02:03.456Z');

function input(overrides: Partial<AppendInput> = {}): AppendInput {
  return {
    type: 'step.completed',
    actor: 'runtime',
    tenant: 'default',
    causation: 'run_abc:1',
    key: '0',
    fields: { stage: 'test', exit_code: 0, argv: ['echo', 'hi'] },
    ...overrides,
  };
}

function codeOf(fn: () => unknown): string | null {
  try {
    fn();
  } catch (error) {
    return isCairnError(error) ? error.code : `not a CairnError: ${String(error)}`;
  }
  return null;
}

describe('appendMsgId', () => {
  it('is sha256 of the versioned logical identity (pinned)', () => {
    // sha256('["cairn.evidence.msg-id/v1","run_abc","run_abc:1","step.completed","0"]')
    expect(appendMsgId(CHAIN, input())).toBe('9c3dc9a905a7e4c62e86cb1a1ede3c00e7d9be894d4bc98c540c094ed7a320f3');
  });

  it('changes with each part of the identity', () => {
    const base = appendMsgId(CHAIN, input());
    expect(appendMsgId('run_abd', input())).not.toBe(base);
    expect(appendMsgId(CHAIN, input({ causation: 'run_abc:2' }))).not.toBe(base);
    expect(appendMsgId(CHAIN, input({ causation: null }))).not.toBe(base);
    expect(appendMsgId(CHAIN, input({ type: 'step.started' }))).not.toBe(base);
    expect(appendMsgId(CHAIN, input({ key: '1' }))).not.toBe(base);
    expect(appendMsgId(CHAIN, input({ key: undefined }))).not.toBe(base);
    expect(appendMsgId(CHAIN, input({ key: '' }))).not.toBe(appendMsgId(CHAIN, input({ key: undefined })));
  });

  it('ignores everything that may differ between attempts (ts, fields, seq, actor)', () => {
    const a = prepareAppend(CHAIN, input({ ts: '2026-01-01T00:00:00.000Z' }));
    const b = prepareAppend(CHAIN, input({ ts: '2027-01-01T00:00:00.000Z', fields: { exit_code: 1 }, actor: 'kernel' }));
    expect(a.msgId).toBe(b.msgId);
    expect(sealOnto(a, GENESIS_HEAD).receipt.seq).toBe(1);
    expect(sealOnto(a, { seq: 7, hash: 'a'.repeat(64) }).receipt.seq).toBe(8);
  });

  it('cannot be confused by separators inside the parts', () => {
    expect(appendMsgId('run_a', input({ type: 'b.c', key: 'd' }))).not.toBe(appendMsgId('run_a', input({ type: 'b.c', key: undefined })));
    expect(appendMsgId('run_a', input({ causation: null, key: 'run_a:1' }))).not.toBe(appendMsgId('run_a', input({ causation: 'run_a:1', key: undefined })));
  });
});

describe('prepareAppend', () => {
  it('assembles the envelope beside the fields, ts fixed once', () => {
    const prepared = prepareAppend(CHAIN, input({ ts: undefined }), FIXED_NOW);
    expect(prepared.base).toEqual({
      v: 1,
      run_id: CHAIN,
      tenant: 'default',
      type: 'step.completed',
      actor: 'runtime',
      ts: '2026-11-30T01:02:03.456Z',
      causation: 'run_abc:1',
      stage: 'test',
      exit_code: 0,
      argv: ['echo', 'hi'],
    });
    expect(Object.isFrozen(prepared.base)).toBe(true);
    expect(prepared.traceparent).toBeNull();
    expect(prepareAppend(CHAIN, input({ ts: '2020-02-02T02:02:02.222Z' })).base.ts).toBe('2020-02-02T02:02:02.222Z');
  });

  it.each([...ENVELOPE_KEYS, 'prev_hash', 'hash'])('refuses fields that set the envelope key %s', (key) => {
    expect(codeOf(() => prepareAppend(CHAIN, input({ fields: { [key]: 'x' } })))).toBe('E_INPUT');
  });

  it.each<[string, Partial<AppendInput>]>([
    ['an actor that is no service name', { actor: 'Runtime Service' }],
    ['a tenant with upper case', { tenant: 'Default' }],
    ['an event type without a dot', { type: 'completed' }],
    ['a causation that is no event id', { causation: 'run_abc' }],
    ['a ts without milliseconds', { ts: '2026-11-30T01:02:03Z' }],
    ['a ts with an offset', { ts: '2026-11-30T01:02:03.456+01:00' }],
    ['a malformed traceparent', { traceparent: 'abc' }],
  ])('refuses %s (E_INPUT)', (_what, overrides) => {
    expect(codeOf(() => prepareAppend(CHAIN, input(overrides)))).toBe('E_INPUT');
  });

  it('refuses a chain id that is no run or sandbox id', () => {
    expect(codeOf(() => prepareAppend('job_abc', input()))).toBe('E_INPUT');
    expect(codeOf(() => prepareAppend('run_ABC', input()))).toBe('E_INPUT');
  });

  it('keeps a valid traceparent out of the body', () => {
    const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    const prepared = prepareAppend(CHAIN, input({ traceparent }));
    expect(prepared.traceparent).toBe(traceparent);
    expect(Object.values(prepared.base)).not.toContain(traceparent);
  });
});

describe('sealOnto', () => {
  it('seals a chain that verifies from genesis', () => {
    const receipts = [];
    let head = { seq: GENESIS_HEAD.seq, hash: GENESIS_HEAD.hash };
    for (let i = 0; i < 3; i++) {
      const { receipt } = sealOnto(prepareAppend(CHAIN, input({ key: String(i) }), FIXED_NOW), head);
      receipts.push(receipt);
      head = { seq: receipt.seq, hash: receipt.hash };
    }
    expect(receipts[0]!.prev_hash).toBe(GENESIS_HASH);
    expect(receipts.map((r) => r.seq)).toEqual([1, 2, 3]);
    expect(verifyChain(receipts, { chainId: CHAIN, requireNonEmpty: true })).toMatchObject({ ok: true, count: 3, headHash: head.hash });
  });

  // The templates must equal the reference exactly: sealReceipt for the receipt (I-4), and
  // canonicalJson for the published bytes. Keys are chosen to sort around the open members.
  const awkwardFields: Record<string, unknown>[] = [
    {},
    { a: 1 },
    { zzz: 'last', AAA: 'upper sorts first', _x: null },
    { sep: 1, seq_no: 2, seq0: 3, hash2: 'h', hasg: 'g', prev: true, prev_hasg: false, prev_hash_: [] },
    { 'é': 'accent', '\u{1F600}': 'astral key', '\uFFFF': 'bmp max', '': 'empty key' },
    { nested: { b: [1, 2, { d: 'x', c: -0 }], a: 1e21, big: 2 ** 70, tiny: 1e-7 } },
    { text: 'quote " backslash \\ newline \n control \u0001 line sep \u2028' },
  ];

  it.each(awkwardFields.map((fields, i) => [i, fields] as const))('equals sealReceipt and canonicalJson (fields #%s)', (_i, fields) => {
    const prepared = prepareAppend(CHAIN, input({ fields }), FIXED_NOW);
    for (const head of [GENESIS_HEAD, { seq: 41, hash: 'f'.repeat(64) }]) {
      const { receipt, canonical } = sealOnto(prepared, head);
      const reference = sealReceipt(head.hash, { ...prepared.base, seq: head.seq + 1 });
      expect(receipt).toEqual(reference);
      expect(receipt.hash).toBe(receiptHash(head.hash, receiptBody(reference)));
      expect(canonical).toBe(canonicalJson(reference));
      // JSON has no -0: the stored form reads back as the reference serialised.
      expect(JSON.parse(canonical)).toEqual(JSON.parse(JSON.stringify(reference)));
    }
  });

  it('refuses field values that are not plain JSON before anything is published (E_INPUT)', () => {
    expect(codeOf(() => prepareAppend(CHAIN, input({ fields: { when: new Date(0) } })))).toBe('E_INPUT');
    expect(codeOf(() => prepareAppend(CHAIN, input({ fields: { ratio: Number.NaN } })))).toBe('E_INPUT');
    expect(codeOf(() => prepareAppend(CHAIN, input({ fields: { lone: '\uD800' } })))).toBe('E_INPUT');
    expect(codeOf(() => prepareAppend(CHAIN, input({ fields: { missing: undefined } })))).toBe('E_INPUT');
    expect(codeOf(() => prepareAppend(CHAIN, input({ fields: { ['bad\uDC00key']: 1 } })))).toBe('E_INPUT');
  });
});
