import type { ErrorCode } from '@cairn/contracts';
import type { QueueSpot } from './api-types.js';

/**
 * What each error code means, shown beside it. A `Record` over the closed union: a code added to
 * the contracts fails the dashboard's type check until it is described here.
 */
export const ERROR_TEXT: Readonly<Record<ErrorCode, string>> = {
  E_INPUT: 'the request was invalid; nothing was created',
  E_POLICY_DENIED: 'policy refused it (caps, image, egress or secrets)',
  E_RUNTIME_ABSENT: 'no runtime (or the isolation it needs) is there to run it',
  E_IMAGE_PULL: 'no worker has the image',
  E_SANDBOX_START: 'the sandbox could not start',
  E_TIMEOUT: 'a command passed its time cap',
  E_MEM_LIMIT: 'memory passed its cap',
  E_PROC_LIMIT: 'processes passed their cap',
  E_DISK_LIMIT: 'disk passed its cap',
  E_BUDGET: 'a budget or tenant quota is used up',
  E_WORKER_LOST: 'the worker holding it was lost',
  E_SECRET_SEEN: 'a secret appeared in the output and was redacted',
  E_GATE_FAIL: 'the regression gate failed',
  E_NO_APPROVAL: 'a person did not approve it',
  E_CHAIN_BROKEN: 'its evidence chain does not verify',
  E_EGRESS: 'egress outside the allowlist was dropped',
  E_UNKNOWN_STATE: 'Cairn met a state it does not know and stopped',
  E_UNAUTHORIZED: 'the API key is missing, unknown, expired or revoked',
  E_FORBIDDEN: 'the API key lacks the scope this needs',
  E_NOT_FOUND: 'no such run or sandbox for this tenant',
  E_SEALED: 'sealed: nothing on it can change',
  E_CONFLICT: 'it conflicts with the current state',
  E_IDEMPOTENCY_MISMATCH: 'the idempotency key was used with another body',
  E_TOO_LARGE: 'the request was too large',
  E_RATE_LIMITED: 'too many requests with this key',
  E_CAPACITY: 'every worker was full (it names what ran out), or the artifact store was: its message says which',
  E_UNAVAILABLE: 'a part of Cairn did not answer',
  E_INTERNAL: 'Cairn failed unexpectedly',
};

/** The meaning of a code as a tooltip; undefined for none (or a code this build does not know). */
export function errorText(code: string | null | undefined): string | undefined {
  if (code === null || code === undefined) return undefined;
  return Object.hasOwn(ERROR_TEXT, code) ? ERROR_TEXT[code as ErrorCode] : undefined;
}

const WAITS: Readonly<Record<QueueSpot['waitingFor'], string>> = {
  slots: 'a free slot',
  memory: 'memory',
  disk: 'disk',
  pids: 'processes',
  cpu: 'CPU share',
  runtime: 'a runtime worker',
  image: 'a worker with its image',
};

/** `queued 3 of 7 · waiting for memory`. */
export function queueText(spot: QueueSpot): string {
  return `queued ${spot.position} of ${spot.length} · waiting for ${WAITS[spot.waitingFor]}`;
}
