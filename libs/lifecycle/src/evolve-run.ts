import {
  CairnError,
  type ErrorCode,
  type EvidenceReceipt,
  type EvidenceReceiptOf,
  GENESIS_HASH,
  isEventType,
  type ReceiptEnvelope,
  type RunState,
  type Verdict,
} from '@cairn/contracts';
import { canTransition, failureState, isTerminal } from './run-transitions.js';

/** The projection of one run's chain: what the dashboard, REST and CLI show. Plain data, so it stores and compares as-is. */
export interface RunView {
  readonly runId: string;
  readonly tenant: string;
  /** The RunSpec's name; null only when the chain did not start with `run.submitted`. */
  readonly name: string | null;
  /** The RunSpec's `job`: runs sharing it share the job's budget. */
  readonly job: string | null;
  readonly state: RunState;
  /** Why the run ended FAILED, ROLLBACK, REJECTED or CANCELLED; null otherwise. */
  readonly errorCode: ErrorCode | null;
  readonly verdict: Verdict | null;
  /** From the first `grade.recorded` (the first grade wins, I-11). */
  readonly score: number | null;
  readonly maxScore: number | null;
  readonly upperBound: number | null;
  /** RFC 3339 `ts` of the first and of the latest receipt. */
  readonly createdAt: string;
  readonly updatedAt: string;
  readonly lastSeq: number;
  readonly headHash: string;
  /** Receipts applied, faults included. */
  readonly eventCount: number;
  /** A `run.sealed` has been applied; anything after it is a fault. */
  readonly sealed: boolean;
  /** The CPUs policy granted (allowed or held); null when it granted none. */
  readonly cpus: number | null;
  /** `ts` of the run's `sandbox.created` and of its `sandbox.destroyed`: its sandbox time, for budgets. */
  readonly startedAt: string | null;
  readonly endedAt: string | null;
  /**
   * The current attempt has been placed: a `run.scheduled` came after the last `run.retried` (or,
   * with none, at all). Only a placed attempt can lose its worker (ADR 0035), so `run.retried` from
   * AWAITING_APPROVAL is a fault when the hold is a run approval before any placement.
   */
  readonly placed: boolean;
}

/** What a run view folds from: `foldRun(receipts)` starts here. */
export function initialRunView(): RunView | null {
  return null;
}

/** Any receipt the log may hold: a known one, or one whose type Cairn does not know (stopped by I-5). */
export type RunReceipt = EvidenceReceipt | ReceiptEnvelope;

type Outcome =
  | { readonly kind: 'stay'; readonly patch?: Partial<RunView> }
  | { readonly kind: 'move'; readonly to: RunState; readonly errorCode?: ErrorCode | null; readonly patch?: Partial<RunView> }
  | { readonly kind: 'fault'; readonly code: 'E_UNKNOWN_STATE' | 'E_CHAIN_BROKEN' };

const STAY: Outcome = { kind: 'stay' };
const UNKNOWN: Outcome = { kind: 'fault', code: 'E_UNKNOWN_STATE' };
const BROKEN: Outcome = { kind: 'fault', code: 'E_CHAIN_BROKEN' };

function isKnown(receipt: RunReceipt): receipt is EvidenceReceipt {
  return isEventType(receipt.type);
}

function stayIn(state: RunState, allowed: readonly RunState[], patch?: Partial<RunView>): Outcome {
  if (!allowed.includes(state)) return UNKNOWN;
  return patch === undefined ? STAY : { kind: 'stay', patch };
}

function moveFrom(state: RunState, allowed: readonly RunState[], to: RunState, patch?: Partial<RunView>): Outcome {
  if (!allowed.includes(state)) return UNKNOWN;
  return patch === undefined ? { kind: 'move', to } : { kind: 'move', to, patch };
}

function fail(state: RunState, code: ErrorCode): Outcome {
  return isTerminal(state) ? UNKNOWN : { kind: 'move', to: failureState(code, state), errorCode: code };
}

const ENDED_UNSEALED: readonly RunState[] = ['FAILED', 'ROLLBACK', 'REJECTED', 'CANCELLED'];
/** Where a cancel request may land: before the run runs, and while it runs (the runtime answers it). */
const CANCEL_REQUESTABLE: readonly RunState[] = ['SUBMITTED', 'AWAITING_APPROVAL', 'SCHEDULED', 'RUNNING'];
const ALL_UNSEALED: readonly RunState[] = ['SUBMITTED', 'AWAITING_APPROVAL', 'SCHEDULED', 'RUNNING', 'EXECUTED', 'VERIFIED', 'GRADED', ...ENDED_UNSEALED];

function policyOutcome(receipt: EvidenceReceiptOf<'policy.decided'>): Outcome {
  const patch = { cpus: receipt.caps?.cpus ?? null };
  switch (receipt.decision) {
    case 'allow':
      return { kind: 'stay', patch }; // scheduling moves it on
    case 'hold':
      return { kind: 'move', to: 'AWAITING_APPROVAL', patch };
    case 'deny':
      return { kind: 'move', to: 'REJECTED', errorCode: receipt.error_code ?? 'E_POLICY_DENIED' };
  }
}

