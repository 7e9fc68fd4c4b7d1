import type { CapsSpec, EvidenceReceipt, EvidenceReceiptOf, FrozenCaps, GrantedCaps } from '@cairn/contracts';
import { FROZEN_CAPS } from '@cairn/contracts';
import { attemptOf } from '@cairn/lifecycle';
import { boundDetail } from './judgement-context.js';
import { EARLIER_ATTEMPTS_INVARIANT, verifyEarlierAttempts } from './verify-earlier-attempts.js';

/**
 * The invariants `verifyRunEvidence` checks of every run, by the id `verification.completed`
 * records; a chain that holds a `run.retried` gets `earlier_attempts` after them (ADR 0035).
 */
export const RUN_INVARIANTS = [
  'every_started_step_completed',
  'every_step_has_receipt',
  'caps_honoured',
  'teardown',
  'artifacts_rehashed',
] as const;
export type RunInvariant = (typeof RUN_INVARIANTS)[number] | typeof EARLIER_ATTEMPTS_INVARIANT;

/** Fits `verification.completed`'s `invariants` (`InvariantOutcomeSchema`). */
export interface InvariantOutcome {
  id: RunInvariant;
  ok: boolean;
  /** At most 1024 characters. */
  detail: string;
}

/** The frozen caps' shape with any numbers (a test or a stricter operator may pass lower ones). */
export type CapLimits = { readonly [K in keyof FrozenCaps]: number };

export interface RunEvidenceOptions {
  /** Defaults to PRODUCT.md's frozen caps. */
  frozenCaps?: CapLimits;
}

type Receipt<T extends EvidenceReceipt['type']> = EvidenceReceiptOf<T>;

/**
 * The verifier's invariant checks over one run's receipts, in chain order. The chain itself must
 * already have verified (`verifyChain` from `@cairn/evidence`): this reads fields, not hashes.
 *
 * `recomputedHashes` maps each artifact sha256 the receipts claim to the sha256 the verifier
 * recomputed from the stored bytes; a claimed hash with no entry means the bytes were not there.
 *
 * The invariants are of the run's current attempt (`attemptOf`, ADR 0035): an attempt lost to its
 * worker has its own checks (`verifyEarlierAttempts`), so its steps and sandbox are not counted
 * with the current attempt's.
 *
 * Returns one outcome per invariant in `RUN_INVARIANTS` order, then `earlier_attempts` on a
 * chain that holds a `run.retried`; it never throws on odd receipts.
 */
export function verifyRunEvidence(
  receipts: readonly EvidenceReceipt[],
  recomputedHashes: ReadonlyMap<string, string>,
  options: RunEvidenceOptions = {},
): InvariantOutcome[] {
  const frozen: CapLimits = options.frozenCaps ?? FROZEN_CAPS;
  const current = attemptOf(receipts);
  const earlier = verifyEarlierAttempts(receipts);
  return [
    everyStartedStepCompleted(current),
    everyStepHasReceipt(current),
    capsHonoured(current, frozen),
    teardown(current),
    artifactsRehashed(current, recomputedHashes),
    ...(earlier === null ? [] : [earlier]),
  ];
}

/** True when every outcome is ok. */
export function invariantsHold(outcomes: readonly InvariantOutcome[]): boolean {
  return outcomes.every((o) => o.ok);
}

function outcome(id: RunInvariant, problems: readonly string[], okDetail: string): InvariantOutcome {
  if (problems.length === 0) return { id, ok: true, detail: boundDetail(okDetail) };
  const count = problems.length === 1 ? '1 problem' : `${problems.length} problems`;
  return { id, ok: false, detail: boundDetail(`${count}: ${problems.join('; ')}`) };
}

function ofType<T extends EvidenceReceipt['type']>(receipts: readonly EvidenceReceipt[], type: T): Receipt<T>[] {
  return receipts.filter((r): r is Receipt<T> => r.type === type);
}

