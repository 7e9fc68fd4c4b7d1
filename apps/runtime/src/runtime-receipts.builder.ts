import type { ErrorCode, EventType, EvidenceEventOf, EvidenceReceiptOf, GrantedCaps, LimitKind, SandboxHardening } from '@cairn/contracts';
import type { ExecResult, LimitCode, SandboxCaps, SandboxHandle } from '@cairn/sandbox';
import { boundedText } from './receipt-text.js';
import type { PlannedStep } from './step-plan.js';

/*
 * The type-specific fields of every receipt the runtime appends, built from plain data so each
 * can be unit-tested; `ReactionContext.append` checks them against the contracts once more.
 */

type EnvelopeKey = 'v' | 'seq' | 'run_id' | 'tenant' | 'type' | 'actor' | 'ts' | 'causation';
/** What a service hands to `append` for an event of type `T`: its own fields, no envelope. */
export type EventFields<T extends EventType> = Omit<EvidenceEventOf<T>, EnvelopeKey>;

/** The only isolation this runtime drives today. */
export const DRIVER_NAME = 'docker';
/** A run's steps are the `step` stage (file moves are the runtime's own, not steps). */
export const STEP_STAGE = 'step';
const MAX_MESSAGE_CHARS = 2048;

const LIMIT_KIND: Readonly<Record<LimitCode, LimitKind>> = {
  E_TIMEOUT: 'wall_time',
  E_MEM_LIMIT: 'memory',
  E_PROC_LIMIT: 'pids',
  E_DISK_LIMIT: 'disk',
};

/** Policy's granted caps (snake_case, as receipts carry them) as the sandbox port takes them. */
export function sandboxCaps(caps: GrantedCaps): SandboxCaps {
  return { wallSeconds: caps.wall_seconds, memoryMiB: caps.memory_mib, pids: caps.pids, diskMiB: caps.disk_mib, cpus: caps.cpus };
}

export function grantedCaps(caps: SandboxCaps): GrantedCaps {
  return { wall_seconds: caps.wallSeconds, memory_mib: caps.memoryMiB, pids: caps.pids, disk_mib: caps.diskMiB, cpus: caps.cpus };
}

/**
 * `image` is the reference policy granted (without its digest); the digest is the image the engine
 * started; `hardening` what the engine reports the sandbox runs under (confirmed before any step);
 * `network` whether its only way out is the egress proxy.
 */
export function sandboxCreatedFields(
  handle: SandboxHandle,
  image: string,
  hardening: SandboxHardening,
  network: EventFields<'sandbox.created'>['network'] = 'none',
): EventFields<'sandbox.created'> {
  return {
    container_name: handle.name,
    worker_id: handle.workerId,
    driver: DRIVER_NAME,
    image,
    image_digest: /^sha256:[0-9a-f]{64}$/.test(handle.imageId) ? handle.imageId : null,
    caps: grantedCaps(handle.caps),
    network,
    hardening,
  };
}

export function stepStartedFields(step: PlannedStep): EventFields<'step.started'> {
  return { step_index: step.index, stage: STEP_STAGE, tool: step.tool, argv: step.argv, workdir: step.workdir, env_names: step.envNames };
}

/**
 * Every cap a step met, in the order first seen (each once), then `output_bytes` when its output
 * was cut at the runtime's cap (a cut is recorded, not a failure).
 */
export function limitsHit(result: Pick<ExecResult, 'limits' | 'truncated'>): LimitKind[] {
  const kinds: LimitKind[] = [];
  for (const seen of [...result.limits].sort((a, b) => a.atMs - b.atMs)) {
    const kind = LIMIT_KIND[seen.limit];
    if (!kinds.includes(kind)) kinds.push(kind);
  }
  if (result.truncated) kinds.push('output_bytes');
  return kinds;
}

export interface StoredOutput {
  /** sha256 (hex) of the bytes kept, as stored in the artifact store. */
  stdoutSha256: string;
  stderrSha256: string;
}

/**
 * PRODUCT.md's step receipt. `*_bytes` count everything the program wrote; the hashes cover what
 * was kept (the first `maxOutputBytes`, `output_truncated` says when that is less). A non-zero
 * exit is a result; `error_code` is set only when a cap stopped the step.
 */
export function stepCompletedFields(step: PlannedStep, result: ExecResult, stored: StoredOutput): EventFields<'step.completed'> {
  const fields: EventFields<'step.completed'> = {
    step_index: step.index,
    stage: STEP_STAGE,
    tool: step.tool,
    argv: step.argv,
    exit_code: result.exitCode,
    // A step that did not exit by itself was killed with its sandbox (force removal is SIGKILL).
    signal: result.exitCode === null ? 'SIGKILL' : null,
    stdout_sha256: stored.stdoutSha256,
    stderr_sha256: stored.stderrSha256,
    stdout_bytes: result.stdoutBytes,
    stderr_bytes: result.stderrBytes,
    output_truncated: result.truncated,
    duration_ms: Math.max(0, Math.round(result.durationMs)),
    limits_hit: limitsHit(result),
    // No secret scanner exists yet: nothing is redacted, and the receipt says so.
    redactions: [],
    // Files are collected after the last step (`run.executed`), not per step.
    artifact_hashes: {},
  };
  if (result.limitHit !== null) fields.error_code = result.limitHit;
  return fields;
}