/** Which state a known receipt moves a (not yet sealed) run to. */
function decide(view: RunView, receipt: EvidenceReceipt): Outcome {
  const state = view.state;
  switch (receipt.type) {
    case 'run.submitted':
      return UNKNOWN; // only ever first
    case 'policy.decided':
      return state === 'SUBMITTED' ? policyOutcome(receipt) : UNKNOWN;
    case 'approval.requested':
      return receipt.scope === 'run'
        ? moveFrom(state, ['SUBMITTED', 'AWAITING_APPROVAL'], 'AWAITING_APPROVAL')
        : moveFrom(state, ['SCHEDULED', 'RUNNING', 'AWAITING_APPROVAL'], 'AWAITING_APPROVAL');
    case 'approval.granted':
      return stayIn(state, ['AWAITING_APPROVAL']); // the scheduler or the next step moves it on
    case 'approval.rejected':
      return state === 'AWAITING_APPROVAL' ? { kind: 'move', to: 'CANCELLED', errorCode: 'E_NO_APPROVAL' } : UNKNOWN;
    case 'run.scheduled':
      // SCHEDULED again: a lease re-offered before any step ran.
      return moveFrom(state, ['SUBMITTED', 'AWAITING_APPROVAL', 'SCHEDULED'], 'SCHEDULED');
    case 'sandbox.created':
      return moveFrom(state, ['SCHEDULED', 'RUNNING'], 'RUNNING', { startedAt: view.startedAt ?? receipt.ts, endedAt: null });
    case 'step.started':
      return moveFrom(state, ['SCHEDULED', 'RUNNING', 'AWAITING_APPROVAL'], 'RUNNING');
    case 'step.completed':
      // A non-zero exit is a result, not a failure. After a failure the stopped step's receipt may still land.
      return stayIn(state, ['RUNNING', 'FAILED', 'ROLLBACK', 'CANCELLED']);
    case 'sandbox.destroyed':
      // AWAITING_APPROVAL: a step held for approval keeps its sandbox, which a cancel may stop.
      return stayIn(state, ['RUNNING', 'AWAITING_APPROVAL', 'FAILED', 'ROLLBACK', 'CANCELLED'], { endedAt: receipt.ts });
    case 'run.executed':
      return moveFrom(state, ['RUNNING'], 'EXECUTED');
    case 'kernel.facts':
      return stayIn(state, ['EXECUTED']);
    case 'verification.completed':
      // A verification that names an error (a regression gate that failed: E_GATE_FAIL) ends the
      // run in that error's state (ROLLBACK), its verdict kept; the grader seals it without a grade.
      if (receipt.error_code !== undefined) {
        return state === 'EXECUTED'
          ? { kind: 'move', to: failureState(receipt.error_code, state), errorCode: receipt.error_code, patch: { verdict: receipt.verdict } }
          : UNKNOWN;
      }
      return moveFrom(state, ['EXECUTED'], 'VERIFIED', { verdict: receipt.verdict });
    case 'grade.recorded':
      if (state === 'GRADED') return STAY; // the first grade wins (I-11); later ones change nothing
      return moveFrom(state, ['VERIFIED'], 'GRADED', {
        score: receipt.score,
        maxScore: receipt.max_score,
        upperBound: receipt.upper_bound,
      });
    case 'grade.failed':
      return stayIn(state, ['VERIFIED']); // not final; may be retried before the seal
    case 'judge.requested':
    case 'judge.answered':
    case 'grade.requested':
      return stayIn(state, ['VERIFIED']); // a judgement, or a request to grade again, before the grade (docs/adr/0030)
    case 'run.failed':
      return fail(state, receipt.error_code);
    case 'run.retried':
      // The worker holding the run was lost with attempts left (ADR 0035): back in the queue. Only
      // a placed attempt has a worker to lose: a run approval held before any placement (or since
      // the last run.retried) is AWAITING_APPROVAL too, and a run.retried there is a fault.
      if (!view.placed) return UNKNOWN;
      return moveFrom(state, ['SCHEDULED', 'RUNNING', 'AWAITING_APPROVAL'], 'SUBMITTED');
    case 'run.rolled_back':
      if (state === 'ROLLBACK') return STAY; // the rollback a run.failed started has finished
      return isTerminal(state) ? UNKNOWN : { kind: 'move', to: 'ROLLBACK', errorCode: receipt.error_code };
    case 'run.cancel_requested':
      // Ends nothing: the run keeps its state, so the receipts of the work in flight and of its
      // teardown still land, and the runtime's `run.cancelled` ends it.
      return stayIn(state, CANCEL_REQUESTABLE);
    case 'run.cancelled':
      return isTerminal(state) ? UNKNOWN : { kind: 'move', to: 'CANCELLED', errorCode: receipt.error_code ?? null };
    case 'run.sealed': {
      // The seal names the state it closes; a seal that disagrees with the chain is a fault.
      const closes: RunState | null = state === 'VERIFIED' || state === 'GRADED' ? 'SEALED' : ENDED_UNSEALED.includes(state) ? state : null;
      if (closes === null || receipt.final_state !== closes) return UNKNOWN;
      return closes === 'SEALED' ? { kind: 'move', to: 'SEALED' } : STAY;
    }
    case 'egress.denied':
    case 'secret.redacted':
    case 'alert.raised':
      return stayIn(state, ALL_UNSEALED);
    // Sandbox-session and admin receipts belong to other chains; on a run's chain they are unknown.
    case 'sandbox.requested':
    case 'sandbox.exec.started':
    case 'sandbox.exec.completed':
    case 'sandbox.file.written':
    case 'sandbox.file.read':
    case 'sandbox.expired':
    case 'admin.tenant_created':
    case 'admin.key_created':
    case 'admin.key_rotated':
    case 'admin.key_revoked':
    case 'admin.policy_changed':
      return UNKNOWN;
  }
}

