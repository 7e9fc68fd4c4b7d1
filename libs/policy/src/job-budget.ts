import { FROZEN_CAPS } from '@cairn/contracts';
import type { Budgets, RunSpec } from '@cairn/contracts';

/** What one earlier run of the job has used: wall-clock seconds so far (finished or still running). */
export interface JobRunUsage {
  runId: string;
  seconds: number;
}

export type JobBudgetCheck =
  | { ok: true; runs_used: number; seconds_used: number; remaining_runs: number; remaining_seconds: number }
  | { ok: false; error_code: 'E_BUDGET'; reasons: string[] };

const FROZEN_BUDGETS: Budgets = { runsPerJob: FROZEN_CAPS.runsPerJob, jobMinutes: FROZEN_CAPS.jobMinutes };

/**
 * Whether one more run fits its job's budget (PRODUCT.md: runs per job ≤ 6, job time ≤ 90 min,
 * or the policy's lower figures). `jobRuns` are the job's other admitted runs, not this one.
 * Refuses when the runs are used up or the time already is; otherwise says what remains, so the
 * runtime can stop the run when the job's time runs out mid-run (ROLLBACK, `E_BUDGET`).
 * A run that names no job is a job of its own.
 */
export function checkJobBudget(
  jobRuns: readonly JobRunUsage[],
  spec: Pick<RunSpec, 'job'>,
  budgets: Budgets = FROZEN_BUDGETS,
): JobBudgetCheck {
  // Belt and braces for I-6: budgets handed in directly still cannot raise the frozen ones.
  const maxRuns = Math.min(budgets.runsPerJob, FROZEN_BUDGETS.runsPerJob);
  const maxSeconds = Math.min(budgets.jobMinutes, FROZEN_BUDGETS.jobMinutes) * 60;
  const counted = spec.job === undefined ? [] : jobRuns;
  const reasons: string[] = [];
  for (const { runId, seconds } of counted) {
    // Fail closed: a time that cannot be read cannot be shown to fit.
    if (!Number.isFinite(seconds) || seconds < 0) reasons.push(`job ${spec.job}: run ${runId} reports an unreadable time ${seconds}`);
  }
  const runs = usageByRun(counted);
  const secondsUsed = [...runs.values()].reduce((sum, s) => sum + s, 0);
  if (runs.size + 1 > maxRuns) {
    reasons.push(`job ${spec.job}: this would be run ${runs.size + 1} of a job allowed ${maxRuns} runs`);
  }
  if (secondsUsed >= maxSeconds) {
    reasons.push(`job ${spec.job}: ${secondsUsed} s used of a job time of ${maxSeconds} s`);
  }
  if (reasons.length > 0) return { ok: false, error_code: 'E_BUDGET', reasons };
  return {
    ok: true,
    runs_used: runs.size,
    seconds_used: secondsUsed,
    remaining_runs: maxRuns - runs.size - 1,
    remaining_seconds: maxSeconds - secondsUsed,
  };
}

/** One entry per run: a usage reported twice (a redelivered record) counts once, at its largest. */
function usageByRun(jobRuns: readonly JobRunUsage[]): Map<string, number> {
  const runs = new Map<string, number>();
  for (const { runId, seconds } of jobRuns) {
    runs.set(runId, Math.max(runs.get(runId) ?? 0, seconds));
  }
  return runs;
}
