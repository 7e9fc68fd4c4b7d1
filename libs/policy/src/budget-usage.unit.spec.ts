import { describe, expect, it } from 'vitest';
import { summariseUsage } from './budget-usage.js';
import type { RunUsageRecord } from './budget-usage.js';
import { checkTenantBudget } from './tenant-budget.js';

const NOW = Date.parse('2026-12-01T12:00:00.000Z');
const at = (msAgo: number) => new Date(NOW - msAgo).toISOString();
const MIN = 60_000;
const HOUR = 60 * MIN;

function run(extra: Partial<RunUsageRecord> & Pick<RunUsageRecord, 'runId'>): RunUsageRecord {
  return { job: null, state: 'SEALED', cpus: 1, startedAt: null, endedAt: null, updatedAt: at(0), ...extra };
}

describe('summariseUsage: a job', () => {
  it('given runs of the job in every state, when summarised, then every admitted run counts and a REJECTED one does not', () => {
    const usage = summariseUsage(
      [
        run({ runId: 'run_a', job: 'nightly', state: 'SEALED', startedAt: at(30 * MIN), endedAt: at(20 * MIN) }),
        run({ runId: 'run_b', job: 'nightly', state: 'CANCELLED' }),
        run({ runId: 'run_c', job: 'nightly', state: 'REJECTED' }),
        run({ runId: 'run_d', job: 'nightly', state: 'AWAITING_APPROVAL' }),
        run({ runId: 'run_e', job: 'other', state: 'SEALED', startedAt: at(HOUR), endedAt: at(0) }),
        run({ runId: 'run_f', job: null, state: 'SEALED' }),
      ],
      'nightly',
      NOW,
    );
    expect(usage.jobRuns).toEqual([
      { runId: 'run_a', seconds: 600 },
      { runId: 'run_b', seconds: 0 },
      { runId: 'run_d', seconds: 0 },
    ]);
  });

  it('given a run of the job still running, when summarised, then its time runs up to now; one ended without a recorded teardown counts to its last receipt', () => {
    const usage = summariseUsage(
      [
        run({ runId: 'run_live', job: 'j', state: 'RUNNING', startedAt: at(5 * MIN) }),
        run({ runId: 'run_lost', job: 'j', state: 'FAILED', startedAt: at(10 * MIN), updatedAt: at(9 * MIN) }),
      ],
      'j',
      NOW,
    );
    expect(usage.jobRuns).toEqual([
      { runId: 'run_live', seconds: 300 },
      { runId: 'run_lost', seconds: 60 },
    ]);
  });

  it('given a start time that does not parse, when summarised, then the run reports an unreadable time (and the budget check refuses it)', () => {
    const usage = summariseUsage([run({ runId: 'run_x', job: 'j', startedAt: 'yesterday' })], 'j', NOW);
    expect(usage.jobRuns[0]?.seconds).toBeNaN();
  });

  it('given no job on the spec, when summarised, then no job runs are gathered', () => {
    expect(summariseUsage([run({ runId: 'run_a', job: 'j' })], undefined, NOW).jobRuns).toEqual([]);
  });
});

describe('summariseUsage: a tenant', () => {
  it('given runs in every state, when summarised, then undecided, held, scheduled and running ones are in flight', () => {
    const states = ['SUBMITTED', 'AWAITING_APPROVAL', 'SCHEDULED', 'RUNNING', 'EXECUTED', 'VERIFIED', 'GRADED', 'SEALED', 'FAILED', 'ROLLBACK', 'REJECTED', 'CANCELLED'] as const;
    const usage = summariseUsage(
      states.map((state, i) => run({ runId: `run_${i}`, state })),
      undefined,
      NOW,
    );
    expect(usage.tenant.concurrentRuns).toBe(4);
  });

  it('given runs inside, across and before the last 24 hours, when summarised, then CPU-seconds are granted CPUs × sandbox seconds inside the window', () => {
    const usage = summariseUsage(
      [
        run({ runId: 'run_in', cpus: 2, startedAt: at(2 * HOUR), endedAt: at(HOUR) }), // 2 × 3600
        run({ runId: 'run_across', cpus: 1, startedAt: at(25 * HOUR), endedAt: at(23 * HOUR) }), // 1 × 3600 inside
        run({ runId: 'run_before', cpus: 4, startedAt: at(30 * HOUR), endedAt: at(29 * HOUR) }), // outside
        run({ runId: 'run_live', state: 'RUNNING', cpus: 0.5, startedAt: at(10 * MIN) }), // 0.5 × 600
        run({ runId: 'run_denied', state: 'REJECTED', cpus: null }),
      ],
      undefined,
      NOW,
    );
    expect(usage.tenant.cpuSecondsToday).toBe(7200 + 3600 + 300);
  });
});

describe('checkTenantBudget', () => {
  it('given no tenant quota in the policy, when checked, then anything fits', () => {
    expect(checkTenantBudget({ concurrentRuns: 10_000, cpuSecondsToday: 1e9 }, {})).toEqual({ ok: true, remaining_cpu_seconds: null });
  });

  it('given two runs in flight of two allowed, when a third is checked, then it is refused with E_BUDGET', () => {
    expect(checkTenantBudget({ concurrentRuns: 2, cpuSecondsToday: 0 }, { tenantConcurrentRuns: 2 })).toEqual({
      ok: false,
      error_code: 'E_BUDGET',
      reasons: ['tenant: this would be run 3 in flight of the 2 allowed at once'],
    });
    expect(checkTenantBudget({ concurrentRuns: 1, cpuSecondsToday: 0 }, { tenantConcurrentRuns: 2 })).toMatchObject({ ok: true });
  });

  it('given the day’s CPU-seconds used up, when checked, then it is refused; otherwise what is left is handed on', () => {
    expect(checkTenantBudget({ concurrentRuns: 0, cpuSecondsToday: 3600 }, { tenantCpuSecondsPerDay: 3600 })).toMatchObject({
      ok: false,
      reasons: ['tenant: 3600 CPU-seconds used in the last 24 hours of the 3600 allowed'],
    });
    expect(checkTenantBudget({ concurrentRuns: 0, cpuSecondsToday: 3000 }, { tenantCpuSecondsPerDay: 3600 })).toEqual({ ok: true, remaining_cpu_seconds: 600 });
  });

  it('given usage that cannot be read, when checked, then it is refused (fail closed)', () => {
    expect(checkTenantBudget({ concurrentRuns: -1, cpuSecondsToday: 0 }, { tenantConcurrentRuns: 5 })).toMatchObject({ ok: false, error_code: 'E_BUDGET' });
    expect(checkTenantBudget({ concurrentRuns: 0, cpuSecondsToday: Number.NaN }, {})).toMatchObject({ ok: false });
  });
});