function apply(view: RunView, receipt: RunReceipt, outcome: Outcome): RunView {
  const base: RunView = {
    ...view,
    updatedAt: receipt.ts,
    lastSeq: receipt.seq,
    headHash: receipt.hash,
    eventCount: view.eventCount + 1,
    // A seal is a seal even when it came at the wrong time: nothing may follow it.
    sealed: view.sealed || receipt.type === 'run.sealed',
    // Set by every receipt applied, a fault too, so it is what the chain's receipts say (the
    // migration that added it reads the same off evidence_events).
    placed: receipt.type === 'run.scheduled' ? true : receipt.type === 'run.retried' ? false : view.placed,
  };
  switch (outcome.kind) {
    case 'fault':
      return { ...base, state: 'FAILED', errorCode: outcome.code };
    case 'stay':
      return { ...base, ...outcome.patch };
    case 'move':
      // The tables in decide() and RUN_TRANSITIONS must agree; if they ever do not, fail closed.
      if (outcome.to !== view.state && !canTransition(view.state, outcome.to)) {
        return { ...base, state: 'FAILED', errorCode: 'E_UNKNOWN_STATE' };
      }
      return {
        ...base,
        ...outcome.patch,
        state: outcome.to,
        errorCode: outcome.errorCode === undefined ? view.errorCode : outcome.errorCode,
      };
  }
}

function firstView(receipt: RunReceipt): RunView {
  if (!receipt.run_id.startsWith('run_')) {
    throw new CairnError('E_INTERNAL', `evolveRun folds run chains only, not ${receipt.run_id}`);
  }
  const view: RunView = {
    runId: receipt.run_id,
    tenant: receipt.tenant,
    name: null,
    job: null,
    state: 'SUBMITTED',
    errorCode: null,
    verdict: null,
    score: null,
    maxScore: null,
    upperBound: null,
    createdAt: receipt.ts,
    updatedAt: receipt.ts,
    lastSeq: 0,
    headHash: GENESIS_HASH,
    eventCount: 0,
    sealed: false,
    cpus: null,
    startedAt: null,
    endedAt: null,
    placed: false,
  };
  if (receipt.seq !== 1 || receipt.prev_hash !== GENESIS_HASH) return apply(view, receipt, BROKEN);
  if (!isKnown(receipt) || receipt.type !== 'run.submitted') return apply(view, receipt, UNKNOWN);
  return apply({ ...view, name: receipt.spec.name, job: receipt.spec.job ?? null }, receipt, STAY);
}

/**
 * Folds one receipt of a run's chain into its view. Pure and total, so a projection rebuilt from
 * the log equals the live one (I-10). Receipts are expected parsed (`parseEvidenceReceipt`); an
 * unknown type, a transition the lifecycle does not allow, or anything after `run.sealed` moves the
 * run to FAILED with E_UNKNOWN_STATE (I-5); a gap or a wrong `prev_hash` to FAILED with
 * E_CHAIN_BROKEN. A receipt at or below `lastSeq` is a redelivery and changes nothing.
 * Throws only when misused: a receipt of another chain.
 */
export function evolveRun(view: RunView | null, receipt: RunReceipt): RunView {
  if (view === null) return firstView(receipt);
  if (receipt.run_id !== view.runId) {
    throw new CairnError('E_INTERNAL', `receipt of ${receipt.run_id} folded into the view of ${view.runId}`);
  }
  if (receipt.seq <= view.lastSeq) return view;
  if (receipt.seq !== view.lastSeq + 1 || receipt.prev_hash !== view.headHash || receipt.tenant !== view.tenant) {
    return apply(view, receipt, BROKEN);
  }
  if (view.sealed || !isKnown(receipt)) return apply(view, receipt, UNKNOWN);
  return apply(view, receipt, decide(view, receipt));
}

/** The view of a whole chain, in order; null for an empty one. */
export function foldRun(receipts: Iterable<RunReceipt>, from: RunView | null = initialRunView()): RunView | null {
  let view = from;
  for (const receipt of receipts) view = evolveRun(view, receipt);
  return view;
}
