import type { EventType, EvidenceEventOf, EvidenceReceipt, EvidenceReceiptOf, FinalRunState, RunState } from '@cairn/contracts';
import { gradeRecordedFields, gradeRubric, gradingAttempt } from '@cairn/judgement';
import type { JudgementOutcome, RubricJudge } from '@cairn/judgement';
import { attemptOf } from '@cairn/lifecycle';
import type { RunChain } from '@cairn/lifecycle';
import { judgementContextOf, recordedRunOf } from '@cairn/service-kit';
import type { LoadedArtifact } from '@cairn/service-kit';

type EnvelopeKey = 'v' | 'seq' | 'run_id' | 'tenant' | 'type' | 'actor' | 'ts' | 'causation';
/** What the grader hands to `append` for an event of type `T`: its own fields, no envelope. */
export type EventFields<T extends EventType> = Omit<EvidenceEventOf<T>, EnvelopeKey>;

/**
 * The receipts after which a run may be ready to seal: a verification (graded first), and every
 * event that can end a run — `policy.decided` (deny), `approval.rejected`, `run.failed`,
 * `run.rolled_back`, `run.cancelled`, and `alert.raised` (a broken chain the fold already failed).
 */
export const SEAL_TRIGGERS: readonly EventType[] = [
  'verification.completed',
  // A person asked for a run whose judge failed to be graded again (docs/adr/0030).
  'grade.requested',
  'policy.decided',
  'approval.rejected',
  'run.failed',
  'run.rolled_back',
  'run.cancelled',
  'alert.raised',
];

export type SealDecision =
  | { kind: 'none'; reason: string }
  /** Not yet: the reaction is tried again later (the trigger is redelivered). */
  | { kind: 'wait'; reason: string }
  | { kind: 'seal'; fields: EventFields<'run.sealed'> };

/** The `final_state` a seal of a run in `state` names, or null while the run is not over. */
export function finalStateOf(state: RunState): FinalRunState | null {
  switch (state) {
    case 'VERIFIED':
    case 'GRADED':
      return 'SEALED';
    case 'FAILED':
    case 'ROLLBACK':
    case 'REJECTED':
    case 'CANCELLED':
      return state;
    case 'SUBMITTED':
    case 'AWAITING_APPROVAL':
    case 'SCHEDULED':
    case 'RUNNING':
    case 'EXECUTED':
    case 'SEALED':
      return null;
  }
}

/** Containers with `sandbox.created` and no `sandbox.destroyed` after it. */
export function openSandboxes(receipts: readonly EvidenceReceipt[]): string[] {
  const open = new Set<string>();
  for (const r of receipts) {
    if (r.type === 'sandbox.created') open.add(r.container_name);
    else if (r.type === 'sandbox.destroyed') open.delete(r.container_name);
  }
  return [...open];
}

/** Whether the chain's current grading attempt (1, then one per `grade.requested`) has failed. */
export function attemptFailed(receipts: readonly EvidenceReceipt[]): boolean {
  const attempt = gradingAttempt(receipts);
  return receipts.some((r) => r.type === 'grade.failed' && (r.attempt ?? 1) === attempt);
}

/** Whether `trigger` is the receipt that opened the chain's current attempt: its verification, or the latest `grade.requested`. */
export function opensCurrentAttempt(receipts: readonly EvidenceReceipt[], trigger: EvidenceReceipt): boolean {
  const requests = receipts.filter((r) => r.type === 'grade.requested');
  if (requests.length === 0) return trigger.type === 'verification.completed';
  return trigger.type === 'grade.requested' && trigger.seq === requests.at(-1)!.seq;
}

/**
 * A verified run gets its grade on its verification — or on a `grade.requested` after its grading
 * failed — once: the first grade wins (I-11), and an attempt that failed waits for the next request.
 */
export function shouldGrade(chain: RunChain, trigger: EvidenceReceipt): boolean {
  return (
    chain.view?.state === 'VERIFIED' &&
    opensCurrentAttempt(chain.receipts, trigger) &&
    !chain.receipts.some((r) => r.type === 'grade.recorded') &&
    !attemptFailed(chain.receipts)
  );
}