/** Each `step.started` is closed by a later `step.completed` of the same step, and nothing completes unstarted. */
function everyStartedStepCompleted(receipts: readonly EvidenceReceipt[]): InvariantOutcome {
  const problems: string[] = [];
  const open = new Map<number, number>();
  let pairs = 0;
  for (const r of receipts) {
    if (r.type === 'step.started') {
      if (open.has(r.step_index)) problems.push(`step ${r.step_index} started again at seq ${r.seq} before it completed`);
      open.set(r.step_index, r.seq);
    } else if (r.type === 'step.completed') {
      if (open.delete(r.step_index)) pairs++;
      else problems.push(`step ${r.step_index} completed at seq ${r.seq} without a step.started`);
    }
  }
  for (const [step, seq] of open) problems.push(`step ${step} started at seq ${seq} and never completed`);
  return outcome('every_started_step_completed', problems, `${pairs} steps started and completed`);
}

/**
 * Every step of the spec has a `step.completed`, unless the run stopped early with a recorded
 * error (a `step.completed` with an `error_code`, `run.failed`, `run.rolled_back` or `run.cancelled`);
 * then only the steps after the last receipted one may be missing.
 */
function everyStepHasReceipt(receipts: readonly EvidenceReceipt[]): InvariantOutcome {
  const submitted = ofType(receipts, 'run.submitted')[0];
  if (submitted === undefined) return outcome('every_step_has_receipt', ['no run.submitted receipt names the spec'], '');
  const stepCount = submitted.spec.steps.length;
  const completed = new Set(ofType(receipts, 'step.completed').map((r) => r.step_index));
  const problems: string[] = [];
  for (const step of completed) {
    if (step >= stepCount) problems.push(`a receipt for step ${step}, but the spec has ${stepCount} steps`);
  }
  const stop = stopReason(receipts);
  const lastReceipted = Math.max(-1, ...[...completed].filter((s) => s < stepCount));
  const missing: number[] = [];
  for (let step = 0; step < stepCount; step++) if (!completed.has(step)) missing.push(step);
  const gaps = stop === null ? missing : missing.filter((step) => step < lastReceipted);
  if (gaps.length > 0) {
    problems.push(`no step.completed for step${gaps.length === 1 ? '' : 's'} ${gaps.join(', ')}${stop === null ? ' and no recorded error stopped the run' : ''}`);
  }
  const okDetail =
    missing.length === 0
      ? `all ${stepCount} steps have a receipt`
      : `${stepCount - missing.length} of ${stepCount} steps have a receipt; the run stopped early (${stop ?? ''})`;
  return outcome('every_step_has_receipt', problems, okDetail);
}

function stopReason(receipts: readonly EvidenceReceipt[]): string | null {
  for (const r of receipts) {
    if (r.type === 'step.completed' && r.error_code !== undefined) return `${r.error_code} at step ${r.step_index}`;
    // No exit code: the sandbox ended under the step (the workload stopped it); nothing ran after.
    if (r.type === 'step.completed' && r.exit_code === null) return `the sandbox ended during step ${r.step_index}`;
    if (r.type === 'run.failed' || r.type === 'run.rolled_back') return `${r.type} ${r.error_code}`;
    if (r.type === 'run.cancelled') return `run.cancelled${r.error_code === undefined ? '' : ` ${r.error_code}`}`;
  }
  return null;
}

/** Receipt cap name → the frozen cap and the spec cap it may not exceed. */
const CAP_FIELDS: readonly { granted: keyof GrantedCaps; frozen: keyof FrozenCaps | null; spec: keyof CapsSpec }[] = [
  { granted: 'wall_seconds', frozen: 'wallSeconds', spec: 'wallSeconds' },
  { granted: 'memory_mib', frozen: 'memoryMiB', spec: 'memoryMiB' },
  { granted: 'pids', frozen: 'pids', spec: 'pids' },
  { granted: 'disk_mib', frozen: 'diskMiB', spec: 'diskMiB' },
  { granted: 'cpus', frozen: null, spec: 'cpus' },
];

