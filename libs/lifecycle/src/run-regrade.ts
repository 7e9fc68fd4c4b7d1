import type { EvidenceReceipt, RunState } from '@cairn/contracts';
import type { RunView } from './evolve-run.js';

/** What a regrade command does to a run (docs/adr/0030), decided from its chain. */
export type RegradePath =
  /** Sealed: its grade, or its end, is final (I-11). */
  | { readonly kind: 'sealed' }
  /** Not a verified run whose grading failed: graded already, still grading, or ended otherwise. */
  | { readonly kind: 'not_failed'; readonly state: RunState; readonly reason: string }
  /** Its last grading failed for good (`retryable` false): another attempt would fail the same way. */
  | { readonly kind: 'not_retryable' }
  /** Asked already: the attempt it opened has not failed (yet); a repeat changes nothing. */
  | { readonly kind: 'requested' }
  /** Append `grade.requested`, opening attempt `attempt` (its key: one per attempt, so racing requests store one). */
  | { readonly kind: 'regrade'; readonly attempt: number; readonly key: string };

/**
 * A run may be graded again only while it is VERIFIED and unsealed, after its current attempt (1,
 * then one per `grade.requested`) recorded a retryable `grade.failed` — a degraded judge is a
 * recorded, re-gradeable failure, retried before the run seals (PRODUCT.md).
 */
export function regradePath(view: RunView, receipts: readonly EvidenceReceipt[]): RegradePath {
  if (view.sealed) return { kind: 'sealed' };
  if (view.state !== 'VERIFIED') {
    const reason = view.state === 'GRADED' ? 'it is graded' : `it is ${view.state}, not a verified run whose grading failed`;
    return { kind: 'not_failed', state: view.state, reason };
  }
  const attempt = 1 + receipts.filter((r) => r.type === 'grade.requested').length;
  const failure = receipts.findLast((r) => r.type === 'grade.failed' && (r.attempt ?? 1) === attempt);
  if (failure === undefined) {
    return attempt > 1 ? { kind: 'requested' } : { kind: 'not_failed', state: view.state, reason: 'its grading has not failed' };
  }
  if (failure.type === 'grade.failed' && !failure.retryable) return { kind: 'not_retryable' };
  return { kind: 'regrade', attempt: attempt + 1, key: `regrade-${attempt + 1}` };
}
