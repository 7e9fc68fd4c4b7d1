import { FixtureChain, retriedRunLifecycleEvents, runLifecycleEvents, sandboxSessionEvents } from '@cairn/persistence/testing';
import type { FixtureEvent } from '@cairn/persistence/testing';
import { describe, expect, it } from 'vitest';
import { checkInvariants, formatReport } from './invariants.js';
import type { InvariantInput } from './invariants.js';

const RUN = 'run_fault1';
const FAILED: FixtureEvent = { type: 'run.failed', actor: 'scheduler', fields: { error_code: 'E_WORKER_LOST', message: 'the lease expired' } };

function chainOf(id: string, events: FixtureEvent[]): Record<string, unknown>[] {
  const chain = new FixtureChain(id);
  return events.map((event) => chain.next(event));
}

/** A run as far as its first step started, then `rest`. */
function runUpToStep(rest: FixtureEvent[]): FixtureEvent[] {
  return [...runLifecycleEvents(RUN, 1).slice(0, 5), ...rest];
}

function input(chains: Record<string, Record<string, unknown>[]>, extra: Partial<InvariantInput> = {}): InvariantInput {
  return { chains: new Map(Object.entries(chains)), acknowledged: Object.keys(chains), ...extra };
}

describe('checkInvariants', () => {
  it('finds nothing wrong with a sealed run and a closed sandbox session, and says what it could not check', () => {
    const report = checkInvariants(input({ [RUN]: chainOf(RUN, runLifecycleEvents(RUN, 2)), sbx_fault1: chainOf('sbx_fault1', sandboxSessionEvents('sbx_fault1')) }));
    expect(report.ok, formatReport(report)).toBe(true);
    expect(report.invariants.R).toEqual({ checked: false, ok: true, findings: [] });
    expect(report.invariants.P.checked).toBe(false);
    expect(report.chains).toEqual({ [RUN]: 14, sbx_fault1: 8 });
  });

  it('L: an acknowledged run the log does not hold, or whose chain does not start at its submission', () => {
    const headless = chainOf(RUN, runLifecycleEvents(RUN, 1)).slice(1);
    const report = checkInvariants({ chains: new Map([[RUN, headless]]), acknowledged: [RUN, 'run_missing'], mustEnd: [] });
    expect(report.invariants.L.findings).toEqual([
      `${RUN}: the chain does not start with its run.submitted at seq 1 (found policy.decided at 2)`,
      'run_missing: acknowledged, but the log holds no chain for it',
    ]);
    expect(report.ok).toBe(false);
  });

  it('T: a step recorded after the run failed, and a run that never ended', () => {
    const late = runLifecycleEvents(RUN, 1).find((e) => e.type === 'step.completed')!;
    const report = checkInvariants(
      input({
        [RUN]: chainOf(RUN, runUpToStep([FAILED, late, { type: 'sandbox.destroyed', actor: 'runtime', fields: { container_name: `cairn-${RUN}`, verified_gone: true, reason: 'failed' } }])),
        run_open: chainOf('run_open', runLifecycleEvents('run_open', 1).slice(0, 5)),
      }),
    );
    expect(report.invariants.T.findings).toEqual([`${RUN}: step.completed by runtime at seq 7, after the run ended FAILED at seq 6`, 'run_open: never reached a terminal state (last: step.started)']);
    // The teardown's record after the end is allowed (I-8); D and C still hold.
    expect(report.invariants.D.ok).toBe(true);
    expect(report.invariants.C.ok).toBe(true);
  });

  it('T and D: a double terminal (failed, then cancelled)', () => {
    const cancelled: FixtureEvent = { type: 'run.cancelled', actor: 'runtime', fields: { cancelled_by: 'key:k1', error_code: 'E_WORKER_LOST' } };
    const report = checkInvariants(input({ [RUN]: chainOf(RUN, runUpToStep([FAILED, cancelled])) }));
    expect(report.invariants.T.findings).toEqual([`${RUN}: a second ending, run.cancelled by runtime at seq 7, after run.failed at seq 6 (FAILED)`]);
    expect(report.invariants.D.findings).toEqual([`${RUN}: 2 ending receipts (run.failed@6, run.cancelled@7)`]);
  });

  it('D: a second sandbox for one placement, a step run twice, an exec op run twice, more containers than placements', () => {
    const events = runLifecycleEvents(RUN, 1);
    const doubled = [...events.slice(0, 5), events[3]!, events[4]!, ...events.slice(5)];
    const session = sandboxSessionEvents('sbx_fault2');
    const exec = session.find((e) => e.type === 'sandbox.exec.started')!;
    const execAt = session.indexOf(exec);
    const report = checkInvariants(
      input(
        { [RUN]: chainOf(RUN, doubled), sbx_fault2: chainOf('sbx_fault2', [...session.slice(0, execAt + 1), exec, ...session.slice(execAt + 1)]) },
        { containersCreated: new Map([[RUN, ['cairn-a', 'cairn-b']], ['run_unknown', ['cairn-c']]]) },
      ),
    );
    expect(report.invariants.D.findings).toEqual([
      `${RUN}: a second sandbox.created (cairn-${RUN}) for one attempt, at seq 6`,
      `${RUN}: step 0 started twice (again at seq 7)`,
      `${RUN}: 2 containers created (cairn-a, cairn-b) for 1 placement(s)`,
      `sbx_fault2: exec ${String(exec.fields.exec_id)} started twice (again at seq ${execAt + 2})`,
      'run_unknown: containers created (cairn-c) for a chain the log does not hold',
    ]);
  });

  it('D per attempt (ADR 0035): a run retried once runs its steps again in its second attempt, once, and every invariant holds', () => {
    const events = retriedRunLifecycleEvents(RUN, 2);
    const report = checkInvariants(input({ [RUN]: chainOf(RUN, events) }, { containersCreated: new Map([[RUN, [`cairn-${RUN}-a1`, `cairn-${RUN}-a2`]]]) }));
    expect(report.ok, formatReport(report)).toBe(true);
  });

  it('D per attempt: a step run twice within the second attempt of a retried run is found', () => {
    const events = retriedRunLifecycleEvents(RUN, 2);
    const second = events.findLastIndex((e) => e.type === 'step.completed' && e.fields['step_index'] === 0);
    const doubled = [...events.slice(0, second + 1), events[second - 1]!, events[second]!, ...events.slice(second + 1)];
    const report = checkInvariants(input({ [RUN]: chainOf(RUN, doubled) }));
    expect(report.invariants.D.findings).toEqual([`${RUN}: step 0 started twice (again at seq ${second + 2})`, `${RUN}: step 0 completed twice (again at seq ${second + 3})`]);
  });

  it('C: a receipt whose hash does not recompute, and one that breaks its contract', () => {
    const chain = chainOf(RUN, runLifecycleEvents(RUN, 1));
    const tampered = chain.map((r, i) => (i === 4 ? { ...r, tool: 'rm' } : r));
    const report = checkInvariants(input({ [RUN]: tampered }));
    expect(report.invariants.C.findings).toEqual([expect.stringMatching(new RegExp(`^${RUN}: E_CHAIN_BROKEN at seq 5 \\(hash_mismatch\\)`))]);
    const broken = chainOf(RUN, [...runLifecycleEvents(RUN, 1).slice(0, 3), { type: 'sandbox.created', actor: 'runtime', fields: { container_name: 42 } }]);
    expect(checkInvariants(input({ [RUN]: broken }, { mustEnd: [] })).invariants.C.findings).toEqual([`${RUN}: 1 receipt(s) break their contract`]);
  });

  it('R: whatever is left, each named', () => {
    const report = checkInvariants(
      input({}, { leftovers: { containers: ['cairn-run_x-1 (running)'], networks: ['cairn-net-x'], leases: ['run_x (run_x:1, w1)'], queueEntries: ['run_y'] } }),
    );
    expect(report.invariants.R).toEqual({
      checked: true,
      ok: false,
      findings: ['container left: cairn-run_x-1 (running)', 'network left: cairn-net-x', 'lease left: run_x (run_x:1, w1)', 'placement queue entry left: run_y'],
    });
  });

  it('P: a projected row that differs from the rebuild, and a row only one side has', () => {
    const report = checkInvariants(
      input(
        {},
        {
          projections: {
            live: { runs: [{ run_id: 'run_a', state: 'SEALED' }], evidence_events: [{ stream_seq: 1 }, { stream_seq: 2 }] },
            rebuilt: { runs: [{ run_id: 'run_a', state: 'FAILED' }], evidence_events: [{ stream_seq: 1 }] },
          },
        },
      ),
    );
    expect(report.invariants.P.findings).toEqual([
      'runs: row 0 differs: live {"run_id":"run_a","state":"SEALED"} ≠ rebuilt {"run_id":"run_a","state":"FAILED"}',
      'evidence_events: 2 live rows, 1 rebuilt',
      'evidence_events: row 1 differs: live {"stream_seq":2} ≠ rebuilt none',
    ]);
    expect(formatReport(report)).toContain('P projections equal a fresh rebuild: FAILED');
  });
});
