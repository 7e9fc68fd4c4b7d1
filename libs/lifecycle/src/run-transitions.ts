import type { ErrorCode, RunState } from '@cairn/contracts';

/** States a run ends in. `SEALED` is the happy end; the others are sealed too, keeping their state. */
export const TERMINAL_RUN_STATES: ReadonlySet<RunState> = new Set<RunState>(['SEALED', 'FAILED', 'ROLLBACK', 'REJECTED', 'CANCELLED']);

export function isTerminal(state: RunState): boolean {
  return TERMINAL_RUN_STATES.has(state);
}

/** States in which no step has run yet: a budget or policy refusal here is `REJECTED`, not a rollback. */
export const PRE_RUN_STATES: ReadonlySet<RunState> = new Set<RunState>(['SUBMITTED', 'AWAITING_APPROVAL', 'SCHEDULED']);

const ENDINGS = ['FAILED', 'ROLLBACK', 'CANCELLED'] as const;

/**
 * Every state change the lifecycle allows (staying put is not a change and is not listed).
 * Besides these, a fault (I-5: a transition not listed here, an event after `run.sealed`, an unknown
 * event type) moves any state to `FAILED` with `E_UNKNOWN_STATE`.
 */
export const RUN_TRANSITIONS: Readonly<Record<RunState, readonly RunState[]>> = {
  SUBMITTED: ['AWAITING_APPROVAL', 'SCHEDULED', 'REJECTED', ...ENDINGS],
  // → SUBMITTED: `run.retried` only, a lost worker's attempt given back to the queue (ADR 0035).
  AWAITING_APPROVAL: ['SUBMITTED', 'SCHEDULED', 'RUNNING', 'REJECTED', ...ENDINGS],
  SCHEDULED: ['SUBMITTED', 'AWAITING_APPROVAL', 'RUNNING', 'REJECTED', ...ENDINGS],
  RUNNING: ['SUBMITTED', 'AWAITING_APPROVAL', 'EXECUTED', ...ENDINGS],
  EXECUTED: ['VERIFIED', ...ENDINGS],
  VERIFIED: ['GRADED', 'SEALED', ...ENDINGS],
  GRADED: ['SEALED', ...ENDINGS],
  SEALED: [],
  FAILED: [],
  ROLLBACK: [],
  REJECTED: [],
  CANCELLED: [],
};

export function canTransition(from: RunState, to: RunState): boolean {
  return RUN_TRANSITIONS[from].includes(to);
}

/** PRODUCT.md's failure taxonomy: these codes end a run that has started in `ROLLBACK`. */
export const ROLLBACK_ERROR_CODES: ReadonlySet<ErrorCode> = new Set<ErrorCode>([
  'E_TIMEOUT',
  'E_MEM_LIMIT',
  'E_PROC_LIMIT',
  'E_DISK_LIMIT',
  'E_SECRET_SEEN',
  'E_GATE_FAIL',
  'E_BUDGET',
]);

/** The state a failure with `code` ends a run in, when it is met in state `from`. */
export function failureState(code: ErrorCode, from: RunState): RunState {
  if (PRE_RUN_STATES.has(from) && (code === 'E_BUDGET' || code === 'E_POLICY_DENIED')) return 'REJECTED';
  if (code === 'E_NO_APPROVAL') return 'CANCELLED';
  return ROLLBACK_ERROR_CODES.has(code) ? 'ROLLBACK' : 'FAILED';
}