/** The rubric's judge criteria, in rubric order. */
export function judgeCriteriaOf(receipts: readonly EvidenceReceipt[]): RubricJudge[] {
  const spec = receipts.find((r): r is EvidenceReceiptOf<'run.submitted'> => r.type === 'run.submitted')?.spec;
  return (spec?.checks ?? []).filter((c): c is RubricJudge & typeof c => 'kind' in c && c.kind === 'judge');
}

/**
 * The rubric (`spec.checks`) scored against the kernel's facts, the bytes that re-hashed to their
 * recorded names and, for judge criteria, the judgements recorded in this attempt.
 */
export function gradeRun(
  receipts: readonly EvidenceReceipt[],
  loaded: ReadonlyMap<string, LoadedArtifact>,
  judgements: ReadonlyMap<string, JudgementOutcome> = new Map(),
): EventFields<'grade.recorded'> {
  const run = recordedRunOf(receipts);
  const facts = receipts.find((r): r is EvidenceReceiptOf<'kernel.facts'> => r.type === 'kernel.facts')?.facts ?? {};
  const spec = receipts.find((r): r is EvidenceReceiptOf<'run.submitted'> => r.type === 'run.submitted')?.spec;
  return gradeRecordedFields(gradeRubric(spec?.checks ?? [], judgementContextOf(run, loaded, facts), judgements));
}

/**
 * Whether to seal, and with what. The state comes from the lifecycle fold, so the seal always
 * names the state the chain is in (a seal that disagrees is a fault); the digest is the chain head
 * it covers. A verified run is sealed SEALED only on its verification (after its grade); an ended
 * run is sealed with its state and error code — once it is torn down on the record, or once
 * `teardownGraceMs` has passed since the trigger, so the runtime's `sandbox.destroyed` after a
 * cancel or a lost lease is not shut out by the seal.
 */
export function decideSeal(chain: RunChain, trigger: EvidenceReceipt, nowMs: number, teardownGraceMs: number): SealDecision {
  const view = chain.view;
  if (view === null) return { kind: 'none', reason: 'an empty chain' };
  if (view.sealed) return { kind: 'none', reason: 'sealed already' };
  const finalState = finalStateOf(view.state);
  if (finalState === null) return { kind: 'none', reason: `the run is ${view.state}` };
  if (finalState === 'SEALED') {
    if (trigger.type !== 'verification.completed' && trigger.type !== 'grade.requested') return { kind: 'none', reason: `a ${view.state} run is sealed on its verification` };
    if (!opensCurrentAttempt(chain.receipts, trigger)) return { kind: 'none', reason: 'a later grade.requested seals it' };
    // Not final (PRODUCT.md): a run whose grading failed stays unsealed until it is graded again.
    if (view.state === 'VERIFIED' && attemptFailed(chain.receipts)) return { kind: 'none', reason: 'its grading failed: it waits for a grade.requested' };
    return { kind: 'seal', fields: { final_state: 'SEALED', evidence_digest: view.headHash } };
  }
  // The current attempt's: a lost attempt's sandbox is owed to the reaper (ADR 0035), not waited for.
  const open = openSandboxes(attemptOf(chain.receipts));
  const waited = nowMs - Date.parse(trigger.ts);
  if (open.length > 0 && waited < teardownGraceMs) {
    return { kind: 'wait', reason: `${open.join(', ')} not torn down on the record yet (${waited} ms of ${teardownGraceMs})` };
  }
  // FAILED, ROLLBACK and REJECTED always carry a code in the fold; never seal one without.
  const code = view.errorCode ?? (finalState === 'CANCELLED' ? null : 'E_UNKNOWN_STATE');
  return { kind: 'seal', fields: { final_state: finalState, evidence_digest: view.headHash, ...(code === null ? {} : { error_code: code }) } };
}
