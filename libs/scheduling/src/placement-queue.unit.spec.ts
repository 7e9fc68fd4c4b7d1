import { describe, expect, it } from 'vitest';
import { planQueue, queuePositions } from './placement-queue.js';
import type { QueuedRequest } from './placement-queue.js';
import { cpuShares, freeCapacity, neverFits, placement, shortfall } from './worker-registry.js';
import type { WorkerRecord } from './worker-registry.js';

const NOW = Date.parse('2026-12-01T12:00:00.000Z');

function worker(id: string, extra: Partial<WorkerRecord> = {}): WorkerRecord {
  return {
    workerId: id,
    capacity: { slots: 200, memoryMiB: 21_000, cpus: 2, diskMiB: 24_000, pids: 16_384, cpuOversubscription: 64, runCpuOversubscription: 1 },
    isolation: ['docker'],
    draining: false,
    healthy: true,
    lastHeartbeatAt: NOW - 1000,
    inFlight: [],
    ...extra,
  };
}

/** A sandbox session of 128 MiB memory and 64 MiB disk (192 MiB reserved), one CPU, 64 processes. */
function session(id: string, enqueuedAt = NOW, extra: Partial<QueuedRequest> = {}): QueuedRequest {
  return { runId: `sbx_${id}`, memoryMiB: 192, cpus: 1, diskMiB: 64, pids: 64, isolation: 'docker', enqueuedAt, ...extra };
}

describe('capacity by what is scarce', () => {
  it('given the defaults of a 2-core, 24 GiB host, then a hundred idle sessions of 128 MiB (+64 MiB disk) at one CPU each fit, and the CPU share is what a 64× factor allows', () => {
    let w = worker('w');
    for (let i = 0; i < 100; i++) {
      const p = placement([w], session(`s${i}`), NOW);
      expect(p.kind, `session ${i}`).toBe('placed');
      w = { ...w, inFlight: [...w.inFlight, session(`s${i}`)] };
    }
    expect(freeCapacity(w)).toMatchObject({ slots: 100, memoryMiB: 21_000 - 100 * 192, milliCpus: 128_000 - 100_000, diskMiB: 24_000 - 6400, pids: 16_384 - 6400 });
    expect(cpuShares(w.capacity)).toEqual({ all: 128_000, runs: 2000 });
  });

  it('given a worker full in one dimension, then what ran out is named in order: slots, memory, disk, pids, cpu', () => {
    const free = freeCapacity(worker('w'));
    expect(shortfall(session('a'), { ...free, slots: 0 })).toBe('slots');
    expect(shortfall(session('a'), { ...free, memoryMiB: 100 })).toBe('memory');
    expect(shortfall(session('a'), { ...free, diskMiB: 10 })).toBe('disk');
    expect(shortfall(session('a'), { ...free, pids: 63 })).toBe('pids');
    expect(shortfall(session('a'), { ...free, milliCpus: 999 })).toBe('cpu');
    expect(shortfall(session('a'), free)).toBeNull();
  });

  it('given runs, then they are admitted against their own CPU factor, sessions against the whole share', () => {
    const run = (id: string) => ({ runId: `run_${id}`, memoryMiB: 512, cpus: 1, diskMiB: 256, pids: 64, isolation: 'docker' as const });
    const two = worker('w', { inFlight: [run('a'), run('b')] });
    expect(placement([two], run('c'), NOW)).toEqual({ kind: 'wait', waitingFor: 'cpu' });
    expect(placement([two], session('x'), NOW).kind).toBe('placed');
  });

  it('given a record from before pids and CPU factors were registered, then it reads as before: processes unbounded, one share per CPU', () => {
    const old = worker('old', { capacity: { slots: 4, memoryMiB: 8192, cpus: 2, diskMiB: 8192 } });
    expect(freeCapacity(old)).toMatchObject({ pids: Number.POSITIVE_INFINITY, milliCpus: 2000, runMilliCpus: 2000 });
    expect(placement([old], { runId: 'run_old', memoryMiB: 512, cpus: 1, diskMiB: 256, isolation: 'docker' }, NOW).kind).toBe('placed');
  });

  it('given no live worker, then the request waits for a runtime; given one too small even when empty, then it can never be placed', () => {
    expect(placement([], session('a'), NOW)).toEqual({ kind: 'wait', waitingFor: 'runtime' });
    expect(placement([worker('stale', { lastHeartbeatAt: NOW - 60_000 })], session('a'), NOW)).toEqual({ kind: 'wait', waitingFor: 'runtime' });
    const small = worker('small', { capacity: { slots: 4, memoryMiB: 100, cpus: 2, diskMiB: 8192 } });
    expect(neverFits(session('a'), small)).toBe('memory');
    expect(placement([small], session('a'), NOW)).toEqual({ kind: 'never', resource: 'memory' });
  });

  it('given a full worker, then what its roomiest live worker lacks is what the request waits for', () => {
    const full = worker('w', { capacity: { slots: 2, memoryMiB: 8192, cpus: 2, diskMiB: 8192 }, inFlight: [session('a'), session('b')] });
    expect(placement([full], session('c'), NOW)).toEqual({ kind: 'wait', waitingFor: 'slots' });
  });
});

