import type { EvidenceReceipt } from '@cairn/contracts';
import { describe, expect, it } from 'vitest';
import { foldRun } from './evolve-run.js';
import { approvalPath, expiredApprovals, pendingApprovals } from './run-approval.js';
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

const SUBMITTER = 'key:k1'; // FIELDS.submitted()
const APPROVER = 'key:boss';
const requested = (id: string, scope: 'run' | 'step' = 'run', expires = '2026-01-02T00:00:00.000Z') => ({
  ...FIELDS.approvalRequested(scope),
  approval_id: id,
  expires_at: expires,
});

/** A run held for two run-scope approvals. */
const held = (c: RunChain) => {
  c.add('run.submitted', FIELDS.submitted());
  c.add('policy.decided', { ...FIELDS.policy('hold'), caps: { wall_seconds: 60, memory_mib: 64, pids: 16, disk_mib: 16, cpus: 0.5 } });
  c.add('approval.requested', requested('egress'));
  c.add('approval.requested', requested('image', 'run', '2026-01-01T00:00:30.000Z'));
};

describe('pendingApprovals', () => {
  it('given two requests and one grant, when read, then the other is pending', () => {
    const { receipts } = given((c) => {
      held(c);
      c.add('approval.granted', { approval_id: 'egress', approved_by: APPROVER });
    });
    expect(pendingApprovals(receipts).map((r) => r.approval_id)).toEqual(['image']);
  });
});

describe('approvalPath: what a decision does to a run', () => {
  it('given a held run, when another key approves, then every pending approval is granted', () => {
    const { receipts, view } = given(held);
    const path = approvalPath(view, receipts, { actor: APPROVER, decision: 'approve' });
    expect(path.kind).toBe('grant');
    expect(path.kind === 'grant' && path.requests.map((r) => r.approval_id)).toEqual(['egress', 'image']);
  });

  it('given a held run, when one approval is named, then only that one is granted', () => {
    const { receipts, view } = given(held);
    const path = approvalPath(view, receipts, { actor: APPROVER, decision: 'approve', approvalId: 'image' });
    expect(path.kind === 'grant' && path.requests.map((r) => r.approval_id)).toEqual(['image']);
    expect(approvalPath(view, receipts, { actor: APPROVER, decision: 'approve', approvalId: 'step-9' })).toEqual({
      kind: 'nothing_pending',
      state: 'AWAITING_APPROVAL',
      approvalId: 'step-9',
    });
  });

  it('given a held run, when another key rejects, then one rejection ends it', () => {
    const { receipts, view } = given(held);
    const path = approvalPath(view, receipts, { actor: APPROVER, decision: 'reject' });
    expect(path.kind === 'reject' && path.request.approval_id).toBe('egress');
  });

  it('given a held run, when the key that submitted it decides, then it is refused either way (four eyes)', () => {
    const { receipts, view } = given(held);
    expect(approvalPath(view, receipts, { actor: SUBMITTER, decision: 'approve' })).toEqual({ kind: 'self' });
    expect(approvalPath(view, receipts, { actor: SUBMITTER, decision: 'reject' })).toEqual({ kind: 'self' });
  });

  it('given a sealed run, when anyone decides, then it is sealed; a run that ended otherwise has ended', () => {
    const sealed = given((c) => {
      held(c);
      c.add('approval.rejected', { approval_id: 'egress', rejected_by: APPROVER, cause: 'rejected' });
      c.add('run.sealed', FIELDS.sealed('CANCELLED'));
    });
    expect(approvalPath(sealed.view, sealed.receipts, { actor: APPROVER, decision: 'approve' })).toEqual({ kind: 'sealed' });
    expect(approvalPath(sealed.view, sealed.receipts, { actor: SUBMITTER, decision: 'approve' })).toEqual({ kind: 'sealed' });
    const ended = given((c) => {
      held(c);
      c.add('approval.rejected', { approval_id: 'egress', rejected_by: APPROVER, cause: 'rejected' });
    });
    expect(ended.view).toMatchObject({ state: 'CANCELLED', errorCode: 'E_NO_APPROVAL' });
    expect(approvalPath(ended.view, ended.receipts, { actor: APPROVER, decision: 'approve' })).toEqual({ kind: 'ended', state: 'CANCELLED' });
  });

  it('given a run that awaits nothing, when approved, then nothing is pending; the same approver again is a duplicate', () => {
    const running = given((c) => {
      c.add('run.submitted', FIELDS.submitted());
      c.add('policy.decided', FIELDS.policy('allow'));
      c.add('run.scheduled', FIELDS.scheduled());
    });
    expect(approvalPath(running.view, running.receipts, { actor: APPROVER, decision: 'approve' })).toEqual({
      kind: 'nothing_pending',
      state: 'SCHEDULED',
      approvalId: null,
    });
    const granted = given((c) => {
      held(c);
      c.add('approval.granted', { approval_id: 'egress', approved_by: APPROVER });
      c.add('approval.granted', { approval_id: 'image', approved_by: APPROVER });
    });
    expect(approvalPath(granted.view, granted.receipts, { actor: APPROVER, decision: 'approve' })).toEqual({ kind: 'duplicate' });
    expect(approvalPath(granted.view, granted.receipts, { actor: 'key:other', decision: 'approve' }).kind).toBe('nothing_pending');
  });

  it('given a step held mid-run, when approved, then the step approval is granted', () => {
    const { receipts, view } = given((c) => {
      c.add('run.submitted', FIELDS.submitted());
      c.add('policy.decided', FIELDS.policy('allow'));
      c.add('run.scheduled', FIELDS.scheduled());
      c.add('sandbox.created', FIELDS.sandboxCreated());
      c.add('approval.requested', requested('step-0', 'step'));
    });
    expect(view.state).toBe('AWAITING_APPROVAL');
    const path = approvalPath(view, receipts, { actor: APPROVER, decision: 'approve' });
    expect(path.kind === 'grant' && path.requests.map((r) => [r.approval_id, r.scope])).toEqual([['step-0', 'step']]);
  });
});

