import { describe, expect, it } from 'vitest';
import { foldRun } from './evolve-run.js';
import { attemptOf, lostWorkerRecord, retriesOf, splitAttempts } from './run-attempt.js';
import { FIELDS, RunChain } from './run-chain.fixture.js';

/** Submitted, allowed, placed on `worker` as `attempt`, a sandbox and one started step. */
function placedAndStarted(chain: RunChain, attempt: number, worker = 'w1'): void {
  chain.add('run.scheduled', { ...FIELDS.scheduled(), worker_id: worker, lease_id: `l${attempt}`, attempt });
  chain.add('sandbox.created', { ...FIELDS.sandboxCreated(), worker_id: worker });
  chain.add('step.started', FIELDS.stepStarted());
}

function twoAttempts(): RunChain {
  const chain = new RunChain();
  chain.add('run.submitted', FIELDS.submitted());
  chain.add('policy.decided', FIELDS.policy('allow'));
  placedAndStarted(chain, 1, 'w-b');
  chain.add('run.retried', FIELDS.retried(1, 0));
  placedAndStarted(chain, 2, 'w-a');
  chain.add('step.completed', FIELDS.stepCompleted(0));
  chain.add('sandbox.destroyed', FIELDS.sandboxDestroyed());
  chain.add('run.executed', FIELDS.executed(0));
  return chain;
}

describe('attemptOf', () => {
  it('given a chain with no retry, when read, then it is the chain itself', () => {
    const chain = new RunChain();
    chain.add('run.submitted', FIELDS.submitted());
    chain.add('policy.decided', FIELDS.policy('allow'));
    placedAndStarted(chain, 1);
    expect(attemptOf(chain.receipts)).toEqual(chain.receipts);
    expect(splitAttempts(chain.receipts)).toMatchObject({ attempt: 1, lost: [] });
  });

  it('given a chain not yet placed, when read, then all of it is shared and nothing is the attempt\'s own', () => {
    const chain = new RunChain();
    chain.add('run.submitted', FIELDS.submitted());
    chain.add('policy.decided', FIELDS.policy('allow'));
    expect(attemptOf(chain.receipts)).toEqual(chain.receipts);
    expect(splitAttempts(chain.receipts)).toMatchObject({ attempt: 1, lost: [], current: [] });
  });

  it('given two attempts, when read, then the shared receipts and the second attempt only, with one step.started', () => {
    const chain = twoAttempts();
    const current = attemptOf(chain.receipts);
    expect(current.map((r) => r.seq)).toEqual([1, 2, 7, 8, 9, 10, 11, 12]);
    expect(current.filter((r) => r.type === 'step.started')).toHaveLength(1);
    expect(current.find((r) => r.type === 'run.scheduled')).toMatchObject({ attempt: 2, worker_id: 'w-a' });
  });

  it('given two attempts, when split, then the lost attempt runs from its placement to its run.retried', () => {
    const split = splitAttempts(twoAttempts().receipts);
    expect(split.attempt).toBe(2);
    expect(split.shared.map((r) => r.type)).toEqual(['run.submitted', 'policy.decided']);
    expect(split.lost).toHaveLength(1);
    expect(split.lost[0]!.attempt).toBe(1);
    expect(split.lost[0]!.receipts.map((r) => r.type)).toEqual(['run.scheduled', 'sandbox.created', 'step.started', 'run.retried']);
    expect(split.current[0]).toMatchObject({ type: 'run.scheduled', attempt: 2 });
  });

  it('given a run retried right after its placement, when the next placement has not come, then the attempt is 2 with nothing of its own', () => {
    const chain = new RunChain();
    chain.add('run.submitted', FIELDS.submitted());
    chain.add('policy.decided', FIELDS.policy('allow'));
    chain.add('run.scheduled', FIELDS.scheduled());
    chain.add('run.retried', FIELDS.retried(1, 1));
    expect(splitAttempts(chain.receipts)).toMatchObject({ attempt: 2, current: [] });
    expect(attemptOf(chain.receipts).map((r) => r.type)).toEqual(['run.submitted', 'policy.decided']);
  });
});

