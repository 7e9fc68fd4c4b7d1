import { describe, expect, it } from 'vitest';
import { isExpired } from './lease.js';
import { observedLease, observedWallTime, observedWorker, sight, Sightings } from './observed-time.js';
import { workerStatus } from './worker-registry.js';
import type { WorkerRecord } from './worker-registry.js';

const WALL = Date.parse('2026-12-02T12:00:00.000Z');
const TTL = 4000;
const lease = (expiresAt: number) => ({ lease_id: 'l1', run_id: 'run_a', worker_id: 'w1', attempt: 1, granted_at: new Date(expiresAt - TTL).toISOString(), expires_at: new Date(expiresAt).toISOString() });

describe('lease and heartbeat times from one clock (ADR 0033)', () => {
  it('given the same revision seen again, when sighted, then it keeps the time it was first seen; a new revision is seen now', () => {
    const first = sight(undefined, 7, 100);
    expect(first).toEqual({ revision: 7, seenAt: 100 });
    expect(sight(first, 7, 900)).toBe(first);
    expect(sight(first, 8, 900)).toEqual({ revision: 8, seenAt: 900 });
  });

  it('places a sighting on the observer\'s own wall clock, never in its future', () => {
    expect(observedWallTime({ revision: 1, seenAt: 1000 }, 3500, WALL)).toBe(WALL - 2500);
    expect(observedWallTime({ revision: 1, seenAt: 5000 }, 3500, WALL)).toBe(WALL);
  });

  for (const skewMs of [-60_000, 0, 60_000]) {
    it(`given a renewer ${skewMs / 1000} s off the observer, when it renews every second, then the lease never expires; when it stops, it expires its TTL after the last new revision`, () => {
      const sightings = new Sightings();
      let mono = 0;
      let revision = 1;
      // The renewer writes expires_at = its own wall now + TTL: off by the skew.
      for (let tick = 0; tick < 10; tick++, mono += 1000, revision++) {
        const written = lease(WALL + mono + skewMs + TTL);
        const judged = observedLease(written, sightings.see('run_a', revision, mono), TTL, mono, WALL + mono);
        expect(isExpired(judged, WALL + mono)).toBe(false);
      }
      const lastWritten = lease(WALL + mono + skewMs + TTL);
      const seen = sightings.see('run_a', revision, mono);
      expect(isExpired(observedLease(lastWritten, sightings.see('run_a', revision, mono + TTL - 1), TTL, mono + TTL - 1, WALL + mono + TTL - 1), WALL + mono + TTL - 1)).toBe(false);
      expect(isExpired(observedLease(lastWritten, sightings.see('run_a', revision, mono + TTL), TTL, mono + TTL, WALL + mono + TTL), WALL + mono + TTL)).toBe(true);
      expect(seen.seenAt).toBe(mono);
    });
  }

  it('judges a worker stale by how long ago the observer saw its last new heartbeat, not by the heartbeat\'s own time', () => {
    const worker = { workerId: 'w1', lastHeartbeatAt: WALL - 60_000, healthy: true, draining: false } as unknown as WorkerRecord;
    const sightings = new Sightings();
    const fresh = observedWorker(worker, sightings.see('w1', 3, 10_000), 10_500, WALL);
    expect(fresh.lastHeartbeatAt).toBe(WALL - 500);
    expect(WALL - fresh.lastHeartbeatAt).toBeLessThanOrEqual(5000);
    // Taken at its own word, the heartbeat a minute behind would read stale.
    expect(workerStatus(worker, WALL, 5000)).toBe('stale');
    const later = observedWorker(worker, sightings.see('w1', 3, 16_000), 16_000, WALL + 5500);
    expect(workerStatus(later, WALL + 5500, 5000)).toBe('stale');
  });

  it('forgets keys no longer listed', () => {
    const sightings = new Sightings();
    sightings.see('a', 1, 0);
    sightings.see('b', 1, 0);
    sightings.keepOnly(['b']);
    expect(sightings.size).toBe(1);
    expect(sightings.see('b', 1, 50)).toEqual({ revision: 1, seenAt: 0 });
  });
});
