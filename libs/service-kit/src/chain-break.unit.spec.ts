import type { ReceiptEnvelope } from '@cairn/contracts';
import { sealReceipt } from '@cairn/evidence';
import type { ChainBreak } from '@cairn/evidence-log';
import { describe, expect, it } from 'vitest';
import { chainBreakText, decideChainBreak } from './chain-break.js';
import { passingRun, plannedRun } from './testing/executed-run.fixture.js';
import type { PlannedEvent } from './testing/executed-run.fixture.js';

const RUN = 'run_chainbreak';

/** The planned events sealed one onto another, as the log would store them. */
function sealed(events: readonly PlannedEvent[]): ReceiptEnvelope[] {
  const out: ReceiptEnvelope[] = [];
  let prev = '0'.repeat(64);
  for (const [i, e] of events.entries()) {
    const receipt = sealReceipt(prev, { v: 1, seq: i + 1, run_id: RUN, tenant: 'acme', type: e.type, actor: e.actor, ts: '2026-12-02T10:00:00.000Z', causation: e.causation, ...e.fields });
    prev = receipt.hash;
    out.push(receipt as unknown as ReceiptEnvelope);
  }
  return out;
}

const planned = plannedRun(RUN, passingRun()).events;
/** Submitted, decided, scheduled, sandbox created, step 0 started: a run mid-step. */
const running = sealed(planned.slice(0, 5));
const poison = (afterSeq: number, streamSeq = 40): ChainBreak => ({ streamSeq, subject: `cairn.evidence.${RUN}.step.completed`, afterSeq, reason: `message ${streamSeq} is not JSON` });
const fail = (type: 'alert.raised' | 'run.failed', causation: string): PlannedEvent => ({ type, actor: 'runtime', causation, key: 'chain-break-40', fields: type === 'alert.raised' ? { severity: 'critical', error_code: 'E_CHAIN_BROKEN', message: 'm' } : { error_code: 'E_CHAIN_BROKEN', message: 'm' } });

describe('decideChainBreak (ADR 0033)', () => {
  it('given a chain with no break, when decided, then nothing is to do', () => {
    expect(decideChainBreak(RUN, running, [])).toEqual({ kind: 'none' });
  });

  it('given a poison message after a running run\'s last receipt, when decided, then the alert and run.failed go onto that receipt, keyed by the break', () => {
    const decision = decideChainBreak(RUN, running, [poison(5)]);
    expect(decision).toMatchObject({ kind: 'record', headSeq: 5, fail: true, afterSeq: 5, key: 'chain-break-40' });
    expect(decision.kind === 'record' && decision.message).toContain('stream seq 40 on cairn.evidence.run_chainbreak.step.completed, after seq 5, is not a receipt');
  });

  it('given the break answered by an alert and a failure after it, when decided, then readers may go on past it', () => {
    const answered = sealed([...planned.slice(0, 5), fail('alert.raised', `${RUN}:5`), fail('run.failed', `${RUN}:5`)]);
    expect(decideChainBreak(RUN, answered, [poison(5)])).toMatchObject({ kind: 'answered' });
  });

  it('given a run that had ended before the poison message, when decided, then only the alert is to record', () => {
    const ended = sealed([...planned.slice(0, 5), fail('run.failed', `${RUN}:5`)]);
    expect(decideChainBreak(RUN, ended, [poison(6)])).toMatchObject({ kind: 'record', headSeq: 6, fail: false });
  });

  it('given an alert that only answers an earlier break, when a second break follows it, then the second is recorded too', () => {
    const answered = sealed([...planned.slice(0, 5), fail('alert.raised', `${RUN}:5`), fail('run.failed', `${RUN}:5`)]);
    expect(decideChainBreak(RUN, answered, [poison(5), poison(7, 52)])).toMatchObject({ kind: 'record', headSeq: 7, fail: false, key: 'chain-break-52' });
  });

  it('given a sealed run, when a poison message follows the seal, then nothing may be appended', () => {
    const before = sealed([...planned.slice(0, 5), fail('run.failed', `${RUN}:5`)]);
    const seal: PlannedEvent = { type: 'run.sealed', actor: 'grader', causation: `${RUN}:6`, fields: { final_state: 'FAILED', error_code: 'E_CHAIN_BROKEN', evidence_digest: before.at(-1)!.hash } };
    const ended = sealed([...planned.slice(0, 5), fail('run.failed', `${RUN}:5`), seal]);
    expect(decideChainBreak(RUN, ended, [poison(7)])).toMatchObject({ kind: 'sealed' });
  });

  it('names the first break and counts the others, bounded', () => {
    expect(chainBreakText([])).toBe('');
    const text = chainBreakText([poison(5), poison(5, 41), { ...poison(5, 42), reason: 'x'.repeat(5000) }]);
    expect(text).toContain('stream seq 40');
    expect(text).toContain('and 2 more such message(s), the last at stream seq 42');
    expect(chainBreakText([{ ...poison(5), reason: 'y'.repeat(5000) }]).length).toBeLessThanOrEqual(2000);
  });
});
