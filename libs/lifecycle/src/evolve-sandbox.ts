import { CairnError, GENESIS_HASH, isEventType } from '@cairn/contracts';
import type { ErrorCode, EvidenceReceipt, EvidenceReceiptOf, GrantedCaps, NetworkSpec, ReceiptEnvelope, SandboxDestroyReason, SandboxState } from '@cairn/contracts';
import { readChainWith } from './run-chain.reader.js';

/** The fold of one sandbox's chain (`sbx_…`): plain data, so it stores and compares as-is. */
export interface SandboxView {
  readonly id: string;
  readonly tenant: string;
  readonly state: SandboxState;
  /** The image policy granted (or the one asked for, before policy decided); null when neither. */
  readonly image: string | null;
  /** The image actually started (`sha256:…`), from `sandbox.created`. */
  readonly imageId: string | null;
  /** The caps policy granted; null before policy decided (or when it denied). */
  readonly caps: GrantedCaps | null;
  /** The network the spec asked for; `none` when it asked for nothing. */
  readonly network: NetworkSpec;
  readonly workerId: string | null;
  /** `ts` of `sandbox.requested`, of `sandbox.created`, and the chain's `expires_at`. */
  readonly createdAt: string;
  readonly readyAt: string | null;
  readonly expiresAt: string | null;
  /** null on chains whose `sandbox.requested` predates idle limits. */
  readonly idleSeconds: number | null;
  /** `ts` of the last operation's receipt, else of `sandbox.created`, else of `sandbox.requested`. */
  readonly lastActivityAt: string;
  /** Completed operations: execs, file writes and reads. */
  readonly operations: number;
  readonly destroyReason: SandboxDestroyReason | null;
  readonly errorCode: ErrorCode | null;
  readonly headSeq: number;
  readonly headHash: string;
  readonly sealed: boolean;
  readonly updatedAt: string;
}

export type SandboxReceipt = EvidenceReceipt | ReceiptEnvelope;

type Outcome =
  | { readonly kind: 'stay'; readonly patch?: Partial<SandboxView> }
  | { readonly kind: 'move'; readonly to: SandboxState; readonly patch?: Partial<SandboxView> }
  | { readonly kind: 'fault'; readonly code: 'E_UNKNOWN_STATE' | 'E_CHAIN_BROKEN' };

const UNKNOWN: Outcome = { kind: 'fault', code: 'E_UNKNOWN_STATE' };
const BROKEN: Outcome = { kind: 'fault', code: 'E_CHAIN_BROKEN' };
const LIMIT_CODES: readonly string[] = ['E_TIMEOUT', 'E_MEM_LIMIT', 'E_PROC_LIMIT', 'E_DISK_LIMIT'];
/** The states a sandbox ends in; only these may be sealed. */
const ENDED: readonly SandboxState[] = ['DESTROYED', 'REJECTED', 'FAILED'];

function stayIn(state: SandboxState, allowed: readonly SandboxState[], patch?: Partial<SandboxView>): Outcome {
  if (!allowed.includes(state)) return UNKNOWN;
  return patch === undefined ? { kind: 'stay' } : { kind: 'stay', patch };
}

function moveFrom(state: SandboxState, allowed: readonly SandboxState[], to: SandboxState, patch?: Partial<SandboxView>): Outcome {
  if (!allowed.includes(state)) return UNKNOWN;
  return patch === undefined ? { kind: 'move', to } : { kind: 'move', to, patch };
}

/** What a `sandbox.destroyed` reason says to a person; the expiry's cause decides `expired`. */
function destroyReasonOf(reason: EvidenceReceiptOf<'sandbox.destroyed'>['reason'], view: SandboxView): SandboxDestroyReason {
  switch (reason) {
    case 'deleted':
    case 'ttl':
    case 'idle':
    case 'limit':
    case 'worker_lost':
    case 'failed':
      return reason;
    case 'expired':
      return view.destroyReason ?? 'ttl';
    case 'reaped':
      return 'worker_lost';
    case 'completed':
    case 'cancelled':
      return 'deleted';
  }
}

function policyOutcome(view: SandboxView, receipt: EvidenceReceiptOf<'policy.decided'>): Outcome {
  if (view.state !== 'PENDING') return UNKNOWN;
  switch (receipt.decision) {
    case 'allow':
      return { kind: 'stay', patch: { caps: receipt.caps ?? null, image: receipt.image ?? view.image } };
    case 'deny':
      return { kind: 'move', to: 'REJECTED', patch: { errorCode: receipt.error_code ?? 'E_POLICY_DENIED' } };
    case 'hold':
      return UNKNOWN; // a session is never held for approval: policy allows or denies it
  }
}

