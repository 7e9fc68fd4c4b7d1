import { describe, expect, it } from 'vitest';
import { checkJobBudget } from './job-budget.js';

const runs = (n: number, seconds = 60) => Array.from({ length: n }, (_, i) => ({ runId: `run_${i}`, seconds }));

describe('checkJobBudget', () => {
  it('given a new job, when its first run is checked, then it fits with the whole budget left', () => {
    expect(checkJobBudget([], { job: 'nightly' })).toEqual({ ok: true, runs_used: 0, seconds_used: 0, remaining_runs: 5, remaining_seconds: 5400 });
  });

  it('given five runs used, when the sixth is checked, then it fits and is the last', () => {
    expect(checkJobBudget(runs(5), { job: 'nightly' })).toMatchObject({ ok: true, runs_used: 5, remaining_runs: 0, remaining_seconds: 5400 - 300 });
  });

  it('given six runs used, when a seventh is checked, then it is refused with E_BUDGET', () => {
    expect(checkJobBudget(runs(6), { job: 'nightly' })).toEqual({
      ok: false,
      error_code: 'E_BUDGET',
      reasons: ['job nightly: this would be run 7 of a job allowed 6 runs'],
    });
  });

  it('given 89 min 59 s used, when a run is checked, then it fits with one second left for the runtime to enforce', () => {
    const used = [{ runId: 'run_a', seconds: 90 * 60 - 1 }];
    expect(checkJobBudget(used, { job: 'j' })).toMatchObject({ ok: true, remaining_seconds: 1 });
  });

  it('given the 90 minutes used up, when a run is checked, then it is refused', () => {
    const used = [{ runId: 'run_a', seconds: 3000 }, { runId: 'run_b', seconds: 2400 }];
    expect(checkJobBudget(used, { job: 'j' })).toEqual({ ok: false, error_code: 'E_BUDGET', reasons: ['job j: 5400 s used of a job time of 5400 s'] });
  });

  it('given budgets above the frozen ones handed in directly, when checked, then the frozen ones still hold (I-6)', () => {
    expect(checkJobBudget(runs(6), { job: 'j' }, { runsPerJob: 100, jobMinutes: 1000 })).toMatchObject({ ok: false, error_code: 'E_BUDGET' });
  });

  it('given lower budgets, when checked, then they hold', () => {
    expect(checkJobBudget(runs(1), { job: 'j' }, { runsPerJob: 1, jobMinutes: 90 }).ok).toBe(false);
    expect(checkJobBudget(runs(1, 600), { job: 'j' }, { runsPerJob: 6, jobMinutes: 10 }).ok).toBe(false);
  });

  it('given the same run reported twice, when checked, then it counts once at its largest time', () => {
    const twice = [{ runId: 'run_a', seconds: 10 }, { runId: 'run_a', seconds: 30 }];
    expect(checkJobBudget(twice, { job: 'j' })).toMatchObject({ ok: true, runs_used: 1, seconds_used: 30 });
  });

  it('given a run whose time cannot be read, when checked, then it is refused (fail closed)', () => {
    const result = checkJobBudget([{ runId: 'run_a', seconds: Number.NaN }], { job: 'j' });
    expect(result).toEqual({ ok: false, error_code: 'E_BUDGET', reasons: ['job j: run run_a reports an unreadable time NaN'] });
  });

  it('given a spec with no job, when checked, then it is a job of its own and fits', () => {
    expect(checkJobBudget(runs(10), {})).toMatchObject({ ok: true, runs_used: 0 });
  });
});