/**
 * Each `sandbox.created` records caps no higher than the frozen caps, the spec's caps (where the
 * spec set them) and the caps policy granted (the last `policy.decided` that names caps before it).
 */
function capsHonoured(receipts: readonly EvidenceReceipt[], frozen: CapLimits): InvariantOutcome {
  const specCaps = ofType(receipts, 'run.submitted')[0]?.spec.caps;
  let granted: GrantedCaps | undefined;
  const problems: string[] = [];
  let sandboxes = 0;
  for (const r of receipts) {
    if (r.type === 'policy.decided' && r.caps !== undefined) granted = r.caps;
    if (r.type !== 'sandbox.created') continue;
    sandboxes++;
    for (const field of CAP_FIELDS) {
      const value: unknown = (r.caps as Partial<GrantedCaps> | undefined)?.[field.granted];
      const where = `${r.container_name} ${field.granted}`;
      if (typeof value !== 'number' || !Number.isFinite(value)) {
        problems.push(`${where} is not recorded`);
        continue;
      }
      if (field.frozen !== null && value > frozen[field.frozen]) problems.push(`${where} ${value} exceeds the frozen cap ${frozen[field.frozen]}`);
      const asked = specCaps?.[field.spec];
      if (asked !== undefined && value > asked) problems.push(`${where} ${value} exceeds the spec's ${asked}`);
      if (granted !== undefined && value > granted[field.granted]) problems.push(`${where} ${value} exceeds the ${granted[field.granted]} policy granted`);
    }
  }
  return outcome('caps_honoured', problems, sandboxes === 0 ? 'no sandbox was created' : `${sandboxes} sandbox(es) within their caps`);
}

/** I-8: a `sandbox.destroyed` with `verified_gone: true` follows every `sandbox.created` (matched by container name). */
function teardown(receipts: readonly EvidenceReceipt[]): InvariantOutcome {
  const problems: string[] = [];
  // container name → whether a destroy was attempted without being verified.
  const open = new Map<string, boolean>();
  let created = 0;
  for (const r of receipts) {
    if (r.type === 'sandbox.created') {
      created++;
      if (open.has(r.container_name)) problems.push(`${r.container_name} created again at seq ${r.seq} before it was destroyed`);
      open.set(r.container_name, false);
    } else if (r.type === 'sandbox.destroyed') {
      if (!open.has(r.container_name)) continue; // a reaper may report a sandbox this chain already closed
      if (r.verified_gone) open.delete(r.container_name);
      else open.set(r.container_name, true);
    }
  }
  for (const [name, attempted] of open) {
    problems.push(attempted ? `${name} was destroyed but never verified gone` : `${name} has no sandbox.destroyed`);
  }
  return outcome('teardown', problems, created === 0 ? 'no sandbox was created' : `${created} sandbox(es) destroyed and verified gone`);
}

/** Every artifact hash in `step.completed`/`run.executed` equals the hash recomputed from the stored bytes. */
function artifactsRehashed(receipts: readonly EvidenceReceipt[], recomputed: ReadonlyMap<string, string>): InvariantOutcome {
  const claimed = new Map<string, string>(); // "path sha" → path, deduplicated
  for (const r of receipts) {
    if (r.type !== 'step.completed' && r.type !== 'run.executed') continue;
    for (const [path, sha] of Object.entries(r.artifact_hashes)) claimed.set(`${path} ${sha}`, path);
  }
  const problems: string[] = [];
  for (const [key, path] of claimed) {
    const sha = key.slice(path.length + 1);
    const again = recomputed.get(sha);
    if (again === undefined) problems.push(`the bytes of ${path} (${sha}) were not available`);
    else if (again !== sha) problems.push(`${path} is recorded as ${sha} but its bytes hash to ${again}`);
  }
  return outcome('artifacts_rehashed', problems, claimed.size === 0 ? 'no artifacts were recorded' : `${claimed.size} artifact hash(es) recomputed and equal`);
}