function sealOutcome(view: SandboxView, receipt: EvidenceReceiptOf<'run.sealed'>): Outcome {
  const closes = view.state === 'DESTROYED' ? 'SEALED' : view.state === 'REJECTED' || view.state === 'FAILED' ? view.state : null;
  if (closes === null || receipt.final_state !== closes) return UNKNOWN;
  return { kind: 'stay' };
}

/** Which state a known receipt moves a (not yet sealed) sandbox to. */
function decide(view: SandboxView, receipt: EvidenceReceipt): Outcome {
  const state = view.state;
  switch (receipt.type) {
    case 'sandbox.requested':
      return UNKNOWN; // only ever first
    case 'policy.decided':
      return policyOutcome(view, receipt);
    case 'run.scheduled':
      return stayIn(state, ['PENDING'], { workerId: receipt.worker_id });
    case 'sandbox.created':
      return moveFrom(state, ['PENDING'], 'READY', {
        readyAt: receipt.ts,
        lastActivityAt: receipt.ts,
        imageId: receipt.image_digest,
        image: receipt.image,
        caps: receipt.caps,
        workerId: receipt.worker_id,
      });
    case 'sandbox.exec.started':
      return stayIn(state, ['READY'], { lastActivityAt: receipt.ts });
    case 'sandbox.exec.completed': {
      // A cap seen (limits_hit) ends the sandbox; E_TIMEOUT alone is the exec's own deadline, which it survives.
      const limit = receipt.error_code !== undefined && LIMIT_CODES.includes(receipt.error_code) && receipt.limits_hit.some((kind) => kind !== 'output_bytes') ? receipt.error_code : null;
      return stayIn(state, ['READY'], { lastActivityAt: receipt.ts, operations: view.operations + 1, ...(limit === null ? {} : { errorCode: limit }) });
    }
    case 'sandbox.file.written':
    case 'sandbox.file.read':
      return stayIn(state, ['READY'], { lastActivityAt: receipt.ts, operations: view.operations + 1 });
    case 'sandbox.expired':
      return stayIn(state, ['READY'], { destroyReason: receipt.cause ?? 'ttl' });
    case 'run.failed':
      return moveFrom(state, ['PENDING', 'READY'], 'FAILED', {
        errorCode: receipt.error_code,
        destroyReason: receipt.error_code === 'E_WORKER_LOST' ? 'worker_lost' : 'failed',
      });
    case 'sandbox.destroyed':
      if (state === 'FAILED') return { kind: 'stay' }; // the teardown of a failed session
      return moveFrom(state, ['READY'], 'DESTROYED', { destroyReason: destroyReasonOf(receipt.reason, view) });
    case 'run.cancelled':
      // Deleted before any sandbox was created (intake): nothing was started, or what a runtime
      // was starting meanwhile is refused its `sandbox.created` and destroyed off the record.
      return moveFrom(state, ['PENDING'], 'DESTROYED', { destroyReason: 'deleted' });
    case 'run.sealed':
      return sealOutcome(view, receipt);
    case 'egress.denied':
    case 'secret.redacted':
    case 'alert.raised':
      return { kind: 'stay' };
    // A run's lifecycle and admin receipts belong to other chains: on a sandbox's they are unknown.
    case 'run.submitted':
    case 'approval.requested':
    case 'approval.granted':
    case 'approval.rejected':
    case 'step.started':
    case 'step.completed':
    case 'run.executed':
    case 'kernel.facts':
    case 'verification.completed':
    case 'grade.recorded':
    case 'grade.failed':
    case 'grade.requested':
    case 'judge.requested':
    case 'judge.answered':
    case 'run.rolled_back':
    case 'run.retried':
    case 'run.cancel_requested':
    case 'admin.tenant_created':
    case 'admin.key_created':
    case 'admin.key_rotated':
    case 'admin.key_revoked':
    case 'admin.policy_changed':
      return UNKNOWN;
  }
}

