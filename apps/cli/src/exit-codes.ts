import { CairnError, isCairnError } from '@cairn/contracts';
import type { ErrorBody, ErrorCode } from '@cairn/contracts';

/** 0 ok, 1 the work failed (a broken chain, a service down), 2 the command line or its input was wrong. */
export const EXIT_OK = 0;
export const EXIT_FAILED = 1;
export const EXIT_USAGE = 2;
export type ExitCode = typeof EXIT_OK | typeof EXIT_FAILED | typeof EXIT_USAGE;

/**
 * The CLI's edge mapping: every error code has an exit code. A `Record` over the closed union,
 * so a code added to the contracts fails the type check here until it is mapped.
 */
export const EXIT_CODE_BY_ERROR: Readonly<Record<ErrorCode, ExitCode>> = {
  E_INPUT: EXIT_USAGE,
  E_POLICY_DENIED: EXIT_FAILED,
  E_RUNTIME_ABSENT: EXIT_FAILED,
  E_IMAGE_PULL: EXIT_FAILED,
  E_SANDBOX_START: EXIT_FAILED,
  E_TIMEOUT: EXIT_FAILED,
  E_MEM_LIMIT: EXIT_FAILED,
  E_PROC_LIMIT: EXIT_FAILED,
  E_DISK_LIMIT: EXIT_FAILED,
  E_BUDGET: EXIT_FAILED,
  E_WORKER_LOST: EXIT_FAILED,
  E_SECRET_SEEN: EXIT_FAILED,
  E_GATE_FAIL: EXIT_FAILED,
  E_NO_APPROVAL: EXIT_FAILED,
  E_CHAIN_BROKEN: EXIT_FAILED,
  E_EGRESS: EXIT_FAILED,
  E_UNKNOWN_STATE: EXIT_FAILED,
  E_UNAUTHORIZED: EXIT_FAILED,
  E_FORBIDDEN: EXIT_FAILED,
  E_NOT_FOUND: EXIT_FAILED,
  E_SEALED: EXIT_FAILED,
  E_CONFLICT: EXIT_FAILED,
  E_IDEMPOTENCY_MISMATCH: EXIT_FAILED,
  E_TOO_LARGE: EXIT_FAILED,
  E_RATE_LIMITED: EXIT_FAILED,
  E_CAPACITY: EXIT_FAILED,
  E_UNAVAILABLE: EXIT_FAILED,
  E_INTERNAL: EXIT_FAILED,
};

/** A failure the command already knows how to report: its body and exit code. */
export interface CliFailure {
  body: ErrorBody;
  exitCode: ExitCode;
  /** Only for errors nobody expected: shown when CAIRN_DEBUG is set. */
  stack?: string;
}

/**
 * Turns anything thrown into a reportable failure. Expected errors (a `CairnError`) keep their
 * code; anything else is `E_INTERNAL`, and only then is a stack trace worth keeping.
 */
export function toCliFailure(error: unknown): CliFailure {
  if (isCairnError(error)) {
    return { body: error.toBody(), exitCode: EXIT_CODE_BY_ERROR[error.code] };
  }
  const message = error instanceof Error ? error.message : String(error);
  const failure: CliFailure = { body: { code: 'E_INTERNAL', message }, exitCode: EXIT_CODE_BY_ERROR.E_INTERNAL };
  if (error instanceof Error && error.stack !== undefined) failure.stack = error.stack;
  return failure;
}

/** A usage error (bad arguments, unreadable input): `E_INPUT`, exit 2. */
export function usageError(message: string, details?: Record<string, unknown>): CairnError {
  return new CairnError('E_INPUT', message, details);
}
