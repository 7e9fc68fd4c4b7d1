import { describe, expect, it } from 'vitest';
import { evolveRun, foldRun, initialRunView, type RunView } from './evolve-run.js';
import { FIELDS, RunChain } from './run-chain.fixture.js';
import { canTransition, isTerminal, RUN_TRANSITIONS } from './run-transitions.js';
import { RUN_STATES } from '@cairn/contracts';

/** Given a chain built by `given`, when it is folded, then the view is returned. */
function given(build: (chain: RunChain) => void): { chain: RunChain; view: RunView } {
  const chain = new RunChain();
  build(chain);
  const view = foldRun(chain.receipts);
  if (view === null) throw new Error('empty chain');
  return { chain, view };
}

/** A run that has been submitted, allowed, scheduled and started, with one step that exited `exit`. */
function ranOneStep(chain: RunChain, exit = 0): void {
  chain.add('run.submitted', FIELDS.submitted());
  chain.add('policy.decided', FIELDS.policy('allow'));
  chain.add('run.scheduled', FIELDS.scheduled());
  chain.add('sandbox.created', FIELDS.sandboxCreated());
  chain.add('step.started', FIELDS.stepStarted());
  chain.add('step.completed', FIELDS.stepCompleted(exit));
}

function executedAndDestroyed(chain: RunChain, exit = 0): void {
  ranOneStep(chain, exit);
  chain.add('sandbox.destroyed', FIELDS.sandboxDestroyed());
  chain.add('run.executed', FIELDS.executed(exit));
}

describe('evolveRun: the happy path', () => {
  it('given a full lifecycle, when folded, then the run is SEALED with its verdict and grade', () => {
    const states: string[] = [];
    const chain = new RunChain();
    let view = initialRunView();
    const step = (type: string, fields: Record<string, unknown>) => {
      view = evolveRun(view, chain.add(type, fields));
      states.push(view.state);
    };
    step('run.submitted', FIELDS.submitted());
    step('policy.decided', FIELDS.policy('allow'));
    step('run.scheduled', FIELDS.scheduled());
    step('sandbox.created', FIELDS.sandboxCreated());
    step('step.started', FIELDS.stepStarted());
    step('step.completed', FIELDS.stepCompleted(0));
    step('sandbox.destroyed', FIELDS.sandboxDestroyed());
    step('run.executed', FIELDS.executed(0));
    step('kernel.facts', FIELDS.facts());
    step('verification.completed', FIELDS.verified('SUPPORTS'));
    step('grade.recorded', FIELDS.graded(3, 4));
    step('run.sealed', FIELDS.sealed('SEALED'));

    expect(states).toEqual([
      'SUBMITTED',
      'SUBMITTED',
      'SCHEDULED',
      'RUNNING',
      'RUNNING',
      'RUNNING',
      'RUNNING',
      'EXECUTED',
      'EXECUTED',
      'VERIFIED',
      'GRADED',
      'SEALED',
    ]);
    const last = chain.receipts.at(-1)!;
    expect(view).toEqual({
      runId: 'run_fixture1',
      tenant: 'acme',
      name: 'unit tests',
      job: null,
      state: 'SEALED',
      errorCode: null,
      verdict: 'SUPPORTS',
      score: 3,
      maxScore: 4,
      upperBound: 3,
      createdAt: chain.receipts[0]!.ts,
      updatedAt: last.ts,
      lastSeq: 12,
      headHash: last.hash,
      eventCount: 12,
      sealed: true,
      cpus: null,
      startedAt: chain.receipts[3]!.ts,
      endedAt: chain.receipts[6]!.ts,
      placed: true,
    });
  });

  it('given a step that exits non-zero, when the run completes, then it is still SEALED (a low score, not a failure)', () => {
    const { view } = given((chain) => {
      executedAndDestroyed(chain, 1);
      chain.add('verification.completed', FIELDS.verified('REJECTED'));
      chain.add('grade.recorded', FIELDS.graded(0, 4));
      chain.add('run.sealed', FIELDS.sealed('SEALED'));
    });
    expect(view).toMatchObject({ state: 'SEALED', errorCode: null, verdict: 'REJECTED', score: 0, sealed: true });
  });

  it('given a held run, when approved and scheduled, then it goes AWAITING_APPROVAL → SCHEDULED', () => {
    const { view: held } = given((chain) => {
      chain.add('run.submitted', FIELDS.submitted());
      chain.add('policy.decided', FIELDS.policy('hold', 'E_NO_APPROVAL'));
      chain.add('approval.requested', FIELDS.approvalRequested('run'));
      chain.add('approval.granted', FIELDS.approvalGranted());
    });
    expect(held.state).toBe('AWAITING_APPROVAL');
    const { view } = given((chain) => {
      chain.add('run.submitted', FIELDS.submitted());
      chain.add('policy.decided', FIELDS.policy('hold'));
      chain.add('approval.granted', FIELDS.approvalGranted());
      chain.add('run.scheduled', FIELDS.scheduled());
    });
    expect(view).toMatchObject({ state: 'SCHEDULED', errorCode: null });
  });

  it('given an apply step held mid-run, when approved, then the next step resumes RUNNING', () => {
    const { view } = given((chain) => {
      ranOneStep(chain);
      chain.add('approval.requested', FIELDS.approvalRequested('step'));
      chain.add('approval.granted', FIELDS.approvalGranted());
      chain.add('step.started', FIELDS.stepStarted());
    });
    expect(view.state).toBe('RUNNING');
  });

  it('given a graded run, when a second grade lands, then the first grade wins', () => {
    const { view } = given((chain) => {
      executedAndDestroyed(chain);
      chain.add('verification.completed', FIELDS.verified('SUPPORTS'));
      chain.add('grade.recorded', FIELDS.graded(2, 4));
      chain.add('grade.recorded', FIELDS.graded(4, 4));
    });
    expect(view).toMatchObject({ state: 'GRADED', score: 2, maxScore: 4 });
  });

  it('given a degraded judge, when grade.failed then a grade is recorded, then the run is GRADED', () => {
    const { view } = given((chain) => {
      executedAndDestroyed(chain);
      chain.add('verification.completed', FIELDS.verified('INCONCLUSIVE'));
      chain.add('grade.failed', FIELDS.gradeFailed());
      chain.add('grade.recorded', FIELDS.graded(1, 2));
    });
    expect(view).toMatchObject({ state: 'GRADED', verdict: 'INCONCLUSIVE', score: 1 });
  });
});

