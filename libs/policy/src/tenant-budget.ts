import type { TenantUsage } from './budget-usage.js';
import type { Budgets } from '@cairn/contracts';

export type TenantBudgetCheck =
  | {
      ok: true;
      /** CPU-seconds the tenant has left today; null when the policy sets no daily quota. */
      remaining_cpu_seconds: number | null;
    }
  | { ok: false; error_code: 'E_BUDGET'; reasons: string[] };

type TenantQuotas = Pick<Budgets, 'tenantConcurrentRuns' | 'tenantConcurrentSandboxes' | 'tenantMemoryMiB' | 'tenantCpuSecondsPerDay'>;

/** What is being decided: a run or a sandbox session, and the memory a worker would reserve for it. */
export interface QuotaRequest {
  kind: 'run' | 'sandbox';
  memoryMiB: number;
}

/**
 * Whether one more run (or sandbox) of the tenant fits its quotas: runs in flight
 * (`tenantConcurrentRuns`; sandboxes count there too unless `tenantConcurrentSandboxes` counts
 * them alone), sandboxes in flight, the memory of all of them together (`tenantMemoryMiB`) and
 * CPU-seconds in the last 24 hours (`tenantCpuSecondsPerDay`). A quota the policy does not set is
 * no limit. A day already used up refuses the run; otherwise what is left is handed to the runtime,
 * which stops the run when it is spent (ROLLBACK, `E_BUDGET`).
 */
export function checkTenantBudget(usage: TenantUsage, budgets: TenantQuotas, request: QuotaRequest = { kind: 'run', memoryMiB: 0 }): TenantBudgetCheck {
  const reasons: string[] = [];
  const { concurrentRuns, cpuSecondsToday } = usage;
  const sandboxes = usage.concurrentSandboxes ?? 0;
  const memory = usage.memoryMiB ?? 0;
  const counts = [concurrentRuns, sandboxes, memory, request.memoryMiB];
  if (counts.some((n) => !Number.isInteger(n) || n < 0) || !Number.isFinite(cpuSecondsToday) || cpuSecondsToday < 0) {
    return { ok: false, error_code: 'E_BUDGET', reasons: [`tenant: usage cannot be read (${concurrentRuns} runs, ${sandboxes} sandboxes, ${memory} MiB, ${cpuSecondsToday} CPU-seconds)`] };
  }
  const maxRuns = budgets.tenantConcurrentRuns;
  const maxSandboxes = budgets.tenantConcurrentSandboxes;
  // With a sandbox quota of their own, sandboxes leave the runs' quota to runs.
  const runsInFlight = maxSandboxes === undefined ? concurrentRuns : concurrentRuns - sandboxes;
  const countsAsRun = request.kind === 'run' || maxSandboxes === undefined;
  if (maxRuns !== undefined && countsAsRun && runsInFlight + 1 > maxRuns) {
    reasons.push(`tenant: this would be run ${runsInFlight + 1} in flight of the ${maxRuns} allowed at once`);
  }
  if (maxSandboxes !== undefined && request.kind === 'sandbox' && sandboxes + 1 > maxSandboxes) {
    reasons.push(`tenant: this would be sandbox ${sandboxes + 1} open of the ${maxSandboxes} allowed at once`);
  }
  const maxMemory = budgets.tenantMemoryMiB;
  if (maxMemory !== undefined && memory + request.memoryMiB > maxMemory) {
    reasons.push(`tenant: ${memory} MiB of memory in flight, and ${request.memoryMiB} MiB more would pass the ${maxMemory} MiB allowed`);
  }
  const maxCpu = budgets.tenantCpuSecondsPerDay;
  if (maxCpu !== undefined && cpuSecondsToday >= maxCpu) {
    reasons.push(`tenant: ${cpuSecondsToday} CPU-seconds used in the last 24 hours of the ${maxCpu} allowed`);
  }
  if (reasons.length > 0) return { ok: false, error_code: 'E_BUDGET', reasons };
  return { ok: true, remaining_cpu_seconds: maxCpu === undefined ? null : maxCpu - cpuSecondsToday };
}

/** Whether the policy sets a tenant quota at all (then the tenant's usage must be known to decide). */
export function hasTenantQuota(budgets: TenantQuotas): boolean {
  return budgets.tenantConcurrentRuns !== undefined || budgets.tenantConcurrentSandboxes !== undefined || budgets.tenantMemoryMiB !== undefined || budgets.tenantCpuSecondsPerDay !== undefined;
}
