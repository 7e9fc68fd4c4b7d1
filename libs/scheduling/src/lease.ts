import { CairnError, ChainIdSchema } from '@cairn/contracts';
import { sha256Hex } from '@cairn/evidence';

/**
 * A run's assignment to a worker, valid until `expires_at` unless the worker renews it.
 * Snake_case: it travels in `run.scheduled`. The lease's own bookkeeping (renewals) is
 * operational state and stays out of the evidence stream.
 */
export interface Lease {
  lease_id: string;
  run_id: string;
  worker_id: string;
  /** 1 for the first try; each re-offer after a lost worker is the next attempt. */
  attempt: number;
  /** RFC 3339 UTC with milliseconds. */
  granted_at: string;
  expires_at: string;
}

/**
 * Deterministic from the run and the attempt, so a retried grant names the same lease:
 * `lease_<32 hex of sha256(run id)>_<attempt>`. Hashed because run ids may be longer than the
 * 64-character token a receipt's `lease_id` is; all attempts of one run share the prefix.
 */
export function leaseId(runId: string, attempt: number): string {
  if (!ChainIdSchema.safeParse(runId).success) throw new CairnError('E_INTERNAL', `not a run or sandbox id: ${JSON.stringify(runId)}`);
  if (!Number.isSafeInteger(attempt) || attempt < 1) throw new CairnError('E_INTERNAL', `a lease attempt is a positive integer, not ${attempt}`);
  return `lease_${sha256Hex(runId).slice(0, 32)}_${attempt}`;
}

export function grantLease(runId: string, workerId: string, now: number, ttlMs: number, attempt = 1): Lease {
  checkTtl(ttlMs);
  return {
    lease_id: leaseId(runId, attempt),
    run_id: runId,
    worker_id: workerId,
    attempt,
    granted_at: iso(now),
    expires_at: iso(now + ttlMs),
  };
}

export type LeaseRenewal = { ok: true; lease: Lease } | { ok: false; reason: 'expired' | 'not_holder' };

/**
 * Extends a live lease held by `workerId`. An expired lease is never revived: by then the run
 * may have been failed or re-offered, and two workers must never hold it at once.
 */
export function renewLease(lease: Lease, workerId: string, now: number, ttlMs: number): LeaseRenewal {
  checkTtl(ttlMs);
  if (lease.worker_id !== workerId) return { ok: false, reason: 'not_holder' };
  if (isExpired(lease, now)) return { ok: false, reason: 'expired' };
  const expires = Math.max(Date.parse(lease.expires_at), now + ttlMs);
  return { ok: true, lease: { ...lease, expires_at: iso(expires) } };
}

/** Expired at `expires_at` itself; an unreadable expiry counts as expired. */
export function isExpired(lease: Lease, now: number): boolean {
  return !(now < Date.parse(lease.expires_at));
}

function checkTtl(ttlMs: number): void {
  if (!Number.isSafeInteger(ttlMs) || ttlMs <= 0) throw new CairnError('E_INTERNAL', `a lease TTL is a positive whole number of ms, not ${ttlMs}`);
}

function iso(ms: number): string {
  if (!Number.isFinite(ms)) throw new CairnError('E_INTERNAL', `not a time: ${ms}`);
  return new Date(ms).toISOString();
}
