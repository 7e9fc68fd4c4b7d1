import { describe, expect, it } from 'vitest';
import { foldRun } from './evolve-run.js';
import type { RunView } from './evolve-run.js';
import { FIELDS, RunChain } from './run-chain.fixture.js';

/* The regression gate in the lifecycle (docs/adr/0004): a verification naming E_GATE_FAIL ends the run ROLLBACK. */

const SHA = (c: string) => c.repeat(64);

function gate(passed: boolean) {
  return {
    passed,
    patch_step: 1,
    patch_exit_code: 0,
    patch: { path: '/out/fix.diff', sha256: SHA('7'), rejected: !passed },
    checks: [{ id: 'tests-pass', before: 'holds', after: passed ? 'holds' : 'contradicted', result: passed ? 'held' : 'regressed' }],
  };
}

function executed(chain: RunChain): void {
  chain.add('run.submitted', FIELDS.submitted());
  chain.add('policy.decided', FIELDS.policy('allow'));
  chain.add('run.scheduled', FIELDS.scheduled());
  chain.add('sandbox.created', FIELDS.sandboxCreated());
  chain.add('step.started', FIELDS.stepStarted());
  chain.add('step.completed', FIELDS.stepCompleted(0));
  chain.add('sandbox.destroyed', FIELDS.sandboxDestroyed());
  chain.add('run.executed', FIELDS.executed(0));
  chain.add('kernel.facts', FIELDS.facts());
}

function fold(build: (chain: RunChain) => void): RunView {
  const chain = new RunChain();
  build(chain);
  const view = foldRun(chain.receipts);
  if (view === null) throw new Error('empty chain');
  return view;
}

describe('evolveRun: a regression gate', () => {
  it('given a gate that passed, when verified, graded and sealed, then the run is SEALED as usual', () => {
    const view = fold((chain) => {
      executed(chain);
      chain.add('verification.completed', { ...FIELDS.verified('SUPPORTS'), gate: gate(true) });
      chain.add('grade.recorded', FIELDS.graded(1, 1));
      chain.add('run.sealed', FIELDS.sealed('SEALED'));
    });
    expect(view).toMatchObject({ state: 'SEALED', errorCode: null, verdict: 'SUPPORTS', score: 1, sealed: true });
  });

  it('given a gate that failed, when verified, then the run is ROLLBACK E_GATE_FAIL with its verdict kept', () => {
    const view = fold((chain) => {
      executed(chain);
      chain.add('verification.completed', { ...FIELDS.verified('SUPPORTS'), gate: gate(false), error_code: 'E_GATE_FAIL' });
    });
    expect(view).toMatchObject({ state: 'ROLLBACK', errorCode: 'E_GATE_FAIL', verdict: 'SUPPORTS', score: null, sealed: false });
  });

  it('given a failed gate, when the seal names ROLLBACK E_GATE_FAIL, then the run is sealed in ROLLBACK', () => {
    const view = fold((chain) => {
      executed(chain);
      chain.add('verification.completed', { ...FIELDS.verified('REJECTED'), gate: gate(false), error_code: 'E_GATE_FAIL' });
      chain.add('run.sealed', FIELDS.sealed('ROLLBACK', 'E_GATE_FAIL'));
    });
    expect(view).toMatchObject({ state: 'ROLLBACK', errorCode: 'E_GATE_FAIL', verdict: 'REJECTED', sealed: true });
  });

  it('given a failed gate, when a seal says SEALED, then the seal disagrees with the chain: FAILED E_UNKNOWN_STATE', () => {
    const view = fold((chain) => {
      executed(chain);
      chain.add('verification.completed', { ...FIELDS.verified('SUPPORTS'), gate: gate(false), error_code: 'E_GATE_FAIL' });
      chain.add('run.sealed', FIELDS.sealed('SEALED'));
    });
    expect(view).toMatchObject({ state: 'FAILED', errorCode: 'E_UNKNOWN_STATE' });
  });

  it('given a failed gate, when a grade lands anyway, then it is a fault (a rolled-back run is not graded)', () => {
    const view = fold((chain) => {
      executed(chain);
      chain.add('verification.completed', { ...FIELDS.verified('SUPPORTS'), gate: gate(false), error_code: 'E_GATE_FAIL' });
      chain.add('grade.recorded', FIELDS.graded(1, 1));
    });
    expect(view).toMatchObject({ state: 'FAILED', errorCode: 'E_UNKNOWN_STATE' });
  });

  it('given a run not yet executed, when a verification naming E_GATE_FAIL lands, then it is a fault', () => {
    const view = fold((chain) => {
      chain.add('run.submitted', FIELDS.submitted());
      chain.add('verification.completed', { ...FIELDS.verified('SUPPORTS'), gate: gate(false), error_code: 'E_GATE_FAIL' });
    });
    expect(view).toMatchObject({ state: 'FAILED', errorCode: 'E_UNKNOWN_STATE' });
  });
});