describe('evolveRun: run.retried (ADR 0035)', () => {
  it('given a running run, when its worker is lost with an attempt left, then SUBMITTED, and the next placement runs it to EXECUTED', () => {
    const chain = new RunChain();
    chain.add('run.submitted', FIELDS.submitted());
    chain.add('policy.decided', FIELDS.policy('allow'));
    placedAndStarted(chain, 1, 'w-b');
    chain.add('run.retried', FIELDS.retried(1, 0));
    expect(foldRun(chain.receipts)).toMatchObject({ state: 'SUBMITTED', errorCode: null });
    expect(foldRun(twoAttempts().receipts)).toMatchObject({ state: 'EXECUTED', errorCode: null });
  });

  it('given a scheduled run and a step held for approval, when retried, then SUBMITTED from either', () => {
    for (const build of [
      (chain: RunChain) => chain.add('run.scheduled', FIELDS.scheduled()),
      (chain: RunChain) => {
        placedAndStarted(chain, 1);
        chain.add('step.completed', FIELDS.stepCompleted(0));
        chain.add('approval.requested', FIELDS.approvalRequested('step'));
      },
    ]) {
      const chain = new RunChain();
      chain.add('run.submitted', FIELDS.submitted());
      chain.add('policy.decided', FIELDS.policy('allow'));
      build(chain);
      chain.add('run.retried', FIELDS.retried(1, 0));
      expect(foldRun(chain.receipts)).toMatchObject({ state: 'SUBMITTED', errorCode: null });
    }
  });

  it('given a run that was never placed, or one executed, when run.retried lands, then FAILED E_UNKNOWN_STATE', () => {
    const unplaced = new RunChain();
    unplaced.add('run.submitted', FIELDS.submitted());
    unplaced.add('policy.decided', FIELDS.policy('allow'));
    unplaced.add('run.retried', FIELDS.retried(1, 0));
    expect(foldRun(unplaced.receipts)).toMatchObject({ state: 'FAILED', errorCode: 'E_UNKNOWN_STATE' });

    const executed = twoAttempts();
    executed.add('run.retried', FIELDS.retried(2, 0));
    expect(foldRun(executed.receipts)).toMatchObject({ state: 'FAILED', errorCode: 'E_UNKNOWN_STATE' });
  });

  it('given a run held for a run approval before any placement, when run.retried lands, then FAILED E_UNKNOWN_STATE', () => {
    const chain = new RunChain();
    chain.add('run.submitted', FIELDS.submitted());
    chain.add('policy.decided', FIELDS.policy('hold'));
    chain.add('approval.requested', FIELDS.approvalRequested('run'));
    expect(foldRun(chain.receipts)).toMatchObject({ state: 'AWAITING_APPROVAL', placed: false });
    chain.add('run.retried', FIELDS.retried(1, 0));
    expect(foldRun(chain.receipts)).toMatchObject({ state: 'FAILED', errorCode: 'E_UNKNOWN_STATE' });
  });

  it('given a run approved, placed and then held on a step, when its worker is lost, then SUBMITTED (the hold is of a placed attempt)', () => {
    const chain = new RunChain();
    chain.add('run.submitted', FIELDS.submitted());
    chain.add('policy.decided', FIELDS.policy('hold'));
    chain.add('approval.requested', FIELDS.approvalRequested('run'));
    chain.add('approval.granted', FIELDS.approvalGranted());
    placedAndStarted(chain, 1);
    chain.add('step.completed', FIELDS.stepCompleted(0));
    chain.add('approval.requested', { ...FIELDS.approvalRequested('step'), approval_id: 'apr-2' });
    expect(foldRun(chain.receipts)).toMatchObject({ state: 'AWAITING_APPROVAL', placed: true });
    chain.add('run.retried', FIELDS.retried(1, 0));
    expect(foldRun(chain.receipts)).toMatchObject({ state: 'SUBMITTED', errorCode: null, placed: false });
  });

  it('given a retried run held for a run approval before its next placement, when run.retried lands again, then FAILED E_UNKNOWN_STATE', () => {
    const chain = new RunChain();
    chain.add('run.submitted', FIELDS.submitted());
    chain.add('policy.decided', FIELDS.policy('allow'));
    placedAndStarted(chain, 1, 'w-b');
    chain.add('run.retried', FIELDS.retried(1, 1));
    chain.add('approval.requested', FIELDS.approvalRequested('run'));
    expect(foldRun(chain.receipts)).toMatchObject({ state: 'AWAITING_APPROVAL', placed: false });
    chain.add('run.retried', FIELDS.retried(2, 0));
    expect(foldRun(chain.receipts)).toMatchObject({ state: 'FAILED', errorCode: 'E_UNKNOWN_STATE' });
  });

  it('given a run retried and placed again, when folded, then the second attempt is placed and may itself be retried', () => {
    const chain = new RunChain();
    chain.add('run.submitted', FIELDS.submitted());
    chain.add('policy.decided', FIELDS.policy('allow'));
    placedAndStarted(chain, 1, 'w-b');
    chain.add('run.retried', FIELDS.retried(1, 1));
    expect(foldRun(chain.receipts)).toMatchObject({ state: 'SUBMITTED', placed: false });
    placedAndStarted(chain, 2, 'w-a');
    expect(foldRun(chain.receipts)).toMatchObject({ state: 'RUNNING', placed: true });
    chain.add('run.retried', FIELDS.retried(2, 0));
    expect(foldRun(chain.receipts)).toMatchObject({ state: 'SUBMITTED', errorCode: null, placed: false });
  });
});

