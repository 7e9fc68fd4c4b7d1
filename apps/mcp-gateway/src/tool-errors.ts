import { CairnError, isCairnError } from '@cairn/contracts';
import type { ErrorBody, ErrorCode } from '@cairn/contracts';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';

/**
 * What an agent can do about each error code, said in the tool error itself. A `Record` over
 * the closed union: a new code that this edge does not map fails the type check here.
 */
export const MCP_ERROR_HINTS: Readonly<Record<ErrorCode, string>> = {
  E_INPUT: 'the arguments are invalid: fix what the message and details name, then call again',
  E_POLICY_DENIED: "policy refused the request: stay within the policy's caps, images, egress and secrets",
  E_RUNTIME_ABSENT: 'the isolation this needs is missing on the worker host: an operator must fix it',
  E_IMAGE_PULL: 'the image is missing on the worker host: use an allowed local image',
  E_SANDBOX_START: 'the sandbox could not start: try again later, or ask an operator',
  E_TIMEOUT: 'a command passed its time cap: make it shorter or raise wallSeconds within the caps',
  E_MEM_LIMIT: 'a command passed its memory cap: use less memory or raise memoryMiB within the caps',
  E_PROC_LIMIT: 'a command passed its process cap: start fewer processes or raise pids within the caps',
  E_DISK_LIMIT: 'a command passed its disk cap: write less or raise diskMiB within the caps',
  E_BUDGET: 'a budget is used up (runs per job, job time, tenant quota, output bytes): wait or ask an operator',
  E_WORKER_LOST: 'the worker running this was lost: submit the run again with a new idempotency key',
  E_SECRET_SEEN: 'a secret appeared in the output and was redacted: never print secrets',
  E_GATE_FAIL: 'the regression gate failed: the patch makes a gate check worse',
  E_NO_APPROVAL: 'the run awaits (or was refused) a person’s approval',
  E_CHAIN_BROKEN: 'the evidence chain does not verify: do not trust this run; report it',
  E_EGRESS: 'network egress to a host outside the allowlist was dropped',
  E_UNKNOWN_STATE: 'Cairn met a state it does not know and stopped: report it',
  E_UNAUTHORIZED: 'the Cairn API key is missing, unknown, expired or revoked',
  E_FORBIDDEN: 'the Cairn API key lacks the scope this needs',
  E_NOT_FOUND: 'no such run, sandbox or file for this key’s tenant: check the id or path',
  E_SEALED: 'the run is sealed: nothing on it can change any more',
  E_CONFLICT: 'the request conflicts with the run’s or sandbox’s current state (a destroyed sandbox takes no more operations: create a new one)',
  E_IDEMPOTENCY_MISMATCH: 'this idempotency key was used with a different spec: use a new key',
  E_TOO_LARGE: 'the request is too large: send less',
  E_RATE_LIMITED: 'too many requests with this key: wait details.retryAfterSeconds seconds, then try again',
  E_CAPACITY: 'every worker is full (details.resource names what ran out): try again after details.retryAfterSeconds seconds, or create with waitSeconds to wait in the queue; on a run that failed with it, the artifact store was full',
  E_UNAVAILABLE: 'Cairn is not reachable right now: try again later',
  E_INTERNAL: 'Cairn failed unexpectedly: try again, or report it',
};

/** Any failure as a CairnError body; what is not one becomes E_INTERNAL without its internals. */
export function errorBodyOf(error: unknown): ErrorBody {
  if (isCairnError(error)) return error.toBody();
  return new CairnError('E_INTERNAL', 'the MCP gateway failed unexpectedly').toBody();
}

/**
 * An MCP tool error (`isError: true`) carrying Cairn's error: the text says `<code>: <message>`
 * and what to do; `structuredContent.error` holds `{ code, message, details, hint }`.
 */
export function toolError(error: unknown): CallToolResult {
  const body = errorBodyOf(error);
  const hint = MCP_ERROR_HINTS[body.code];
  const details = body.details === undefined ? '' : `\ndetails: ${JSON.stringify(body.details)}`;
  return {
    isError: true,
    content: [{ type: 'text', text: `${body.code}: ${body.message}\n(${hint})${details}` }],
    structuredContent: { error: { ...body, hint } },
  };
}

/** A successful tool result: the value as JSON text (for any client) and as structured content. */
export function toolResult(value: Record<string, unknown>): CallToolResult {
  return { content: [{ type: 'text', text: JSON.stringify(value) }], structuredContent: value };
}