describe('evolveRun: failure paths', () => {
  it.each([
    ['E_POLICY_DENIED' as const],
    ['E_BUDGET' as const],
  ])('given a submitted run, when policy denies with %s, then it is REJECTED and sealed REJECTED', (code) => {
    const { view } = given((chain) => {
      chain.add('run.submitted', FIELDS.submitted());
      chain.add('policy.decided', FIELDS.policy('deny', code));
      chain.add('run.sealed', FIELDS.sealed('REJECTED', code));
    });
    expect(view).toMatchObject({ state: 'REJECTED', errorCode: code, sealed: true });
  });

  it.each([
    ['E_TIMEOUT', 'ROLLBACK'],
    ['E_MEM_LIMIT', 'ROLLBACK'],
    ['E_PROC_LIMIT', 'ROLLBACK'],
    ['E_DISK_LIMIT', 'ROLLBACK'],
    ['E_SECRET_SEEN', 'ROLLBACK'],
    ['E_GATE_FAIL', 'ROLLBACK'],
    ['E_BUDGET', 'ROLLBACK'],
    ['E_IMAGE_PULL', 'FAILED'],
    ['E_SANDBOX_START', 'FAILED'],
    ['E_WORKER_LOST', 'FAILED'],
    ['E_CHAIN_BROKEN', 'FAILED'],
    ['E_RUNTIME_ABSENT', 'FAILED'],
  ])('given a running run, when run.failed %s, then it ends %s, keeps the code through teardown and seal', (code, state) => {
    const { view } = given((chain) => {
      ranOneStep(chain);
      chain.add('run.failed', FIELDS.failed(code));
      chain.add('sandbox.destroyed', { ...FIELDS.sandboxDestroyed(), reason: 'failed' });
      chain.add('run.sealed', FIELDS.sealed(state, code));
    });
    expect(view).toMatchObject({ state, errorCode: code, sealed: true });
  });

  it('given a scheduled run, when the job budget runs out before it starts, then it is REJECTED with E_BUDGET', () => {
    const { view } = given((chain) => {
      chain.add('run.submitted', FIELDS.submitted());
      chain.add('policy.decided', FIELDS.policy('allow'));
      chain.add('run.scheduled', FIELDS.scheduled());
      chain.add('run.failed', FIELDS.failed('E_BUDGET'));
    });
    expect(view).toMatchObject({ state: 'REJECTED', errorCode: 'E_BUDGET' });
  });

  it('given a step stopped by its time cap, when its receipt, run.failed and run.rolled_back land, then ROLLBACK E_TIMEOUT', () => {
    const { view } = given((chain) => {
      ranOneStep(chain);
      chain.add('step.started', FIELDS.stepStarted());
      chain.add('step.completed', { ...FIELDS.stepCompleted(null, 'E_TIMEOUT'), signal: 'SIGKILL', limits_hit: ['wall_time'] });
      chain.add('run.failed', FIELDS.failed('E_TIMEOUT'));
      chain.add('run.rolled_back', FIELDS.rolledBack('E_TIMEOUT'));
      chain.add('sandbox.destroyed', FIELDS.sandboxDestroyed());
      chain.add('run.sealed', FIELDS.sealed('ROLLBACK', 'E_TIMEOUT'));
    });
    expect(view).toMatchObject({ state: 'ROLLBACK', errorCode: 'E_TIMEOUT', sealed: true });
  });

  it('given a verified run, when the regression gate rolls it back, then ROLLBACK E_GATE_FAIL', () => {
    const { view } = given((chain) => {
      executedAndDestroyed(chain);
      const gate = {
        passed: false,
        patch_step: 0,
        patch_exit_code: 0,
        patch: { path: '/out/fix.diff', sha256: '7'.repeat(64), rejected: true },
        checks: [{ id: 'tests-pass', before: 'holds', after: 'contradicted', result: 'regressed' }],
      };
      chain.add('verification.completed', { ...FIELDS.verified('REJECTED'), gate, error_code: 'E_GATE_FAIL' });
      chain.add('run.rolled_back', FIELDS.rolledBack('E_GATE_FAIL'));
    });
    expect(view).toMatchObject({ state: 'ROLLBACK', errorCode: 'E_GATE_FAIL' });
  });

  it('given a held run, when the approval is rejected, then it is CANCELLED with E_NO_APPROVAL', () => {
    const { view } = given((chain) => {
      chain.add('run.submitted', FIELDS.submitted());
      chain.add('policy.decided', FIELDS.policy('hold'));
      chain.add('approval.requested', FIELDS.approvalRequested('run'));
      chain.add('approval.rejected', FIELDS.approvalRejected());
      chain.add('run.sealed', FIELDS.sealed('CANCELLED', 'E_NO_APPROVAL'));
    });
    expect(view).toMatchObject({ state: 'CANCELLED', errorCode: 'E_NO_APPROVAL', sealed: true });
  });

  it('given a running run, when a person cancels it, then it is CANCELLED without an error code', () => {
    const { view } = given((chain) => {
      ranOneStep(chain);
      chain.add('run.cancelled', FIELDS.cancelled());
      chain.add('sandbox.destroyed', { ...FIELDS.sandboxDestroyed(), reason: 'cancelled' });
    });
    expect(view).toMatchObject({ state: 'CANCELLED', errorCode: null, sealed: false });
  });

  it('given a running run, when egress is denied and a secret redacted, then it keeps RUNNING', () => {
    const { view } = given((chain) => {
      ranOneStep(chain);
      chain.add('egress.denied', { host: 'evil.example', port: 443, reason: 'not_allowlisted', error_code: 'E_EGRESS' });
      chain.add('secret.redacted', { where: 'stdout', step_index: 0, pattern: 'aws-key', count: 1 });
    });
    expect(view.state).toBe('RUNNING');
  });
});

