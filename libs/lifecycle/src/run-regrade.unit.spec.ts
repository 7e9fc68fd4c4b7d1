import type { EvidenceReceipt } from '@cairn/contracts';
import { describe, expect, it } from 'vitest';
import { foldRun } from './evolve-run.js';
import { FIELDS, RunChain } from './run-chain.fixture.js';
import { regradePath } from './run-regrade.js';

function given(build: (chain: RunChain) => void) {
  const chain = new RunChain();
  build(chain);
  const receipts = chain.receipts as EvidenceReceipt[];
  const view = foldRun(receipts);
  if (view === null) throw new Error('empty chain');
  return { receipts, view };
}

const verified = (c: RunChain) => {
  c.add('run.submitted', FIELDS.submitted());
  c.add('policy.decided', FIELDS.policy('allow'));
  c.add('run.scheduled', FIELDS.scheduled());
  c.add('sandbox.created', FIELDS.sandboxCreated());
  c.add('step.started', FIELDS.stepStarted());
  c.add('step.completed', FIELDS.stepCompleted(0));
  c.add('sandbox.destroyed', FIELDS.sandboxDestroyed());
  c.add('run.executed', FIELDS.executed(0));
  c.add('kernel.facts', FIELDS.facts());
  c.add('verification.completed', FIELDS.verified('SUPPORTS'));
};
const failedOnce = (c: RunChain) => {
  verified(c);
  c.add('grade.failed', { ...FIELDS.gradeFailed(), cause: 'timeout', criterion_id: 'judge', attempt: 1 });
};

describe('regradePath: what a regrade command does', () => {
  it('given a verified run whose judge timed out, when regraded, then grade.requested opens attempt 2', () => {
    const { receipts, view } = given(failedOnce);
    expect(view.state).toBe('VERIFIED');
    expect(regradePath(view, receipts)).toEqual({ kind: 'regrade', attempt: 2, key: 'regrade-2' });
  });

  it('given a request already open, when regraded again, then nothing more; after it failed too, attempt 3', () => {
    const open = given((c) => {
      failedOnce(c);
      c.add('grade.requested', { requested_by: 'key:k1' });
    });
    expect(regradePath(open.view, open.receipts)).toEqual({ kind: 'requested' });
    const again = given((c) => {
      failedOnce(c);
      c.add('grade.requested', { requested_by: 'key:k1' });
      c.add('grade.failed', { ...FIELDS.gradeFailed(), cause: 'http_error', criterion_id: 'judge', attempt: 2 });
    });
    expect(regradePath(again.view, again.receipts)).toEqual({ kind: 'regrade', attempt: 3, key: 'regrade-3' });
  });

  it('refuses a run still grading, graded, sealed, ended otherwise, or failed for good', () => {
    const grading = given(verified);
    expect(regradePath(grading.view, grading.receipts)).toMatchObject({ kind: 'not_failed', state: 'VERIFIED' });
    const graded = given((c) => {
      failedOnce(c);
      c.add('grade.requested', { requested_by: 'key:k1' });
      c.add('grade.recorded', FIELDS.graded(3, 5));
    });
    expect(regradePath(graded.view, graded.receipts)).toMatchObject({ kind: 'not_failed', state: 'GRADED' });
    const sealed = given((c) => {
      verified(c);
      c.add('grade.recorded', FIELDS.graded(3, 5));
      c.add('run.sealed', FIELDS.sealed('SEALED'));
    });
    expect(regradePath(sealed.view, sealed.receipts)).toEqual({ kind: 'sealed' });
    const ended = given((c) => {
      c.add('run.submitted', FIELDS.submitted());
      c.add('run.failed', FIELDS.failed('E_IMAGE_PULL'));
    });
    expect(regradePath(ended.view, ended.receipts)).toMatchObject({ kind: 'not_failed', state: 'FAILED' });
    const forGood = given((c) => {
      verified(c);
      c.add('grade.failed', { ...FIELDS.gradeFailed(), retryable: false });
    });
    expect(regradePath(forGood.view, forGood.receipts)).toEqual({ kind: 'not_retryable' });
  });
});
