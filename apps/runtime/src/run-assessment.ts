import { parseEvidenceReceipt } from '@cairn/contracts';
import type { ErrorCode, EventType, EvidenceReceipt, EvidenceReceiptOf, GrantedCaps, InputFile, RunSpec } from '@cairn/contracts';
import { attemptOf, foldRun, isTerminal, pendingCancelRequest } from '@cairn/lifecycle';
import { splitImageRef } from '@cairn/policy';
import type { SandboxFileIn } from '@cairn/sandbox';
import { planSteps } from './step-plan.js';
import type { PlannedStep } from './step-plan.js';

/** What a runtime does with a `run.scheduled` receipt, decided from the run's chain alone. */
export type Assessment =
  /** Not this worker's to act on (another worker's, ended, superseded): ack and do nothing. */
  | { kind: 'ignore'; reason: string }
  /**
   * A sandbox was created for this placement and the run never finished: whoever ran it is gone
   * (a crash, a redelivery). Never run a step twice unasked: reap and fail it `E_WORKER_LOST`.
   */
  | { kind: 'lost'; containerName: string; teardownRecorded: boolean }
  /** The run cannot start here; fail it with `code` before any sandbox exists. */
  | { kind: 'refuse'; code: ErrorCode; message: string; stepIndex?: number }
  | { kind: 'execute'; plan: RunPlan };

/** Everything needed to run a placed run, from `run.submitted` and policy's decision. */
export interface RunPlan {
  runId: string;
  /** The image as granted, without digest (`cairn/sandbox-busybox:1`). */
  image: string;
  /** The digest (image id) policy pinned, if any: the local image must be exactly it. */
  imageDigest: string | null;
  caps: GrantedCaps;
  steps: PlannedStep[];
  files: SandboxFileIn[];
  outputs: string[];
  /** Steps policy holds for a person's approval, each requested before its step runs. */
  stepApprovals: StepApprovalPlan[];
  /** What the run may use while it runs (policy's `budget`); null: no such budget. */
  budget: { outputBytesPerStep: number | null; runSeconds: number | null };
  /** `none`, or the egress policy granted: the sandbox gets an internal network and an allowlisting proxy. */
  network: RunNetwork;
  /** Names of the secrets policy let the run have: mounted at /run/secrets/NAME, values read when it starts. */
  secrets: string[];
}

export type RunNetwork = 'none' | { egress: string[]; allowPrivate: boolean };

/** A step held for approval, as policy decided it (`policy.decided.step_approvals`). */
export type StepApprovalPlan = NonNullable<EvidenceReceiptOf<'policy.decided'>['step_approvals']>[number];

export type ParsedChain = { ok: true; receipts: EvidenceReceipt[] } | { ok: false; seq: number | null; message: string };

/**
 * A stored chain, each receipt parsed with its contract. A chain holding a receipt that does not
 * parse is not one the runtime acts on (I-5): the caller reports it and runs nothing.
 */
export function parseChain(stored: readonly unknown[]): ParsedChain {
  const receipts: EvidenceReceipt[] = [];
  for (const raw of stored) {
    const parsed = parseEvidenceReceipt(raw);
    if (!parsed.ok) {
      const seq = typeof raw === 'object' && raw !== null && 'seq' in raw && typeof raw.seq === 'number' ? raw.seq : null;
      return { ok: false, seq, message: parsed.message };
    }
    receipts.push(parsed.receipt);
  }
  return { ok: true, receipts };
}

/** Receipts after which a run has ended for good: nothing of this worker's may follow them. */
const ENDING_TYPES: ReadonlySet<string> = new Set(['run.failed', 'run.rolled_back', 'run.cancelled', 'run.sealed']);

/**
 * How this worker ends a run whose chain holds a receipt that breaks its contract — an event type
 * Cairn does not know, or a known type with fields its contract refuses (I-5: an unknown state or
 * event type stops the run, FAILED E_UNKNOWN_STATE; never continue). Nothing, when a receipt that
 * does parse already ended it; otherwise `run.failed` E_UNKNOWN_STATE naming the first bad seq.
 */
export function unknownStateEnding(stored: readonly unknown[]): { kind: 'none'; reason: string } | { kind: 'failed'; message: string } {
  let bad: { seq: number | null; message: string } | null = null;
  for (const raw of stored) {
    const parsed = parseEvidenceReceipt(raw);
    if (parsed.ok) {
      if (ENDING_TYPES.has(parsed.receipt.type)) return { kind: 'none', reason: `the run has ended (${parsed.receipt.type} at seq ${parsed.receipt.seq})` };
      continue;
    }
    if (bad === null) {
      const seq = typeof raw === 'object' && raw !== null && 'seq' in raw && typeof raw.seq === 'number' ? raw.seq : null;
      bad = { seq, message: parsed.message };
    }
  }
  if (bad === null) return { kind: 'none', reason: 'every receipt meets its contract' };
  return { kind: 'failed', message: `the run's chain holds a receipt that breaks its contract (seq ${bad.seq ?? '?'}): ${bad.message}; the run is stopped` };
}