describe('evolveRun: a cancel requested while the run runs', () => {
  it('given a running run, when a cancel is requested, then it keeps RUNNING until the runtime records the teardown and run.cancelled', () => {
    const states: string[] = [];
    const chain = new RunChain();
    let view = initialRunView();
    const step = (type: string, fields: Record<string, unknown>) => {
      view = evolveRun(view, chain.add(type, fields));
      states.push(view.state);
    };
    step('run.submitted', FIELDS.submitted());
    step('policy.decided', FIELDS.policy('allow'));
    step('run.scheduled', FIELDS.scheduled());
    step('sandbox.created', FIELDS.sandboxCreated());
    step('step.started', FIELDS.stepStarted());
    step('run.cancel_requested', FIELDS.cancelRequested());
    step('step.completed', { ...FIELDS.stepCompleted(null), signal: 'SIGKILL' });
    step('sandbox.destroyed', { ...FIELDS.sandboxDestroyed(), reason: 'cancelled' });
    step('run.cancelled', FIELDS.cancelled());
    step('run.sealed', FIELDS.sealed('CANCELLED'));
    expect(states.slice(3)).toEqual(['RUNNING', 'RUNNING', 'RUNNING', 'RUNNING', 'RUNNING', 'CANCELLED', 'CANCELLED']);
    expect(view).toMatchObject({ state: 'CANCELLED', errorCode: null, sealed: true });
  });

  it('given a cancel requested, when receipts already in flight land (a sandbox, the next step), then no fault', () => {
    const { view } = given((chain) => {
      chain.add('run.submitted', FIELDS.submitted());
      chain.add('policy.decided', FIELDS.policy('allow'));
      chain.add('run.scheduled', FIELDS.scheduled());
      chain.add('run.cancel_requested', FIELDS.cancelRequested());
      chain.add('sandbox.created', FIELDS.sandboxCreated());
      chain.add('step.started', FIELDS.stepStarted());
      chain.add('step.completed', FIELDS.stepCompleted(0));
    });
    expect(view).toMatchObject({ state: 'RUNNING', errorCode: null });
  });

  it.each([['SUBMITTED'], ['AWAITING_APPROVAL'], ['SCHEDULED']])('given a run %s, when a cancel is requested, then it keeps its state', (state) => {
    const { view } = given((chain) => {
      chain.add('run.submitted', FIELDS.submitted());
      if (state !== 'SUBMITTED') chain.add('policy.decided', FIELDS.policy(state === 'AWAITING_APPROVAL' ? 'hold' : 'allow'));
      if (state === 'SCHEDULED') chain.add('run.scheduled', FIELDS.scheduled());
      chain.add('run.cancel_requested', FIELDS.cancelRequested());
    });
    expect(view).toMatchObject({ state, errorCode: null });
  });

  it('given a cancel requested, when the worker is lost, then run.cancelled with E_WORKER_LOST ends it CANCELLED with that code', () => {
    const { view } = given((chain) => {
      ranOneStep(chain);
      chain.add('run.cancel_requested', FIELDS.cancelRequested());
      chain.add('run.cancelled', FIELDS.cancelled('E_WORKER_LOST'));
      chain.add('run.sealed', FIELDS.sealed('CANCELLED', 'E_WORKER_LOST'));
    });
    expect(view).toMatchObject({ state: 'CANCELLED', errorCode: 'E_WORKER_LOST', sealed: true });
  });

  it('given a cancel requested, when the run fails (a cap hit first), then it ends as the failure says', () => {
    const { view } = given((chain) => {
      ranOneStep(chain);
      chain.add('run.cancel_requested', FIELDS.cancelRequested());
      chain.add('run.failed', FIELDS.failed('E_TIMEOUT'));
    });
    expect(view).toMatchObject({ state: 'ROLLBACK', errorCode: 'E_TIMEOUT' });
  });

  it.each([
    ['an executed run', (c: RunChain) => executedAndDestroyed(c)],
    ['a cancelled run', (c: RunChain) => {
      ranOneStep(c);
      c.add('run.cancelled', FIELDS.cancelled());
    }],
  ])('given %s, when a cancel is requested, then FAILED with E_UNKNOWN_STATE (nothing is left to stop)', (_what, build) => {
    const { view } = given((chain) => {
      build(chain);
      chain.add('run.cancel_requested', FIELDS.cancelRequested());
    });
    expect(view).toMatchObject({ state: 'FAILED', errorCode: 'E_UNKNOWN_STATE' });
  });

  it('given a run cancelled at once, when a runtime receipt lands after it, then FAILED with E_UNKNOWN_STATE (why runtimes append guarded)', () => {
    const { view } = given((chain) => {
      chain.add('run.submitted', FIELDS.submitted());
      chain.add('policy.decided', FIELDS.policy('allow'));
      chain.add('run.scheduled', FIELDS.scheduled());
      chain.add('run.cancelled', FIELDS.cancelled());
      chain.add('sandbox.created', FIELDS.sandboxCreated());
    });
    expect(view).toMatchObject({ state: 'FAILED', errorCode: 'E_UNKNOWN_STATE' });
  });
});

