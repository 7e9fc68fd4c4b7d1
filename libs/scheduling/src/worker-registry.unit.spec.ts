import { describe, expect, it } from 'vitest';
import {
  admitRun,
  eligibleWorkers,
  fits,
  freeCapacity,
  placeRun,
  recordHeartbeat,
  releaseRun,
  reservationFor,
  workerStatus,
} from './worker-registry.js';
import type { PlacementRequest, Reservation, WorkerRecord } from './worker-registry.js';

const NOW = Date.parse('2026-11-30T12:00:00.000Z');
const STALE_MS = 15_000;

function worker(id: string, extra: Partial<WorkerRecord> = {}): WorkerRecord {
  return {
    workerId: id,
    capacity: { slots: 4, memoryMiB: 8192, cpus: 4, diskMiB: 16_384 },
    isolation: ['docker'],
    draining: false,
    healthy: true,
    lastHeartbeatAt: NOW - 1000,
    inFlight: [],
    ...extra,
  };
}

function held(runId: string, extra: Partial<Reservation> = {}): Reservation {
  return { runId, memoryMiB: 512, cpus: 1, diskMiB: 256, ...extra };
}

function request(runId: string, extra: Partial<PlacementRequest> = {}): PlacementRequest {
  return { runId, memoryMiB: 512, cpus: 1, diskMiB: 256, isolation: 'docker', ...extra };
}

describe('reservationFor', () => {
  it('given effective caps, when reserved, then memory covers the tmpfs too (tmpfs pages count as memory)', () => {
    expect(reservationFor('run_a', { memory_mib: 256, disk_mib: 256, cpus: 1 })).toEqual({
      runId: 'run_a',
      memoryMiB: 512,
      cpus: 1,
      diskMiB: 256,
      isolation: 'docker',
    });
  });
});

describe('eligibleWorkers: excluded before scoring', () => {
  it('given a worker heard from exactly at the stale limit and one just past it, when filtered, then only the first remains', () => {
    const fresh = worker('w-fresh', { lastHeartbeatAt: NOW - STALE_MS });
    const stale = worker('w-stale', { lastHeartbeatAt: NOW - STALE_MS - 1 });
    expect(eligibleWorkers([fresh, stale], NOW, STALE_MS).map((w) => w.workerId)).toEqual(['w-fresh']);
    expect(workerStatus(stale, NOW, STALE_MS)).toBe('stale');
  });

  it('given draining, unhealthy and full workers, when filtered, then each is excluded with its reason', () => {
    const draining = worker('w-drain', { draining: true });
    const unhealthy = worker('w-sick', { healthy: false });
    const full = worker('w-full', { capacity: { slots: 2, memoryMiB: 8192, cpus: 4, diskMiB: 16_384 }, inFlight: [held('run_1'), held('run_2')] });
    const ok = worker('w-ok');
    expect(eligibleWorkers([draining, unhealthy, full, ok], NOW, STALE_MS).map((w) => w.workerId)).toEqual(['w-ok']);
    expect([draining, unhealthy, full].map((w) => workerStatus(w, NOW, STALE_MS))).toEqual(['draining', 'unhealthy', 'overloaded']);
  });

  it('given a worker over-committed in memory (its capacity shrank on restart), when filtered, then it is overloaded', () => {
    const shrunk = worker('w-shrunk', { capacity: { slots: 4, memoryMiB: 512, cpus: 4, diskMiB: 16_384 }, inFlight: [held('run_1', { memoryMiB: 1024 })] });
    expect(workerStatus(shrunk, NOW, STALE_MS)).toBe('overloaded');
  });

  it('given a worker whose heartbeat time cannot be read, when filtered, then it is stale (fail closed)', () => {
    expect(workerStatus(worker('w', { lastHeartbeatAt: Number.NaN }), NOW, STALE_MS)).toBe('stale');
  });
});

