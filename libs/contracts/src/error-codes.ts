import { z } from 'zod';

/**
 * The one closed union of error codes: PRODUCT.md's failure taxonomy plus the API's own.
 * Every edge (REST, MCP, CLI) maps these exhaustively; adding a code here must break the
 * type check of any edge that does not handle it.
 */
export const TAXONOMY_ERROR_CODES = [
  'E_INPUT',
  'E_POLICY_DENIED',
  'E_RUNTIME_ABSENT',
  'E_IMAGE_PULL',
  'E_SANDBOX_START',
  'E_TIMEOUT',
  'E_MEM_LIMIT',
  'E_PROC_LIMIT',
  'E_DISK_LIMIT',
  'E_BUDGET',
  'E_WORKER_LOST',
  'E_SECRET_SEEN',
  'E_GATE_FAIL',
  'E_NO_APPROVAL',
  'E_CHAIN_BROKEN',
  'E_EGRESS',
  'E_UNKNOWN_STATE',
] as const;

export const API_ERROR_CODES = [
  'E_UNAUTHORIZED',
  'E_FORBIDDEN',
  'E_NOT_FOUND',
  'E_SEALED',
  'E_CONFLICT',
  'E_IDEMPOTENCY_MISMATCH',
  'E_TOO_LARGE',
  'E_RATE_LIMITED',
  'E_CAPACITY',
  'E_UNAVAILABLE',
  'E_INTERNAL',
] as const;

export const ERROR_CODES = [...TAXONOMY_ERROR_CODES, ...API_ERROR_CODES] as const;

export const ErrorCodeSchema = z.enum(ERROR_CODES);
export type ErrorCode = z.infer<typeof ErrorCodeSchema>;
export type TaxonomyErrorCode = (typeof TAXONOMY_ERROR_CODES)[number];
export type ApiErrorCode = (typeof API_ERROR_CODES)[number];

/**
 * What a worker ran out of when work cannot be placed (`E_CAPACITY`'s `details.resource`, the
 * `resource` of its `run.failed`): a slot, memory (the caps' memory plus tmpfs), tmpfs disk,
 * processes, or CPU share (caps' CPUs over the worker's CPUs times its oversubscription).
 */
export const CAPACITY_RESOURCES = ['slots', 'memory', 'disk', 'pids', 'cpu'] as const;
export const CapacityResourceSchema = z.enum(CAPACITY_RESOURCES);
export type CapacityResource = z.infer<typeof CapacityResourceSchema>;

/** What a run or sandbox create waiting in the placement queue waits for: room (a dimension), a runtime at all, or a worker with its image. */
export const QUEUE_WAITS = [...CAPACITY_RESOURCES, 'runtime', 'image'] as const;
export const QueueWaitSchema = z.enum(QUEUE_WAITS);
export type QueueWait = z.infer<typeof QueueWaitSchema>;

/** How errors cross every wire: `{ code, message, details }`. */
export const ErrorBodySchema = z.object({
  code: ErrorCodeSchema,
  message: z.string(),
  details: z.record(z.string(), z.unknown()).optional(),
});
export type ErrorBody = z.infer<typeof ErrorBodySchema>;

/** HTTP status for each code; a `Record` over the union, so a new code fails the type check here. */
export const HTTP_STATUS_BY_CODE: Readonly<Record<ErrorCode, number>> = {
  E_INPUT: 400,
  E_POLICY_DENIED: 403,
  E_RUNTIME_ABSENT: 503,
  E_IMAGE_PULL: 502,
  E_SANDBOX_START: 502,
  E_TIMEOUT: 408,
  E_MEM_LIMIT: 422,
  E_PROC_LIMIT: 422,
  E_DISK_LIMIT: 422,
  E_BUDGET: 429,
  E_WORKER_LOST: 503,
  E_SECRET_SEEN: 422,
  E_GATE_FAIL: 422,
  E_NO_APPROVAL: 403,
  E_CHAIN_BROKEN: 500,
  E_EGRESS: 403,
  E_UNKNOWN_STATE: 500,
  E_UNAUTHORIZED: 401,
  E_FORBIDDEN: 403,
  E_NOT_FOUND: 404,
  E_SEALED: 409,
  E_CONFLICT: 409,
  E_IDEMPOTENCY_MISMATCH: 422,
  E_TOO_LARGE: 413,
  E_RATE_LIMITED: 429,
  E_CAPACITY: 503,
  E_UNAVAILABLE: 503,
  E_INTERNAL: 500,
};

/**
 * An error identified by its code, not by `instanceof`: safe across package copies and
 * process boundaries. Use `isCairnError` to recognise one.
 */
export class CairnError extends Error {
  readonly cairnErrorCode: ErrorCode;
  readonly details: Record<string, unknown> | undefined;

  constructor(code: ErrorCode, message: string, details?: Record<string, unknown>) {
    super(message);
    this.name = 'CairnError';
    this.cairnErrorCode = code;
    this.details = details;
  }

  get code(): ErrorCode {
    return this.cairnErrorCode;
  }

  toBody(): ErrorBody {
    return this.details === undefined
      ? { code: this.cairnErrorCode, message: this.message }
      : { code: this.cairnErrorCode, message: this.message, details: this.details };
  }
}

export function isCairnError(value: unknown): value is CairnError {
  return (
    typeof value === 'object' &&
    value !== null &&
    'cairnErrorCode' in value &&
    ErrorCodeSchema.safeParse(value.cairnErrorCode).success
  );
}

/** Compile-time exhaustiveness guard for switches over closed unions. */
export function assertUnreachable(value: never, what = 'value'): never {
  throw new CairnError('E_UNKNOWN_STATE', `unhandled ${what}: ${JSON.stringify(value)}`);
}