describe('a step approval across two attempts (ADR 0035)', () => {
  /** Attempt 1 placed on w-b, its sandbox up and step 0 held for approval (`decide` it or not), then lost. */
  const lostWhileHeld = (c: RunChain, decide: 'granted' | 'undecided') => {
    c.add('run.submitted', FIELDS.submitted());
    c.add('policy.decided', FIELDS.policy('allow'));
    c.add('run.scheduled', { ...FIELDS.scheduled(), worker_id: 'w-b', lease_id: 'l1', attempt: 1 });
    c.add('sandbox.created', { ...FIELDS.sandboxCreated(), worker_id: 'w-b' });
    c.add('approval.requested', requested('step-0', 'step', '2026-01-01T00:00:06.000Z'));
    if (decide === 'granted') {
      c.add('approval.granted', { approval_id: 'step-0', approved_by: APPROVER });
      c.add('step.started', FIELDS.stepStarted());
    }
    c.add('run.retried', { ...FIELDS.retried(1, 0), worker_id: 'w-b', lease_id: 'l1' });
  };
  const heldAgain = (c: RunChain) => {
    c.add('run.scheduled', { ...FIELDS.scheduled(), worker_id: 'w-a', lease_id: 'l2', attempt: 2 });
    c.add('sandbox.created', { ...FIELDS.sandboxCreated(), worker_id: 'w-a' });
    c.add('approval.requested', requested('step-0', 'step', '2026-01-03T00:00:00.000Z'));
  };

  it('given step 0 granted in the lost attempt, when the next attempt asks again, then its own request is pending and a grant decides it', () => {
    const { receipts, view } = given((c) => {
      lostWhileHeld(c, 'granted');
      heldAgain(c);
    });
    const again = receipts.at(-1)!;
    expect(view.state).toBe('AWAITING_APPROVAL');
    expect(pendingApprovals(receipts).map((r) => r.seq)).toEqual([again.seq]);
    const path = approvalPath(view, receipts, { actor: APPROVER, decision: 'approve' });
    expect(path.kind === 'grant' && path.requests.map((r) => r.seq)).toEqual([again.seq]);
    // Its deadline is its own: the lost attempt's passed long ago.
    expect(expiredApprovals(view, receipts, Date.parse('2026-01-02T00:00:00.000Z'))).toEqual([]);
    expect(expiredApprovals(view, receipts, Date.parse('2026-01-03T00:00:00.000Z')).map((r) => r.seq)).toEqual([again.seq]);
  });

  it('given step 0 undecided when its attempt was lost, when read before and after the next attempt asks, then nothing of the lost attempt waits or expires', () => {
    const lost = given((c) => lostWhileHeld(c, 'undecided'));
    expect(lost.view.state).toBe('SUBMITTED');
    expect(pendingApprovals(lost.receipts)).toEqual([]);
    expect(approvalPath(lost.view, lost.receipts, { actor: APPROVER, decision: 'approve' }).kind).toBe('nothing_pending');
    const again = given((c) => {
      lostWhileHeld(c, 'undecided');
      heldAgain(c);
    });
    expect(pendingApprovals(again.receipts).map((r) => r.seq)).toEqual([again.receipts.at(-1)!.seq]);
    expect(expiredApprovals(again.view, again.receipts, Date.parse('2026-01-02T00:00:00.000Z'))).toEqual([]);
  });
});