describe('lostWorkerRecord', () => {
  const lost = 'worker w-1 lost: lease run_abc:1 (attempt 1) expired';
  const placement = (attempt: number) => ({ attempt, worker_id: 'w-1', lease_id: `run_abc:${attempt}` });

  it('given a run that did not opt into retries, when its worker is lost, then it fails E_WORKER_LOST saying so', () => {
    expect(lostWorkerRecord(undefined, placement(1), lost)).toEqual({
      type: 'run.failed',
      fields: { error_code: 'E_WORKER_LOST', message: `${lost}; the run did not opt into retries` },
    });
  });

  it('given retries 2, when attempts 1, 2 and 3 are lost in turn, then 1 and 2 are retried keyed by attempt (1, then 0 left) and 3 fails', () => {
    const first = lostWorkerRecord(2, placement(1), lost);
    expect(first).toEqual({
      type: 'run.retried',
      key: 'retried-1',
      fields: { attempt: 1, error_code: 'E_WORKER_LOST', worker_id: 'w-1', lease_id: 'run_abc:1', message: `${lost}; attempt 2 of 3 is placed next (1 more left after it)`, retries_left: 1 },
    });
    expect(lostWorkerRecord(2, placement(2), lost)).toMatchObject({ type: 'run.retried', key: 'retried-2', fields: { attempt: 2, retries_left: 0 } });
    const third = lostWorkerRecord(2, placement(3), lost);
    expect(third).toMatchObject({ type: 'run.failed', fields: { error_code: 'E_WORKER_LOST' } });
    expect(third.fields.message).toMatch(/all 2 retries are used$/);
  });

  it.each([
    ['zero', 0],
    ['negative', -1],
    ['fractional', 1.5],
    ['over the frozen 3', 4],
    ['a string', '1'],
    ['not a number', Number.NaN],
  ])('given %s retries, when the worker is lost, then it is no opt-in and the run fails', (_what, retries) => {
    expect(lostWorkerRecord(retries, placement(1), lost).type).toBe('run.failed');
  });

  it('given a very long loss message, when recorded, then it fits the receipt (2000 characters)', () => {
    expect(lostWorkerRecord(1, placement(1), 'x'.repeat(5000)).fields.message).toHaveLength(2000);
    expect(lostWorkerRecord(0, placement(1), 'x'.repeat(5000)).fields.message).toHaveLength(2000);
  });
});

describe('retriesOf', () => {
  it('given a chain, when read, then it is the submitted spec\'s retries, 0 when absent', () => {
    const chain = new RunChain();
    chain.add('run.submitted', FIELDS.submitted());
    expect(retriesOf(chain.receipts)).toBe(0);
    const opted = new RunChain();
    opted.add('run.submitted', { ...FIELDS.submitted(), spec: { ...FIELDS.submitted().spec, retries: 2 } });
    expect(retriesOf(opted.receipts)).toBe(2);
    expect(retriesOf([])).toBe(0);
  });
});
