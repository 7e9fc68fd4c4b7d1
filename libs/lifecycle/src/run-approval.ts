import type { EvidenceReceipt, EvidenceReceiptOf, RunState } from '@cairn/contracts';
import type { RunView } from './evolve-run.js';
import { attemptOf } from './run-attempt.js';
import { isTerminal } from './run-transitions.js';

type Requested = EvidenceReceiptOf<'approval.requested'>;

/**
 * Approvals requested in the run's current attempt (or before its first placement) and not decided
 * (granted or rejected) since, in request order. A step approval is for one execution (ADR 0035): one
 * requested or granted in an attempt lost to its worker neither waits nor counts in the next, which
 * asks again under the same approval id.
 */
export function pendingApprovals(all: readonly EvidenceReceipt[]): Requested[] {
  const receipts = attemptOf(all);
  const decided = new Set<string>();
  for (const r of receipts) if (r.type === 'approval.granted' || r.type === 'approval.rejected') decided.add(r.approval_id);
  const seen = new Set<string>();
  const pending: Requested[] = [];
  for (const r of receipts) {
    if (r.type !== 'approval.requested' || decided.has(r.approval_id) || seen.has(r.approval_id)) continue;
    seen.add(r.approval_id);
    pending.push(r);
  }
  return pending;
}

/** A person's decision on a run's approvals, as the approvals command carries it. */
export interface ApprovalDecision {
  /** `key:<key id>` of whoever decides. */
  actor: string;
  decision: 'approve' | 'reject';
  /** One approval by id; absent means every approval the run awaits now. */
  approvalId?: string;
}

/** What an approval decision does to a run, decided from its chain. */
export type ApprovalPath =
  | { readonly kind: 'sealed' }
  /** Ended (FAILED, ROLLBACK, REJECTED, CANCELLED): nothing is left to decide. */
  | { readonly kind: 'ended'; readonly state: RunState }
  /** The key that submitted the run may not decide on it. */
  | { readonly kind: 'self' }
  /** Nothing awaits a decision now (or not the approval named). */
  | { readonly kind: 'nothing_pending'; readonly state: RunState; readonly approvalId: string | null }
  /** The same person's same decision is on the chain already and nothing else is pending: a repeat. */
  | { readonly kind: 'duplicate' }
  /** `approval.granted` for each of these, in order. */
  | { readonly kind: 'grant'; readonly requests: readonly Requested[] }
  /** `approval.rejected` for this one: the run ends CANCELLED with E_NO_APPROVAL. */
  | { readonly kind: 'reject'; readonly request: Requested };

/**
 * How a person's approval decision lands on a run (PRODUCT.md "Jobs and approvals"). A sealed
 * run refuses every change (I-11); the key that submitted a run may not approve or reject it
 * (four eyes); only approvals the chain shows requested and undecided can be decided. A grant
 * decides every pending approval at once (or the one named); a rejection ends the run, so one
 * `approval.rejected` is all it takes.
 */
export function approvalPath(view: RunView, receipts: readonly EvidenceReceipt[], decision: ApprovalDecision): ApprovalPath {
  if (view.sealed) return { kind: 'sealed' };
  if (isTerminal(view.state)) return { kind: 'ended', state: view.state };
  const submitted = receipts.find((r): r is EvidenceReceiptOf<'run.submitted'> => r.type === 'run.submitted');
  if (submitted === undefined || submitted.submitted_by === decision.actor) return { kind: 'self' };

  const pending = pendingApprovals(receipts).filter((r) => decision.approvalId === undefined || r.approval_id === decision.approvalId);
  if (pending.length === 0 || view.state !== 'AWAITING_APPROVAL') {
    const already = receipts.some(
      (r) =>
        decision.decision === 'approve' &&
        r.type === 'approval.granted' &&
        r.approved_by === decision.actor &&
        (decision.approvalId === undefined || r.approval_id === decision.approvalId),
    );
    if (already && pendingApprovals(receipts).length === 0) return { kind: 'duplicate' };
    return { kind: 'nothing_pending', state: view.state, approvalId: decision.approvalId ?? null };
  }
  const [first] = pending;
  if (decision.decision === 'reject' && first !== undefined) return { kind: 'reject', request: first };
  return { kind: 'grant', requests: pending };
}

/** Approvals whose `expires_at` has passed by `nowMs` and that are still undecided, while the run waits. */
export function expiredApprovals(view: RunView | null, receipts: readonly EvidenceReceipt[], nowMs: number): Requested[] {
  if (view === null || view.sealed || view.state !== 'AWAITING_APPROVAL') return [];
  return pendingApprovals(receipts).filter((r) => Date.parse(r.expires_at) <= nowMs);
}