/**
 * The receipt of a step that ran but whose output the artifact store could not take (full,
 * E_CAPACITY): what it wrote is counted, none of it kept — the receipt names the empty artifact
 * (stored at boot, so it is there however full the store is), so it never names bytes the store
 * does not hold (docs/adr/0021).
 */
export function unstoredStepFields(step: PlannedStep, result: ExecResult, emptySha256: string): EventFields<'step.completed'> {
  return {
    ...stepCompletedFields(step, result, { stdoutSha256: emptySha256, stderrSha256: emptySha256 }),
    output_truncated: true,
    error_code: 'E_CAPACITY',
  };
}

/**
 * The receipt of a step stopped from outside — a cancel, or a lost lease — by destroying its
 * sandbox under it. The contracts have no code for "cancelled" (no cap stopped it, so no
 * `error_code` and no `limits_hit`): the receipt says the step never exited (`exit_code: null`)
 * and was killed with its sandbox (`signal: SIGKILL`), and the receipts after it say why
 * (`sandbox.destroyed` reason `cancelled`, `run.cancelled`). Its output went with the sandbox: it
 * hashes the nothing that was kept (`emptySha256`), counts 0 bytes and says `output_truncated`,
 * since what the step wrote is not known.
 */
export function interruptedStepFields(step: PlannedStep, durationMs: number, emptySha256: string): EventFields<'step.completed'> {
  return {
    step_index: step.index,
    stage: STEP_STAGE,
    tool: step.tool,
    argv: step.argv,
    exit_code: null,
    signal: 'SIGKILL',
    stdout_sha256: emptySha256,
    stderr_sha256: emptySha256,
    stdout_bytes: 0,
    stderr_bytes: 0,
    output_truncated: true,
    duration_ms: Math.max(0, Math.round(durationMs)),
    limits_hit: [],
    redactions: [],
    artifact_hashes: {},
  };
}

/** An egress connection the proxy refused (`E_EGRESS`; the run goes on), during step `stepIndex` when one was running. */
export function egressDeniedFields(denial: { host: string; port: number; reason: EventFields<'egress.denied'>['reason'] }, stepIndex: number | null): EventFields<'egress.denied'> {
  const fields: EventFields<'egress.denied'> = { host: denial.host, port: denial.port, reason: denial.reason, error_code: 'E_EGRESS' };
  if (stepIndex !== null) fields.step_index = stepIndex;
  return fields;
}

export type TeardownReason = EventFields<'sandbox.destroyed'>['reason'];

export function sandboxDestroyedFields(containerName: string, verifiedGone: boolean, reason: TeardownReason, durationMs?: number): EventFields<'sandbox.destroyed'> {
  const fields: EventFields<'sandbox.destroyed'> = { container_name: containerName, verified_gone: verifiedGone, reason };
  if (durationMs !== undefined) fields.duration_ms = Math.max(0, Math.round(durationMs));
  return fields;
}

export interface CompletedStep {
  exitCode: number | null;
}

/** `outputsSkipped`: output files not collected because their names cannot be recorded (output-names.ts). */
export function runExecutedFields(
  steps: readonly CompletedStep[],
  artifactHashes: Readonly<Record<string, string>>,
  durationMs: number,
  outputsSkipped = 0,
): EventFields<'run.executed'> {
  const fields: EventFields<'run.executed'> = {
    steps_completed: steps.length,
    exit_codes: steps.map((step) => step.exitCode),
    artifact_hashes: { ...artifactHashes },
    duration_ms: Math.max(0, Math.round(durationMs)),
  };
  if (outputsSkipped > 0) fields.outputs_skipped = outputsSkipped;
  return fields;
}

/**
 * The key of a step approval's `approval.requested` in `attempt` (ADR 0035): its approval id, and
 * for an attempt after the first the attempt too, so the request the next attempt asks again is
 * its own receipt, never taken for the lost attempt's. (Its causation, the attempt's own
 * `run.scheduled`, differs as well: the key says it without relying on that.)
 */
export function stepApprovalKey(approvalId: string, attempt: number): string {
  return attempt <= 1 ? approvalId : `${approvalId}@attempt-${attempt}`;
}

export function runFailedFields(code: ErrorCode, message: string, stepIndex?: number): EventFields<'run.failed'> {
  const fields: EventFields<'run.failed'> = { error_code: code, message: boundedText(message, MAX_MESSAGE_CHARS) };
  if (stepIndex !== undefined) fields.step_index = stepIndex;
  return fields;
}

/** The answer to a cancel request: who asked and why, from the request. */
export function runCancelledFields(request: EvidenceReceiptOf<'run.cancel_requested'>): EventFields<'run.cancelled'> {
  const fields: EventFields<'run.cancelled'> = { cancelled_by: request.requested_by };
  if (request.reason !== undefined) fields.reason = request.reason;
  return fields;
}