describe('placeRun', () => {
  it('given no workers, when a run is placed, then it waits (null)', () => {
    expect(placeRun([], request('run_a'), NOW)).toBeNull();
  });

  it('given only stale, draining, unhealthy or full workers, when a run is placed, then it waits even though they would score best', () => {
    const big = { slots: 64, memoryMiB: 1 << 20, cpus: 64, diskMiB: 1 << 20 };
    const workers = [
      worker('w-stale', { capacity: big, lastHeartbeatAt: NOW - 60_000 }),
      worker('w-drain', { capacity: big, draining: true }),
      worker('w-sick', { capacity: big, healthy: false }),
      worker('w-full', { capacity: { ...big, slots: 1 }, inFlight: [held('run_x')] }),
    ];
    expect(placeRun(workers, request('run_a'), NOW)).toBeNull();
  });

  it('given workers with different free slots, when a run is placed, then the one with most free slots wins', () => {
    const busy = worker('w-a', { inFlight: [held('run_1'), held('run_2')] });
    const idle = worker('w-b', { capacity: { slots: 4, memoryMiB: 4096, cpus: 4, diskMiB: 16_384 } });
    expect(placeRun([busy, idle], request('run_a'), NOW)?.workerId).toBe('w-b');
  });

  it('given equal free slots, when a run is placed, then the one with more free memory wins', () => {
    const small = worker('w-a', { capacity: { slots: 4, memoryMiB: 4096, cpus: 4, diskMiB: 16_384 } });
    const large = worker('w-b');
    expect(placeRun([small, large], request('run_a'), NOW)?.workerId).toBe('w-b');
  });

  it('given workers that tie on every score, when a run is placed, then the smallest id wins whatever the input order', () => {
    const workers = [worker('w-c'), worker('w-a'), worker('w-b')];
    expect(placeRun(workers, request('run_a'), NOW)?.workerId).toBe('w-a');
    expect(placeRun([...workers].reverse(), request('run_a'), NOW)?.workerId).toBe('w-a');
  });

  it('given a reservation that does not fit the best-scoring worker, when placed, then a worker it fits is chosen', () => {
    const roomy = worker('w-a', { capacity: { slots: 8, memoryMiB: 1024, cpus: 8, diskMiB: 16_384 } });
    const fitting = worker('w-b', { capacity: { slots: 2, memoryMiB: 8192, cpus: 4, diskMiB: 16_384 } });
    expect(placeRun([roomy, fitting], request('run_a', { memoryMiB: 4096 }), NOW)?.workerId).toBe('w-b');
  });

  it.each([
    ['memory', { memoryMiB: 8193 }],
    ['cpus', { cpus: 4.001 }],
    ['disk', { diskMiB: 16_385 }],
  ] as const)('given a reservation whose %s exceeds every worker, when placed, then the run waits', (_what, over) => {
    expect(placeRun([worker('w-a')], request('run_a', over), NOW)).toBeNull();
  });

  it('given a reservation exactly the free capacity left, when placed, then it fits', () => {
    const w = worker('w-a', { inFlight: [held('run_1', { memoryMiB: 4096, cpus: 2.5, diskMiB: 8192 })] });
    expect(placeRun([w], request('run_a', { memoryMiB: 4096, cpus: 1.5, diskMiB: 8192 }), NOW)?.workerId).toBe('w-a');
    expect(placeRun([w], request('run_a', { memoryMiB: 4097, cpus: 1.5, diskMiB: 8192 }), NOW)).toBeNull();
  });

  it('given fractional cpus that sum to the capacity, when checked, then floating point does not refuse them', () => {
    const w = worker('w-a', { capacity: { slots: 4, memoryMiB: 8192, cpus: 0.3, diskMiB: 1024 }, inFlight: [held('run_1', { cpus: 0.1 })] });
    expect(fits(request('run_a', { cpus: 0.2, memoryMiB: 1, diskMiB: 1 }), freeCapacity(w))).toBe(true);
  });

  it('given a worker without the isolation the run needs, when placed, then it is skipped', () => {
    const none = worker('w-a', { isolation: [] });
    expect(placeRun([none], request('run_a'), NOW)).toBeNull();
  });

  it('given a run a worker already holds, when placed again (a redelivered request), then it goes to the same worker', () => {
    const holder = worker('w-z', { inFlight: [held('run_a')] });
    expect(placeRun([worker('w-a'), holder], request('run_a'), NOW)?.workerId).toBe('w-z');
  });
});

describe('admitRun and releaseRun: concurrency bounded by slots (I-9)', () => {
  it('given a worker with 2 slots, when three runs are admitted in turn, then the third is refused', () => {
    let w = worker('w-a', { capacity: { slots: 2, memoryMiB: 8192, cpus: 4, diskMiB: 16_384 } });
    const outcomes = ['run_1', 'run_2', 'run_3'].map((id) => {
      const admission = admitRun(w, request(id), NOW);
      if (admission.ok) w = admission.worker;
      return admission.ok ? 'admitted' : admission.reason;
    });
    expect(outcomes).toEqual(['admitted', 'admitted', 'overloaded']);
    expect(w.inFlight.map((r) => r.runId)).toEqual(['run_1', 'run_2']);
  });

  it('given a full worker, when a run is released, then a new one is admitted', () => {
    const full = worker('w-a', { capacity: { slots: 1, memoryMiB: 8192, cpus: 4, diskMiB: 16_384 }, inFlight: [held('run_1')] });
    expect(admitRun(full, request('run_2'), NOW)).toEqual({ ok: false, reason: 'overloaded' });
    expect(admitRun(releaseRun(full, 'run_1'), request('run_2'), NOW).ok).toBe(true);
  });

  it('given a reservation larger than what is free, when admitted, then it is refused with no_room', () => {
    expect(admitRun(worker('w-a'), request('run_a', { memoryMiB: 9000 }), NOW)).toEqual({ ok: false, reason: 'no_room' });
  });

  it('given a run the worker already holds, when admitted again, then nothing changes', () => {
    const w = worker('w-a', { inFlight: [held('run_a')] });
    const admission = admitRun(w, request('run_a'), NOW);
    expect(admission).toEqual({ ok: true, worker: w });
  });

  it('given a draining worker, when a run is admitted, then it is refused', () => {
    expect(admitRun(worker('w-a', { draining: true }), request('run_a'), NOW)).toEqual({ ok: false, reason: 'draining' });
  });
});

describe('recordHeartbeat', () => {
  it('given a heartbeat, when recorded, then it refreshes liveness, health and draining but never capacity', () => {
    const w = worker('w-a', { lastHeartbeatAt: NOW - 60_000 });
    const beat = { at: NOW, healthy: false, draining: true, capacity: { slots: 999, memoryMiB: 1, cpus: 1, diskMiB: 1 } };
    const after = recordHeartbeat(w, beat);
    expect(after).toEqual({ ...w, lastHeartbeatAt: NOW, healthy: false, draining: true });
    expect(after.capacity).toBe(w.capacity);
  });

  it('given a heartbeat older than the last one, when recorded, then it changes nothing', () => {
    const w = worker('w-a', { lastHeartbeatAt: NOW });
    expect(recordHeartbeat(w, { at: NOW - 5000, healthy: false, draining: true })).toBe(w);
  });
});