function apply(view: SandboxView, receipt: SandboxReceipt, outcome: Outcome): SandboxView {
  const base: SandboxView = {
    ...view,
    headSeq: receipt.seq,
    headHash: receipt.hash,
    updatedAt: receipt.ts,
    sealed: view.sealed || receipt.type === 'run.sealed',
  };
  switch (outcome.kind) {
    case 'fault':
      return { ...base, state: 'FAILED', errorCode: outcome.code };
    case 'stay':
      return { ...base, ...outcome.patch };
    case 'move':
      return { ...base, ...outcome.patch, state: outcome.to };
  }
}

function firstView(receipt: SandboxReceipt): SandboxView {
  if (!receipt.run_id.startsWith('sbx_')) throw new CairnError('E_INTERNAL', `evolveSandbox folds sandbox chains only, not ${receipt.run_id}`);
  const view: SandboxView = {
    id: receipt.run_id,
    tenant: receipt.tenant,
    state: 'PENDING',
    image: null,
    imageId: null,
    caps: null,
    network: 'none',
    workerId: null,
    createdAt: receipt.ts,
    readyAt: null,
    expiresAt: null,
    idleSeconds: null,
    lastActivityAt: receipt.ts,
    operations: 0,
    destroyReason: null,
    errorCode: null,
    headSeq: 0,
    headHash: GENESIS_HASH,
    sealed: false,
    updatedAt: receipt.ts,
  };
  if (receipt.seq !== 1 || receipt.prev_hash !== GENESIS_HASH) return apply(view, receipt, BROKEN);
  if (!isEventType(receipt.type) || receipt.type !== 'sandbox.requested') return apply(view, receipt, UNKNOWN);
  const requested = receipt as EvidenceReceiptOf<'sandbox.requested'>;
  return apply(
    {
      ...view,
      image: requested.spec.image ?? null,
      network: requested.spec.network ?? 'none',
      expiresAt: requested.expires_at,
      idleSeconds: requested.idle_seconds ?? null,
    },
    receipt,
    { kind: 'stay' },
  );
}

/**
 * Folds one receipt of a sandbox's chain into its view. Pure and total, like `evolveRun`: an
 * unknown type, a move the session lifecycle does not allow, or anything after `run.sealed` makes
 * the sandbox FAILED with E_UNKNOWN_STATE (I-5); a gap or a wrong `prev_hash`, E_CHAIN_BROKEN. A
 * receipt at or below the head is a redelivery and changes nothing. Throws only when misused: a
 * receipt of another chain. Receipts are expected parsed (`parseEvidenceReceipt`).
 */
export function evolveSandbox(view: SandboxView | null, receipt: SandboxReceipt): SandboxView {
  if (view === null) return firstView(receipt);
  if (receipt.run_id !== view.id) throw new CairnError('E_INTERNAL', `receipt of ${receipt.run_id} folded into the view of ${view.id}`);
  if (receipt.seq <= view.headSeq) return view;
  if (receipt.seq !== view.headSeq + 1 || receipt.prev_hash !== view.headHash || receipt.tenant !== view.tenant) return apply(view, receipt, BROKEN);
  if (view.sealed || !isEventType(receipt.type)) return apply(view, receipt, UNKNOWN);
  return apply(view, receipt, decide(view, receipt as EvidenceReceipt));
}

/** The view of a whole sandbox chain, in order; null for an empty one. */
export function foldSandbox(receipts: Iterable<SandboxReceipt>, from: SandboxView | null = null): SandboxView | null {
  let view = from;
  for (const receipt of receipts) view = evolveSandbox(view, receipt);
  return view;
}

/** A sandbox that has ended and is not yet sealed: the sealer's cue. */
export function sandboxAwaitsSeal(view: SandboxView): boolean {
  return !view.sealed && ENDED.includes(view.state);
}

/** `run.sealed`'s final_state for an ended sandbox. */
export function sandboxFinalState(view: SandboxView): 'SEALED' | 'REJECTED' | 'FAILED' {
  return view.state === 'REJECTED' ? 'REJECTED' : view.state === 'FAILED' ? 'FAILED' : 'SEALED';
}

/** A sandbox's chain as a reaction sees it, like `readRunChain`: valid receipts, invalid seqs, the view. */
export interface SandboxChain {
  receipts: EvidenceReceipt[];
  invalidSeqs: number[];
  view: SandboxView | null;
}

/**
 * Parses a sandbox chain as read from the log; a receipt that breaks its contract folds as an
 * unknown event (the sandbox FAILED, E_UNKNOWN_STATE). Null only when an item is not a receipt.
 */
export function readSandboxChain(raw: readonly unknown[]): SandboxChain | null {
  return readChainWith(raw, foldSandbox);
}