describe('a step held for approval, in the lifecycle', () => {
  const heldStep = (c: RunChain) => {
    c.add('run.submitted', FIELDS.submitted());
    c.add('policy.decided', FIELDS.policy('allow'));
    c.add('run.scheduled', FIELDS.scheduled());
    c.add('sandbox.created', FIELDS.sandboxCreated());
    c.add('approval.requested', requested('step-0', 'step'));
  };

  it('given a grant, when the step starts, then the run is RUNNING again', () => {
    const { view } = given((c) => {
      heldStep(c);
      c.add('approval.granted', { approval_id: 'step-0', approved_by: APPROVER });
      c.add('step.started', FIELDS.stepStarted());
    });
    expect(view.state).toBe('RUNNING');
  });

  it('given a cancel while held, when the kept sandbox is torn down and the cancel answered, then CANCELLED (no fault)', () => {
    const { view } = given((c) => {
      heldStep(c);
      c.add('run.cancel_requested', FIELDS.cancelRequested());
      c.add('sandbox.destroyed', { ...FIELDS.sandboxDestroyed(), reason: 'cancelled' });
      c.add('run.cancelled', FIELDS.cancelled());
      c.add('run.sealed', FIELDS.sealed('CANCELLED'));
    });
    expect(view).toMatchObject({ state: 'CANCELLED', errorCode: null, sealed: true });
  });

  it('given a timeout while held, when the kept sandbox is torn down, then CANCELLED with E_NO_APPROVAL', () => {
    const { view } = given((c) => {
      heldStep(c);
      c.add('approval.rejected', { approval_id: 'step-0', rejected_by: 'runtime', cause: 'timeout' });
      c.add('sandbox.destroyed', { ...FIELDS.sandboxDestroyed(), reason: 'cancelled' });
      c.add('run.sealed', FIELDS.sealed('CANCELLED', 'E_NO_APPROVAL'));
    });
    expect(view).toMatchObject({ state: 'CANCELLED', errorCode: 'E_NO_APPROVAL', sealed: true });
  });
});

describe('expiredApprovals', () => {
  it('given approvals with different deadlines, when the clock passes one, then only that one has expired', () => {
    const { receipts, view } = given(held);
    expect(expiredApprovals(view, receipts, Date.parse('2026-01-01T00:00:29.999Z'))).toEqual([]);
    expect(expiredApprovals(view, receipts, Date.parse('2026-01-01T00:00:30.000Z')).map((r) => r.approval_id)).toEqual(['image']);
    expect(expiredApprovals(view, receipts, Date.parse('2026-01-03T00:00:00.000Z')).map((r) => r.approval_id)).toEqual(['egress', 'image']);
  });

  it('given a run that no longer waits, when the clock passes, then nothing expires', () => {
    const { receipts, view } = given((c) => {
      held(c);
      c.add('run.cancelled', FIELDS.cancelled());
    });
    expect(expiredApprovals(view, receipts, Date.parse('2027-01-01T00:00:00.000Z'))).toEqual([]);
  });
});

describe('the run view: budget fields', () => {
  it('given a run with a job, granted CPUs and a sandbox that came and went, when folded, then the view carries them', () => {
    const { view, receipts } = given((c) => {
      c.add('run.submitted', { ...FIELDS.submitted(), spec: { name: 'nightly build', job: 'nightly', steps: [{ argv: ['make'] }] } });
      c.add('policy.decided', { ...FIELDS.policy('allow'), caps: { wall_seconds: 60, memory_mib: 64, pids: 16, disk_mib: 16, cpus: 0.5 } });
      c.add('run.scheduled', FIELDS.scheduled());
      c.add('sandbox.created', FIELDS.sandboxCreated());
      c.add('sandbox.destroyed', FIELDS.sandboxDestroyed());
    });
    expect(view).toMatchObject({ job: 'nightly', cpus: 0.5, startedAt: receipts[3]!.ts, endedAt: receipts[4]!.ts });
  });

  it('given a denied run, when folded, then it was granted no CPUs and had no sandbox', () => {
    const { view } = given((c) => {
      c.add('run.submitted', FIELDS.submitted());
      c.add('policy.decided', FIELDS.policy('deny', 'E_BUDGET'));
    });
    expect(view).toMatchObject({ state: 'REJECTED', errorCode: 'E_BUDGET', job: null, cpus: null, startedAt: null, endedAt: null });
  });
});
