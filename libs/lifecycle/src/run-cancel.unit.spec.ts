import type { EvidenceReceipt } from '@cairn/contracts';
import { describe, expect, it } from 'vitest';
import { foldRun } from './evolve-run.js';
import { cancelPath, openSandboxes, pendingCancelRequest } from './run-cancel.js';
import { FIELDS, RunChain } from './run-chain.fixture.js';

/** Given a chain built by `build`, the known receipts and their view. */
function given(build: (chain: RunChain) => void) {
  const chain = new RunChain();
  build(chain);
  const receipts = chain.receipts as EvidenceReceipt[];
  const view = foldRun(receipts);
  if (view === null) throw new Error('empty chain');
  return { receipts, view };
}

const submitted = (c: RunChain) => c.add('run.submitted', FIELDS.submitted());
const scheduled = (c: RunChain) => {
  submitted(c);
  c.add('policy.decided', FIELDS.policy('allow'));
  c.add('run.scheduled', FIELDS.scheduled());
};
const running = (c: RunChain) => {
  scheduled(c);
  c.add('sandbox.created', FIELDS.sandboxCreated());
  c.add('step.started', FIELDS.stepStarted());
};

describe('cancelPath: what a cancel command does', () => {
  it.each([
    ['submitted', submitted],
    ['held for approval', (c: RunChain) => {
      submitted(c);
      c.add('policy.decided', FIELDS.policy('hold'));
    }],
    ['scheduled, no sandbox yet', scheduled],
  ])('given a run %s, when cancelled, then run.cancelled at once', (_what, build) => {
    const { receipts, view } = given(build);
    expect(cancelPath(view, receipts)).toEqual({ kind: 'cancel' });
  });

  it('given a running run, when cancelled, then the runtime is asked (run.cancel_requested)', () => {
    const { receipts, view } = given(running);
    expect(cancelPath(view, receipts)).toEqual({ kind: 'request' });
  });

  it('given a step held for approval mid-run (a sandbox open), when cancelled, then the runtime is asked too', () => {
    const { receipts, view } = given((c) => {
      running(c);
      c.add('step.completed', FIELDS.stepCompleted(0));
      c.add('approval.requested', FIELDS.approvalRequested('step'));
    });
    expect(view.state).toBe('AWAITING_APPROVAL');
    expect(cancelPath(view, receipts)).toEqual({ kind: 'request' });
  });

  it('given a run retried after its worker was lost, its sandbox left to the reaper (ADR 0035), when cancelled before its next placement, then run.cancelled at once', () => {
    const { receipts, view } = given((c) => {
      running(c);
      c.add('run.retried', FIELDS.retried(1, 0));
    });
    expect(view.state).toBe('SUBMITTED');
    expect(openSandboxes(receipts)).toHaveLength(1);
    expect(cancelPath(view, receipts)).toEqual({ kind: 'cancel' });
  });

  it('given a request not answered yet, when cancelled again, then nothing more (the pending request)', () => {
    const { receipts, view } = given((c) => {
      running(c);
      c.add('run.cancel_requested', FIELDS.cancelRequested());
    });
    expect(cancelPath(view, receipts)).toMatchObject({ kind: 'requested', request: { type: 'run.cancel_requested', seq: 6 } });
  });

  it('given an ended run, when cancelled, then cancelled / ended / sealed as the chain says', () => {
    const cancelled = given((c) => {
      running(c);
      c.add('run.cancel_requested', FIELDS.cancelRequested());
      c.add('run.cancelled', FIELDS.cancelled());
    });
    expect(cancelPath(cancelled.view, cancelled.receipts)).toEqual({ kind: 'cancelled' });
    const failed = given((c) => {
      running(c);
      c.add('run.failed', FIELDS.failed('E_WORKER_LOST'));
    });
    expect(cancelPath(failed.view, failed.receipts)).toEqual({ kind: 'ended', state: 'FAILED' });
    const sealed = given((c) => {
      submitted(c);
      c.add('run.cancelled', FIELDS.cancelled());
      c.add('run.sealed', FIELDS.sealed('CANCELLED'));
    });
    expect(cancelPath(sealed.view, sealed.receipts)).toEqual({ kind: 'sealed' });
  });
});

describe('pendingCancelRequest and openSandboxes', () => {
  it('given a request, when the run ends, then it is no longer pending', () => {
    const asked = given((c) => {
      running(c);
      c.add('run.cancel_requested', FIELDS.cancelRequested());
    });
    expect(pendingCancelRequest(asked.receipts)).toMatchObject({ requested_by: 'key:k1', reason: 'not needed' });
    const answered = given((c) => {
      running(c);
      c.add('run.cancel_requested', FIELDS.cancelRequested());
      c.add('run.cancelled', FIELDS.cancelled());
    });
    expect(pendingCancelRequest(answered.receipts)).toBeNull();
    expect(pendingCancelRequest(given(running).receipts)).toBeNull();
  });

  it('given sandboxes created and destroyed, then only the open ones are listed', () => {
    const { receipts } = given((c) => {
      running(c);
      c.add('step.completed', FIELDS.stepCompleted(0));
      c.add('sandbox.destroyed', FIELDS.sandboxDestroyed());
    });
    expect(openSandboxes(receipts)).toEqual([]);
    expect(openSandboxes(given(running).receipts)).toEqual(['cairn-run_fixture1']);
  });
});