function isType<T extends EventType>(type: T) {
  return (receipt: EvidenceReceipt): receipt is EvidenceReceiptOf<T> => receipt.type === type;
}

/** The last `run.scheduled` on the chain that placed the run on `workerId`, if any. */
export function lastPlacementOn(chain: readonly EvidenceReceipt[], workerId: string): EvidenceReceiptOf<'run.scheduled'> | null {
  const placements = chain.filter(isType('run.scheduled')).filter((r) => r.worker_id === workerId);
  return placements.at(-1) ?? null;
}

/**
 * Decides what the runtime of `workerId` does with `scheduled` given the chain as stored now.
 * Fails closed: anything it does not recognise is ignored or refused, never run.
 */
export function assessScheduled(chain: readonly EvidenceReceipt[], scheduled: EvidenceReceiptOf<'run.scheduled'>, workerId: string): Assessment {
  if (scheduled.worker_id !== workerId) return { kind: 'ignore', reason: `placed on worker ${scheduled.worker_id}` };
  const view = foldRun(chain);
  if (view === null) return { kind: 'ignore', reason: 'the chain is empty' };
  if (view.sealed || isTerminal(view.state)) return { kind: 'ignore', reason: `the run has ended (${view.state})` };

  const after = chain.filter((r) => r.seq > scheduled.seq);
  if (after.some(isType('run.scheduled'))) return { kind: 'ignore', reason: 'a later placement superseded this one' };
  // Its attempt was lost and retried (ADR 0035): the next placement runs the run; this worker
  // writes nothing more (the lease fence), and its reconcile reaps what it left.
  if (after.some(isType('run.retried'))) return { kind: 'ignore', reason: 'this attempt was lost and retried' };
  const created = after.find(isType('sandbox.created'));
  if (created !== undefined) {
    if (after.some(isType('run.executed'))) return { kind: 'ignore', reason: 'the run was executed' };
    const teardownRecorded = after.some((r) => isType('sandbox.destroyed')(r) && r.container_name === created.container_name);
    return { kind: 'lost', containerName: created.container_name, teardownRecorded };
  }
  if (view.state !== 'SCHEDULED') return { kind: 'ignore', reason: `the run is ${view.state}, not SCHEDULED` };

  const before = chain.filter((r) => r.seq < scheduled.seq);
  const submitted = before.find(isType('run.submitted'));
  const decision = before.filter(isType('policy.decided')).at(-1);
  if (submitted === undefined) return { kind: 'refuse', code: 'E_UNKNOWN_STATE', message: 'the chain has no run.submitted before its placement' };
  if (decision === undefined || decision.decision === 'deny') {
    return { kind: 'refuse', code: 'E_UNKNOWN_STATE', message: 'the run was placed without a policy decision that lets it run' };
  }
  if (decision.caps === undefined || decision.image === undefined) {
    return { kind: 'refuse', code: 'E_UNKNOWN_STATE', message: 'the policy decision names no caps or no image' };
  }
  return planRun(submitted.spec, decision, decision.caps, decision.image, view.runId);
}

function planRun(spec: RunSpec, decision: EvidenceReceiptOf<'policy.decided'>, caps: GrantedCaps, grantedImage: string, runId: string): Assessment {
  // Egress is what policy granted, never what the spec asked for; a grant missing is refused, not guessed.
  let network: RunNetwork = 'none';
  if (spec.network !== undefined && spec.network !== 'none') {
    if (decision.network === undefined) {
      return { kind: 'refuse', code: 'E_UNKNOWN_STATE', message: 'the run asks for egress, but its policy decision grants none' };
    }
    network = { egress: [...decision.network.egress], allowPrivate: decision.network.allow_private };
  }
  const steps = planSteps(spec.steps, caps);
  if (!steps.ok) return { kind: 'refuse', code: 'E_POLICY_DENIED', message: steps.message, stepIndex: steps.stepIndex };
  const secrets = secretsAllowedBy(spec.secrets ?? [], decision);
  if (!secrets.ok) return { kind: 'refuse', code: 'E_POLICY_DENIED', message: secrets.message };
  const { name, digest } = splitImageRef(grantedImage);
  return {
    kind: 'execute',
    plan: {
      runId,
      image: name,
      imageDigest: digest,
      caps,
      steps: steps.steps,
      files: (spec.files ?? []).map(inputFile),
      outputs: [...(spec.outputs ?? [])],
      stepApprovals: (decision.step_approvals ?? []).map((approval) => ({ ...approval })),
      budget: { outputBytesPerStep: decision.budget?.output_bytes_per_step ?? null, runSeconds: decision.budget?.run_seconds ?? null },
      network,
      secrets: secrets.names,
    },
  };
}

