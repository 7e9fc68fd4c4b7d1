import type { TenantUsage } from './budget-usage.js';
import type { Budgets } from '@cairn/contracts';

export type TenantBudgetCheck =
  | {
      ok: true;
      /** CPU-seconds the tenant has left today; null when the policy sets no daily quota. */
      remaining_cpu_seconds: number | null;
    }
  | { ok: false; error_code: 'E_BUDGET'; reasons: string[] };

/**
 * Whether one more run of the tenant fits its quotas: runs in flight (`tenantConcurrentRuns`) and
 * CPU-seconds in the last 24 hours (`tenantCpuSecondsPerDay`). A quota the policy does not set is
 * no limit. A day already used up refuses the run; otherwise what is left is handed to the runtime,
 * which stops the run when it is spent (ROLLBACK, `E_BUDGET`).
 */
export function checkTenantBudget(usage: TenantUsage, budgets: Pick<Budgets, 'tenantConcurrentRuns' | 'tenantCpuSecondsPerDay'>): TenantBudgetCheck {
  const reasons: string[] = [];
  const { concurrentRuns, cpuSecondsToday } = usage;
  if (!Number.isInteger(concurrentRuns) || concurrentRuns < 0 || !Number.isFinite(cpuSecondsToday) || cpuSecondsToday < 0) {
    return { ok: false, error_code: 'E_BUDGET', reasons: [`tenant: usage cannot be read (${concurrentRuns} runs, ${cpuSecondsToday} CPU-seconds)`] };
  }
  const maxRuns = budgets.tenantConcurrentRuns;
  if (maxRuns !== undefined && concurrentRuns + 1 > maxRuns) {
    reasons.push(`tenant: this would be run ${concurrentRuns + 1} in flight of the ${maxRuns} allowed at once`);
  }
  const maxCpu = budgets.tenantCpuSecondsPerDay;
  if (maxCpu !== undefined && cpuSecondsToday >= maxCpu) {
    reasons.push(`tenant: ${cpuSecondsToday} CPU-seconds used in the last 24 hours of the ${maxCpu} allowed`);
  }
  if (reasons.length > 0) return { ok: false, error_code: 'E_BUDGET', reasons };
  return { ok: true, remaining_cpu_seconds: maxCpu === undefined ? null : maxCpu - cpuSecondsToday };
}

/** Whether the policy sets a tenant quota at all (then the tenant's usage must be known to decide). */
export function hasTenantQuota(budgets: Pick<Budgets, 'tenantConcurrentRuns' | 'tenantCpuSecondsPerDay'>): boolean {
  return budgets.tenantConcurrentRuns !== undefined || budgets.tenantCpuSecondsPerDay !== undefined;
}
