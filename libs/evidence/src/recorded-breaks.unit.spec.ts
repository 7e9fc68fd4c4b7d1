import { GENESIS_HASH } from '@cairn/contracts';
import { describe, expect, it } from 'vitest';
import { sealReceipt } from './receipt-hash.js';
import { recordedBreakOf, recordedBreaksOf } from './recorded-breaks.js';
import { verifyChain } from './verify-chain.js';

const RUN = 'run_abc';

/** A valid chain of `types` (one receipt each, `fields` merged into the one at that index). */
function chain(types: readonly string[], fields: Record<number, Record<string, unknown>> = {}): Record<string, unknown>[] {
  const receipts: Record<string, unknown>[] = [];
  let prev = GENESIS_HASH;
  types.forEach((type, index) => {
    const seq = index + 1;
    const receipt = sealReceipt(prev, { v: 1, seq, run_id: RUN, tenant: 'default', type, actor: 'runtime', ts: '2026-12-01T00:00:00.000Z', causation: seq === 1 ? null : `${RUN}:${seq - 1}`, ...fields[index] });
    receipts.push(receipt);
    prev = receipt.hash;
  });
  return receipts;
}

const BREAK = { severity: 'critical', error_code: 'E_CHAIN_BROKEN', message: 'the message at stream seq 9 on cairn.evidence.run_abc.step.completed, after seq 2, is not a receipt (not JSON)' };

describe('recordedBreaksOf (ADR 0033: a chain that records its own break)', () => {
  it('names the seq and message of a critical alert.raised E_CHAIN_BROKEN on a chain whose receipts verify', () => {
    const receipts = chain(['run.submitted', 'step.started', 'alert.raised', 'run.failed', 'run.sealed'], { 2: BREAK, 3: { error_code: 'E_CHAIN_BROKEN', message: BREAK.message } });
    // The receipts verify: only the alert says the chain was broken.
    expect(verifyChain(receipts)).toMatchObject({ ok: true, count: 5 });
    expect(recordedBreaksOf(receipts)).toEqual([{ seq: 3, message: BREAK.message }]);
  });

  it('names every recorded break, in chain order', () => {
    const receipts = chain(['run.submitted', 'alert.raised', 'step.started', 'alert.raised'], { 1: { ...BREAK, message: 'first' }, 3: { ...BREAK, message: 'second' } });
    expect(recordedBreaksOf(receipts)).toEqual([
      { seq: 2, message: 'first' },
      { seq: 4, message: 'second' },
    ]);
  });

  it('finds none on a chain that records no break, or on no receipts at all', () => {
    expect(recordedBreaksOf(chain(['run.submitted', 'step.started', 'step.completed', 'run.sealed']))).toEqual([]);
    expect(recordedBreaksOf([])).toEqual([]);
  });

  it('ignores an alert that is not critical, or about another error code, and a run.failed E_CHAIN_BROKEN alone', () => {
    const receipts = chain(['run.submitted', 'alert.raised', 'alert.raised', 'run.failed'], {
      1: { ...BREAK, severity: 'warning' },
      2: { ...BREAK, error_code: 'E_SECRET_SEEN', message: 'E_SECRET_SEEN: a secret was redacted' },
      3: { error_code: 'E_CHAIN_BROKEN', message: 'm' },
    });
    expect(recordedBreaksOf(receipts)).toEqual([]);
  });

  it('ignores what is not a receipt naming a chain position, and reads a message that is no string as empty', () => {
    const alert = { type: 'alert.raised', seq: 3, ...BREAK };
    for (const value of [null, undefined, 'alert.raised', 3, true, [alert], { ...alert, seq: '3' }, { ...alert, seq: 0 }, { ...alert, seq: -1 }, { ...alert, seq: 2.5 }, { ...alert, seq: Number.NaN }, { ...alert, seq: Number.POSITIVE_INFINITY }, { ...alert, type: 'ALERT.RAISED' }, { ...alert, error_code: ['E_CHAIN_BROKEN'] }, { ...alert, severity: undefined }]) {
      expect(recordedBreakOf(value), JSON.stringify(value) ?? 'undefined').toBeNull();
    }
    expect(recordedBreaksOf([null, 'x', alert, 7])).toEqual([{ seq: 3, message: BREAK.message }]);
    expect(recordedBreakOf({ ...alert, message: 42 })).toEqual({ seq: 3, message: '' });
    expect(recordedBreakOf({ ...alert, message: undefined })).toEqual({ seq: 3, message: '' });
  });
});