/**
 * The secrets a worker may open for a run or sandbox (ADR 0028): those its spec lists, each named
 * by its policy decision's `secrets`. One the decision does not name (a decision recorded before
 * decisions named them, or one that did not allow it) refuses the run E_POLICY_DENIED: its value is
 * never read.
 */
export function secretsAllowedBy(listed: readonly string[], decision: { secrets?: readonly string[] | undefined }): { ok: true; names: string[] } | { ok: false; message: string } {
  const allowed = new Set(decision.secrets ?? []);
  const refused = listed.filter((name) => !allowed.has(name));
  if (refused.length > 0) return { ok: false, message: `secrets: ${refused.join(', ')} not allowed by the run's policy decision, so not opened` };
  return { ok: true, names: [...listed] };
}

export function inputFile(file: InputFile): SandboxFileIn {
  const content = new Uint8Array(Buffer.from(file.content, file.encoding === 'base64' ? 'base64' : 'utf8'));
  return file.mode === undefined ? { path: file.path, content } : { path: file.path, content, mode: file.mode };
}

/**
 * Whether a step held for approval (`approval_id`) was granted in the run's current attempt: an
 * approval is for one execution, so one granted in an attempt lost to its worker is asked again
 * (ADR 0035 point 4).
 */
export function approvalGranted(chain: readonly EvidenceReceipt[], approvalId: string): boolean {
  return attemptOf(chain).some((r) => r.type === 'approval.granted' && r.approval_id === approvalId);
}

/** Why a run stops from outside while this worker runs it. */
export type StopCause =
  /** A cancel was asked (`run.cancel_requested`), or the run was cancelled before it got going. */
  | { kind: 'cancelled' }
  /** Someone else ended it (the scheduler failed it for a lost worker, …). */
  | { kind: 'ended'; state: string }
  /** The lease is another's or gone: the scheduler decides this run now. */
  | { kind: 'lease_lost'; reason: string }
  /** A secret was seen in what this worker was about to record or log (a name, a host): the run ends E_SECRET_SEEN. */
  | { kind: 'secret_seen' }
  /**
   * Its chain as stored does not verify — a message on it that is not a receipt, or a receipt this
   * worker did not write whose hash does not recompute (ADR 0033): the run ends E_CHAIN_BROKEN.
   */
  | { kind: 'chain_broken'; reason: string };

/** What the chain as stored says about a run this worker is running: go on (null), or stop and why. */
export function stopCauseOf(chain: readonly EvidenceReceipt[]): StopCause | null {
  const view = foldRun(chain);
  if (view === null) return null;
  if (view.sealed || isTerminal(view.state)) return view.state === 'CANCELLED' ? { kind: 'cancelled' } : { kind: 'ended', state: view.state };
  return pendingCancelRequest(chain, view) === null ? null : { kind: 'cancelled' };
}

/** The run's last receipt from this worker, decided from the chain as stored when it is appended. */
export type Ending =
  | { kind: 'none'; reason: string }
  | { kind: 'executed' }
  | { kind: 'failed' }
  /** Answers the pending request (`run.cancelled` caused by it). */
  | { kind: 'cancelled'; request: EvidenceReceiptOf<'run.cancel_requested'> };

/**
 * How this worker ends a run it ran (`outcome`), given the chain now. A run someone else ended
 * gets nothing more. A failure is recorded as what happened, cancel asked or not (the run has
 * stopped either way). Otherwise a pending cancel request wins — also over steps that had all
 * finished: `run.executed` never follows a request — and is answered with `run.cancelled`.
 */
export function decideEnding(chain: readonly EvidenceReceipt[], outcome: 'executed' | 'failed' | 'stopped'): Ending {
  const view = foldRun(chain);
  if (view === null) return { kind: 'none', reason: 'the chain is empty' };
  if (view.sealed || isTerminal(view.state)) return { kind: 'none', reason: `the run has ended (${view.state})` };
  if (outcome === 'failed') return { kind: 'failed' };
  const request = pendingCancelRequest(chain, view);
  if (request !== null) return { kind: 'cancelled', request };
  if (outcome === 'executed') return { kind: 'executed' };
  return { kind: 'none', reason: 'stopped, and no cancel is pending' };
}