describe('planQueue', () => {
  const three = worker('w', { capacity: { ...worker('w').capacity, slots: 3 } });

  it('given more waiting than fits, then the longest waiting are placed first, in order, and the rest wait with what they lack', () => {
    const queue = [session('late', NOW + 30), session('first', NOW), session('second', NOW + 10), session('third', NOW + 20)];
    const plan = planQueue([three], queue, NOW);
    expect(plan.placed.map((p) => p.request.runId)).toEqual(['sbx_first', 'sbx_second', 'sbx_third']);
    expect(plan.waiting).toEqual([{ request: queue[0], waitingFor: 'slots' }]);
    expect(plan.placed.at(-1)?.worker.inFlight.map((r) => r.runId)).toEqual(['sbx_first', 'sbx_second', 'sbx_third']);
  });

  it('given a large request first that does not fit, then a smaller one behind it that does is placed (backfill), and the large one keeps its place', () => {
    const half = worker('w', { capacity: { ...worker('w').capacity, memoryMiB: 1000 } });
    const big = session('big', NOW, { memoryMiB: 1500 - 600 });
    const occupied = { ...half, inFlight: [session('held', NOW - 1, { memoryMiB: 600 })] };
    const plan = planQueue([occupied], [big, session('small', NOW + 1)], NOW);
    expect(plan.placed.map((p) => p.request.runId)).toEqual(['sbx_small']);
    expect(plan.waiting).toMatchObject([{ request: { runId: 'sbx_big' }, waitingFor: 'memory' }]);
    expect(queuePositions([big, session('small', NOW + 1)]).get('sbx_big')).toEqual({ position: 1, length: 2 });
  });

  it('given candidates that depend on the request (its image), then each goes only where it may', () => {
    const a = worker('a');
    const b = worker('b');
    const plan = planQueue([a, b], [session('x'), session('y', NOW + 1)], NOW, {
      candidates: (request, current) => current.filter((w) => (request.runId === 'sbx_x' ? w.workerId === 'b' : w.workerId === 'nowhere')),
    });
    expect(plan.placed.map((p) => [p.request.runId, p.worker.workerId])).toEqual([['sbx_x', 'b']]);
    expect(plan.waiting).toMatchObject([{ request: { runId: 'sbx_y' }, waitingFor: 'runtime' }]);
  });

  it('given a request larger than any worker, then it is planned as never placeable rather than left to wait', () => {
    const plan = planQueue([three], [session('huge', NOW, { memoryMiB: 100_000 })], NOW);
    expect(plan.never).toMatchObject([{ request: { runId: 'sbx_huge' }, resource: 'memory' }]);
  });

  it('given a request its worker already holds (a lease not yet announced), then it is placed there again and takes nothing twice', () => {
    const holding = { ...three, inFlight: [session('again')] };
    const plan = planQueue([holding], [session('again'), session('next', NOW + 1)], NOW);
    expect(plan.placed.map((p) => p.request.runId)).toEqual(['sbx_again', 'sbx_next']);
    expect(plan.placed.at(-1)?.worker.inFlight).toHaveLength(2);
  });
});
