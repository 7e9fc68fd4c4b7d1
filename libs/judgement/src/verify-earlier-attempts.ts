import type { EvidenceReceipt, EvidenceReceiptOf } from '@cairn/contracts';
import { eventId } from '@cairn/contracts';
import { splitAttempts } from '@cairn/lifecycle';
import type { LostAttempt } from '@cairn/lifecycle';
import { boundDetail } from './judgement-context.js';

/*
 * What the verifier checks of a run's earlier attempts, each lost to its worker (ADR 0035 point
 * 4). Pure: each function reads the receipts in chain order and names what does not hold.
 */

/** The id `verification.completed` records the earlier attempts' outcome under; present only on a chain that holds a `run.retried`. */
export const EARLIER_ATTEMPTS_INVARIANT = 'earlier_attempts';

type Retried = EvidenceReceiptOf<'run.retried'>;
type Scheduled = EvidenceReceiptOf<'run.scheduled'>;

function isRetried(r: EvidenceReceipt): r is Retried {
  return r.type === 'run.retried';
}

function isScheduled(r: EvidenceReceipt): r is Scheduled {
  return r.type === 'run.scheduled';
}

/** The attempt's placement in force: its last `run.scheduled` (a lease re-offered before any step ran places it again). */
export function placementOf(attempt: LostAttempt<EvidenceReceipt>): Scheduled | null {
  return attempt.receipts.filter(isScheduled).at(-1) ?? null;
}

/**
 * The attempt ends with `run.retried` caused by its own placement, naming that placement's worker,
 * lease and attempt: the loss recorded is the loss of the worker that held it.
 */
export function endsRetriedByItsPlacement(attempt: LostAttempt<EvidenceReceipt>): string[] {
  const where = `attempt ${attempt.attempt}`;
  const last = attempt.receipts.at(-1);
  if (last === undefined || !isRetried(last)) return [`${where} does not end with run.retried`];
  const placement = placementOf(attempt);
  if (placement === null) return [`${where} has no run.scheduled before its run.retried at seq ${last.seq}`];
  const problems: string[] = [];
  const placementId = eventId(placement.run_id, placement.seq);
  if (last.causation !== placementId) {
    problems.push(`${where}'s run.retried at seq ${last.seq} is caused by ${last.causation ?? 'nothing'}, not by its placement ${placementId}`);
  }
  if (last.worker_id !== placement.worker_id) problems.push(`${where}'s run.retried names worker ${last.worker_id}, but ${placement.worker_id} held it`);
  if (last.lease_id !== placement.lease_id) problems.push(`${where}'s run.retried names lease ${last.lease_id}, but it was placed under ${placement.lease_id}`);
  if (last.attempt !== placement.attempt) problems.push(`${where}'s run.retried names attempt ${last.attempt}, but its placement is attempt ${placement.attempt}`);
  return problems;
}

/**
 * The lease fence held: after the attempt's `run.retried`, no receipt was caused by one of the
 * attempt's own receipts (what its worker appends is caused by its placement, or by a receipt it
 * answers), and none names the attempt's lease.
 */
export function fencedAfterRetry(attempt: LostAttempt<EvidenceReceipt>, receipts: readonly EvidenceReceipt[]): string[] {
  const last = attempt.receipts.at(-1);
  if (last === undefined || !isRetried(last)) return [];
  const own = new Set(attempt.receipts.filter((r) => r !== last).map((r) => eventId(r.run_id, r.seq)));
  const lease = placementOf(attempt)?.lease_id ?? null;
  const problems: string[] = [];
  for (const r of receipts) {
    if (r.seq <= last.seq) continue;
    if (r.causation !== null && own.has(r.causation)) problems.push(`${r.type} at seq ${r.seq}, caused by ${r.causation} of attempt ${attempt.attempt}, came after its run.retried`);
    else if (lease !== null && 'lease_id' in r && r.lease_id === lease) problems.push(`${r.type} at seq ${r.seq} names lease ${lease} of attempt ${attempt.attempt} after its run.retried`);
  }
  return problems;
}

/** Each sandbox an attempt created: torn down on the record (verified gone), or owed to the reaper. */
export interface LostSandbox {
  readonly containerName: string;
  readonly teardown: 'recorded' | 'owed_to_reaper';
}

/**
 * The attempt's sandboxes, each torn down on the record (a `sandbox.destroyed` verified gone,
 * before or after the `run.retried`) or owed to the reaper, as for a run failed `E_WORKER_LOST`:
 * the lost worker may no longer write, and its reconcile removes what it does not hold. A sandbox
 * owed to the reaper must not share its name with one created after it: the reaper would take
 * the later attempt's sandbox for it.
 */
export function lostSandboxes(attempt: LostAttempt<EvidenceReceipt>, receipts: readonly EvidenceReceipt[]): { sandboxes: LostSandbox[]; problems: string[] } {
  const sandboxes: LostSandbox[] = [];
  const problems: string[] = [];
  for (const created of attempt.receipts) {
    if (created.type !== 'sandbox.created') continue;
    const name = created.container_name;
    const later = receipts.filter((r) => r.seq > created.seq);
    const nextCreated = later.find((r) => r.type === 'sandbox.created' && r.container_name === name);
    const gone = later.some((r) => r.type === 'sandbox.destroyed' && r.container_name === name && r.verified_gone && (nextCreated === undefined || r.seq < nextCreated.seq));
    sandboxes.push({ containerName: name, teardown: gone ? 'recorded' : 'owed_to_reaper' });
    if (!gone && nextCreated !== undefined) {
      problems.push(`${name} of attempt ${attempt.attempt} is owed to the reaper, but a sandbox of the same name was created at seq ${nextCreated.seq}`);
    }
  }
  return { sandboxes, problems };
}

/** Fits `verification.completed`'s `invariants`. */
export interface EarlierAttemptsOutcome {
  id: typeof EARLIER_ATTEMPTS_INVARIANT;
  ok: boolean;
  detail: string;
}

/**
 * The earlier attempts of a chain that holds a `run.retried`, checked together; null on a chain
 * with none (the invariant is then not recorded at all, so a run with no retry verifies as before).
 */
export function verifyEarlierAttempts(receipts: readonly EvidenceReceipt[]): EarlierAttemptsOutcome | null {
  const { lost } = splitAttempts(receipts);
  if (lost.length === 0) return null;
  const problems: string[] = [];
  let recorded = 0;
  let owed = 0;
  for (const attempt of lost) {
    problems.push(...endsRetriedByItsPlacement(attempt), ...fencedAfterRetry(attempt, receipts));
    const sandboxes = lostSandboxes(attempt, receipts);
    problems.push(...sandboxes.problems);
    for (const s of sandboxes.sandboxes) {
      if (s.teardown === 'recorded') recorded++;
      else owed++;
    }
  }
  if (problems.length > 0) {
    const count = problems.length === 1 ? '1 problem' : `${problems.length} problems`;
    return { id: EARLIER_ATTEMPTS_INVARIANT, ok: false, detail: boundDetail(`${count}: ${problems.join('; ')}`) };
  }
  const attempts = lost.length === 1 ? '1 earlier attempt' : `${lost.length} earlier attempts`;
  return {
    id: EARLIER_ATTEMPTS_INVARIANT,
    ok: true,
    detail: boundDetail(`${attempts} lost to their worker, each retried by its placement and fenced after it; sandboxes: ${recorded} torn down on the record, ${owed} owed to the reaper`),
  };
}
