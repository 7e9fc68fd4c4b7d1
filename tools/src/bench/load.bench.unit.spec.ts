import { describe, expect, it } from 'vitest';
import { formatLoadBench, loadHeld } from './load.bench.js';
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
