/*
 * Lease and heartbeat times from one clock (ADR 0033). A lease's `expires_at` and a worker's
 * `lastHeartbeatAt` are written with the writer's wall clock; judging them against the
 * observer's wall clock compares two machines' clocks, and a worker 30 s behind has its leases
 * expired as soon as they are renewed. As Kubernetes' leader election does, the observer keeps, on
 * its own monotonic clock, when it first saw each record's current revision, and judges the record
 * from that: a lease expires its TTL after the observer last saw a new revision of it, a worker is
 * stale `staleAfter` after the observer last saw a new heartbeat — whatever the records say.
 */

/** When this observer first saw a record's current revision, on its own monotonic clock (ms). */
export interface Sighting {
  revision: number;
  seenAt: number;
}

/**
 * The sighting after seeing `revision` of a record at `monoNow`: a new revision (or the first
 * look) is seen now; the same one keeps the time it was first seen. Pure.
 */
export function sight(previous: Sighting | undefined, revision: number, monoNow: number): Sighting {
  if (previous !== undefined && previous.revision === revision) return previous;
  return { revision, seenAt: monoNow };
}

/**
 * A sighting as a time on the observer's own wall clock: `wallNow` less how long ago (monotonic)
 * the revision was first seen — so the pure rules that take epoch ms (`isExpired`, `workerHealth`)
 * judge it on one clock. Pure.
 */
export function observedWallTime(sighting: Sighting, monoNow: number, wallNow: number): number {
  return wallNow - Math.max(0, monoNow - sighting.seenAt);
}

/** A lease as the observer judges it: expiring `ttlMs` after it first saw its current revision. Pure. */
export function observedLease<L extends { expires_at: string }>(lease: L, sighting: Sighting, ttlMs: number, monoNow: number, wallNow: number): L {
  return { ...lease, expires_at: new Date(observedWallTime(sighting, monoNow, wallNow) + ttlMs).toISOString() };
}

/** A worker's record as the observer judges it: its heartbeat when the observer first saw its current revision. Pure. */
export function observedWorker<W extends { lastHeartbeatAt: number }>(worker: W, sighting: Sighting, monoNow: number, wallNow: number): W {
  return { ...worker, lastHeartbeatAt: Math.round(observedWallTime(sighting, monoNow, wallNow)) };
}

/** The sightings of one observer, a record per key; keys no longer listed are forgotten. */
export class Sightings {
  private readonly seen = new Map<string, Sighting>();

  /** Records `revision` of `key` seen at `monoNow`; returns the sighting (when its revision was first seen). */
  see(key: string, revision: number, monoNow: number): Sighting {
    const next = sight(this.seen.get(key), revision, monoNow);
    this.seen.set(key, next);
    return next;
  }

  /** Forgets every key not in `keys` (a record deleted, or listed no more), so the map stays bounded by the bucket. */
  keepOnly(keys: Iterable<string>): void {
    const kept = new Set(keys);
    for (const key of this.seen.keys()) if (!kept.has(key)) this.seen.delete(key);
  }

  forget(key: string): void {
    this.seen.delete(key);
  }

  get size(): number {
    return this.seen.size;
  }
}