describe('evolveRun: faults stop the run (I-5)', () => {
  it('given a running run, when a receipt of an unknown type lands, then FAILED with E_UNKNOWN_STATE', () => {
    const { view } = given((chain) => {
      ranOneStep(chain);
      chain.add('step.teleported', { where: 'mars' });
    });
    expect(view).toMatchObject({ state: 'FAILED', errorCode: 'E_UNKNOWN_STATE', lastSeq: 7, eventCount: 7 });
  });

  it('given a sealed run, when any receipt follows the seal, then FAILED with E_UNKNOWN_STATE and still sealed', () => {
    const { view } = given((chain) => {
      executedAndDestroyed(chain);
      chain.add('verification.completed', FIELDS.verified('SUPPORTS'));
      chain.add('grade.recorded', FIELDS.graded(1, 1));
      chain.add('run.sealed', FIELDS.sealed('SEALED'));
      chain.add('alert.raised', { severity: 'warning', error_code: 'E_INTERNAL', message: 'late' });
    });
    expect(view).toMatchObject({ state: 'FAILED', errorCode: 'E_UNKNOWN_STATE', sealed: true });
  });

  it('given a failed-and-sealed run, when another seal follows, then FAILED with E_UNKNOWN_STATE', () => {
    const { view } = given((chain) => {
      ranOneStep(chain);
      chain.add('run.failed', FIELDS.failed('E_TIMEOUT'));
      chain.add('run.sealed', FIELDS.sealed('ROLLBACK', 'E_TIMEOUT'));
      chain.add('run.sealed', FIELDS.sealed('ROLLBACK', 'E_TIMEOUT'));
    });
    expect(view).toMatchObject({ state: 'FAILED', errorCode: 'E_UNKNOWN_STATE' });
  });

  it.each([
    ['run.executed before any step', (c: RunChain) => c.add('run.executed', FIELDS.executed(0))],
    ['a grade before verification', (c: RunChain) => c.add('grade.recorded', FIELDS.graded(1, 1))],
    ['a seal while nothing has run', (c: RunChain) => c.add('run.sealed', FIELDS.sealed('SEALED'))],
    ['a second run.submitted', (c: RunChain) => c.add('run.submitted', FIELDS.submitted())],
    ['a sandbox-session receipt', (c: RunChain) => c.add('sandbox.expired', { ttl_seconds: 60, expires_at: '2026-01-01T00:01:00.000Z' })],
  ])('given a submitted run, when %s, then FAILED with E_UNKNOWN_STATE', (_what, when) => {
    const { view } = given((chain) => {
      chain.add('run.submitted', FIELDS.submitted());
      when(chain);
    });
    expect(view).toMatchObject({ state: 'FAILED', errorCode: 'E_UNKNOWN_STATE' });
  });

  it('given a failed run, when the seal names a different final state, then FAILED with E_UNKNOWN_STATE and sealed', () => {
    const { view } = given((chain) => {
      ranOneStep(chain);
      chain.add('run.failed', FIELDS.failed('E_TIMEOUT'));
      chain.add('run.sealed', FIELDS.sealed('FAILED', 'E_TIMEOUT'));
    });
    expect(view).toMatchObject({ state: 'FAILED', errorCode: 'E_UNKNOWN_STATE', sealed: true });
  });

  it('given a denied run, when it is scheduled anyway, then FAILED with E_UNKNOWN_STATE', () => {
    const { view } = given((chain) => {
      chain.add('run.submitted', FIELDS.submitted());
      chain.add('policy.decided', FIELDS.policy('deny', 'E_POLICY_DENIED'));
      chain.add('run.scheduled', FIELDS.scheduled());
    });
    expect(view).toMatchObject({ state: 'FAILED', errorCode: 'E_UNKNOWN_STATE' });
  });

  it('given an empty chain, when the first receipt is not run.submitted, then FAILED with E_UNKNOWN_STATE', () => {
    const chain = new RunChain();
    const view = evolveRun(null, chain.add('run.scheduled', FIELDS.scheduled()));
    expect(view).toMatchObject({ state: 'FAILED', errorCode: 'E_UNKNOWN_STATE', name: null, lastSeq: 1 });
  });

  it('given a run, when a receipt skips a seq or names the wrong prev_hash, then FAILED with E_CHAIN_BROKEN', () => {
    const chain = new RunChain();
    const first = chain.add('run.submitted', FIELDS.submitted());
    const skipped = chain.add('policy.decided', FIELDS.policy('allow'));
    const third = chain.add('run.scheduled', FIELDS.scheduled());
    const view = evolveRun(null, first);
    expect(evolveRun(view, third)).toMatchObject({ state: 'FAILED', errorCode: 'E_CHAIN_BROKEN', lastSeq: 3 });
    expect(evolveRun(view, { ...skipped, prev_hash: '1'.repeat(64) })).toMatchObject({ state: 'FAILED', errorCode: 'E_CHAIN_BROKEN' });
  });

  it('given a view, when a receipt is redelivered, then the view is unchanged', () => {
    const { chain, view } = given(ranOneStep);
    expect(evolveRun(view, chain.receipts[2]!)).toBe(view);
  });

  it('given a view, when a receipt of another chain is folded in, then it throws (a projector bug, not run evidence)', () => {
    const { view } = given(ranOneStep);
    const other = new RunChain('run_other');
    other.add('run.submitted', FIELDS.submitted());
    expect(() => evolveRun(view, other.receipts[0]!)).toThrow(/run_other/);
  });

  it('given the same receipts, when folded twice, then the views are equal (rebuild = live, I-10)', () => {
    const { chain, view } = given((c) => {
      executedAndDestroyed(c);
      c.add('bogus.event', {});
      c.add('run.sealed', FIELDS.sealed('FAILED', 'E_UNKNOWN_STATE'));
    });
    expect(foldRun(JSON.parse(JSON.stringify(chain.receipts)) as typeof chain.receipts)).toEqual(view);
    expect(view).toMatchObject({ state: 'FAILED', errorCode: 'E_UNKNOWN_STATE', sealed: true });
  });
});

describe('the transition table', () => {
  it('has no way out of a terminal state, and a way to FAILED from every other state', () => {
    for (const state of RUN_STATES) {
      if (isTerminal(state)) expect(RUN_TRANSITIONS[state]).toEqual([]);
      else expect(canTransition(state, 'FAILED')).toBe(true);
    }
  });

  it('follows the lifecycle order and refuses skipping ahead', () => {
    expect(canTransition('SUBMITTED', 'SCHEDULED')).toBe(true);
    expect(canTransition('GRADED', 'SEALED')).toBe(true);
    expect(canTransition('SUBMITTED', 'RUNNING')).toBe(false);
    expect(canTransition('RUNNING', 'GRADED')).toBe(false);
    expect(canTransition('SEALED', 'FAILED')).toBe(false);
    expect(isTerminal('SEALED')).toBe(true);
    expect(isTerminal('GRADED')).toBe(false);
  });
});
