import type { LimitKind } from '@cairn/contracts';
import type { ExecResult } from '@cairn/sandbox';
import type { EventFields } from './runtime-receipts.builder.js';

/*
 * The budgets policy hands the runtime (`policy.decided.budget`), decided from plain data so each
 * rule is unit-tested: output bytes per step, and the sandbox seconds the run has before its job's
 * time or its tenant's CPU-seconds for the day run out. Exceeded mid-run, either ends the run
 * ROLLBACK `E_BUDGET` with its sandbox destroyed and its receipts kept (PRODUCT.md).
 */

/** A step's wall time under the run's time budget: its own timeout, or less when the budget has less left. */
export function budgetedTimeout(stepTimeoutMs: number, remainingMs: number | null): { timeoutMs: number; byBudget: boolean } {
  if (remainingMs === null || remainingMs >= stepTimeoutMs) return { timeoutMs: stepTimeoutMs, byBudget: false };
  return { timeoutMs: Math.max(1, Math.floor(remainingMs)), byBudget: true };
}

/** What the run's budget says about a step that has run: null when it kept within it. */
export type BudgetBreach = { kind: 'output'; bytes: number; budget: number } | { kind: 'time'; runSeconds: number };

/**
 * Whether a step broke the run's budget. Output counts everything the step wrote to stdout and
 * stderr together, kept or not; the sandbox driver stops a step the moment its output passes the
 * budget (`ExecRequest.stopAfterOutputBytes`), so an endless writer does not run on to its time cap. A step stopped at a time the budget set (not its own timeout) broke
 * the time budget. A cap other than the wall time (memory, processes, disk) is what stopped the
 * step, and stays its cause.
 */
export function budgetBreach(
  result: Pick<ExecResult, 'stdoutBytes' | 'stderrBytes' | 'limitHit'>,
  budget: { outputBytesPerStep: number | null; runSeconds: number | null },
  timedByBudget: boolean,
): BudgetBreach | null {
  if (result.limitHit !== null && result.limitHit !== 'E_TIMEOUT') return null;
  const bytes = result.stdoutBytes + result.stderrBytes;
  if (budget.outputBytesPerStep !== null && bytes > budget.outputBytesPerStep) return { kind: 'output', bytes, budget: budget.outputBytesPerStep };
  if (result.limitHit === 'E_TIMEOUT' && timedByBudget && budget.runSeconds !== null) return { kind: 'time', runSeconds: budget.runSeconds };
  return null;
}

export function breachMessage(stepIndex: number, breach: BudgetBreach): string {
  return breach.kind === 'output'
    ? `step ${stepIndex} wrote ${breach.bytes} bytes of output, more than the ${breach.budget} bytes a step may write; the sandbox was destroyed`
    : `step ${stepIndex} ran out of the run's time budget (${breach.runSeconds} s: the job's time or the tenant's CPU-seconds for the day); the sandbox was destroyed`;
}

/** The step's receipt when the budget stopped the run: `error_code` E_BUDGET, and the limit it met. */
export function budgetStepFields(fields: EventFields<'step.completed'>, breach: BudgetBreach): EventFields<'step.completed'> {
  const kind: LimitKind = breach.kind === 'output' ? 'output_bytes' : 'wall_time';
  const limits = fields.limits_hit.includes(kind) ? fields.limits_hit : [...fields.limits_hit, kind];
  return { ...fields, limits_hit: limits, error_code: 'E_BUDGET' };
}

/** How long one step may be held for approval: its rule's timeout, within what the run has left to be held. */
export function holdSeconds(timeoutSeconds: number, holdLeftMs: number): number {
  return Math.max(1, Math.min(timeoutSeconds, Math.floor(holdLeftMs / 1000)));
}
