import { describe, expect, it } from 'vitest';
import { endProblem, formatLoadBench, loadHeld, minutesOption, runKind, stageDurations } from './load.bench.js';
import type { LoadOptions, RoundResult } from './load.bench.js';

const options: LoadOptions = { runs: 2, inFlight: 2, sessions: 1, execsPerSession: 1, sessionsInFlight: 1, rounds: 2 };
const round = (n: number, over: Partial<RoundResult> = {}): RoundResult => ({
  round: n,
  runs: { sealed: 2, failed: [], wallMs: 1000, perRunMs: [400, 600] },
  sessions: { done: 1, failed: [], execs: 1, wallMs: 500 },
  rssMiB: { runtime: 100 + n * 10 },
  invariants: { ok: true, text: 'invariants: all hold (3 chains)' },
  ...over,
});

describe('the load bench verdict', () => {
  it('holds only when every round sealed everything, kept every invariant, and nothing was left after cairn down', () => {
    expect(loadHeld(options, { rounds: [round(1), round(2)], leftAfterDown: [] })).toBe(true);
    expect(loadHeld(options, { rounds: [round(1), round(2)], leftAfterDown: ['cairn-pool-x'] })).toBe(false);
    expect(loadHeld(options, { rounds: [round(1), round(2, { invariants: { ok: false, text: 'R FAILED' } })], leftAfterDown: [] })).toBe(false);
    expect(loadHeld(options, { rounds: [round(1, { runs: { sealed: 1, failed: ['run_x ended FAILED'], wallMs: 1, perRunMs: [1] } })], leftAfterDown: [] })).toBe(false);
  });

  it('prints each round, the failures, and the memory climb across rounds', () => {
    const text = formatLoadBench(options, { rounds: [round(1), round(2, { runs: { sealed: 1, failed: ['run_x ended FAILED E_TIMEOUT'], wallMs: 1000, perRunMs: [500] } })], leftAfterDown: [] });
    expect(text).toContain('2/2 sealed in 1.0 s (2.00 runs/s)   per run p50 600 ms');
    expect(text).toContain('FAILED    run_x ended FAILED E_TIMEOUT');
    expect(text).toContain('memory from round 1 to 2: runtime +10 MiB');
    expect(text).toContain('after cairn down: no container left');
  });
});

describe('the load mix', () => {
  it('is one 20 s sleep and one cap hit in every ten runs, the rest instant', () => {
    const kinds = Array.from({ length: 200 }, (_, i) => runKind(i));
    expect(kinds.filter((k) => k === 'sleep')).toHaveLength(20);
    expect(kinds.filter((k) => k === 'cap')).toHaveLength(20);
    expect(kinds.filter((k) => k === 'instant')).toHaveLength(160);
  });

  it('wants a cap hit ROLLBACK E_TIMEOUT and every other run SEALED without an error', () => {
    expect(endProblem('cap', { runId: 'run_a', state: 'ROLLBACK', errorCode: 'E_TIMEOUT' })).toBeNull();
    expect(endProblem('instant', { runId: 'run_b', state: 'SEALED', errorCode: null })).toBeNull();
    expect(endProblem('cap', { runId: 'run_c', state: 'SEALED', errorCode: null })).toBe('run_c (cap) ended SEALED, not ROLLBACK E_TIMEOUT');
    expect(endProblem('sleep', { runId: 'run_d', state: 'FAILED', errorCode: 'E_WORKER_LOST' })).toBe('run_d (sleep) ended FAILED E_WORKER_LOST, not SEALED');
  });
});

describe('stage durations', () => {
  const at = (type: string, ms: number) => ({ type, ts: new Date(Date.UTC(2026, 0, 1) + ms).toISOString() });
  it('measures each stage between the receipts that open and close it', () => {
    const receipts = [at('run.submitted', 0), at('policy.decided', 5), at('run.scheduled', 12), at('sandbox.created', 40), at('step.started', 41), at('run.executed', 90), at('run.sealed', 130)];
    expect(stageDurations(receipts)).toEqual({ 'submitted → scheduled': 12, 'scheduled → running': 28, 'running → executed': 50, 'executed → sealed': 40 });
  });

  it('leaves out a stage a run never reached (a cap hit has no run.executed)', () => {
    expect(stageDurations([at('run.submitted', 0), at('run.scheduled', 10), at('sandbox.created', 30), at('run.failed', 2100), at('run.sealed', 2200)])).toEqual({
      'submitted → scheduled': 10,
      'scheduled → running': 20,
    });
  });
});

describe('the soak option', () => {
  it('reads --minutes or BENCH_LOAD_MINUTES, and refuses what is not a number of minutes', () => {
    expect(minutesOption(['node', 'load.bench.js', '--minutes', '30'], {})).toEqual({ minutes: 30 });
    expect(minutesOption(['node', 'load.bench.js'], { BENCH_LOAD_MINUTES: '2.5' })).toEqual({ minutes: 2.5 });
    expect(minutesOption(['node', 'load.bench.js'], {})).toEqual({});
    expect(() => minutesOption(['node', 'x', '--minutes', 'soon'], {})).toThrow('--minutes takes a number of minutes from 0 to 1440, not "soon"');
    expect(() => minutesOption(['node', 'x', '--minutes'], {})).toThrow();
  });
});

describe('the printed round', () => {
  it('shows the mix, each stage, the CPU per run and the file descriptors, and their climb', () => {
    const extra = (n: number): Partial<RoundResult> => ({
      runs: { sealed: 2, failed: [], wallMs: 1000, perRunMs: [400, 600], kinds: { instant: 1, cap: 1 } },
      stagesMs: { 'submitted → scheduled': [10, 30] },
      cpuPerRunMs: { runtime: 20, 'nats-server': 5.5 },
      fds: { runtime: 40 + n },
    });
    const text = formatLoadBench(options, { rounds: [round(1, extra(1)), round(2, extra(3))], leftAfterDown: [] });
    expect(text).toContain('  mix       1 instant, 1 cap');
    expect(text).toMatch(/stage {5}submitted → scheduled {4}p50 30 ms {2}p95 30 ms {2}p99 30 ms {2}\(n=2\)/);
    expect(text).toContain('  cpu/run   25.5 ms in all: runtime 20.0, nats-server 5.5');
    expect(text).toContain('  fds       runtime 43');
    expect(text).toContain('fds from round 1 to 2: runtime +2');
  });
});
