/*
 * The scheduler's view of runtime workers. Operational state, not evidence (PRODUCT.md "State that
 * is not evidence"): it lives in a KV bucket, and these pure functions decide over a snapshot of it.
 * Times are epoch milliseconds.
 */

/** Isolation a worker offers. gVisor, Kata and Firecracker join through the external driver protocol. */
export type Isolation = 'docker';

/** Fixed when the worker starts (I-6/I-9): a heartbeat never raises it. */
export interface WorkerCapacity {
  /** Concurrent sandboxes. */
  slots: number;
  memoryMiB: number;
  cpus: number;
  diskMiB: number;
}

/** What one admitted run holds on a worker until it is released. */
export interface Reservation {
  runId: string;
  /** The container's memory limit: the run's memory plus its tmpfs, which is charged to memory. */
  memoryMiB: number;
  cpus: number;
  /** The run's tmpfs (its disk cap). */
  diskMiB: number;
}

/** A run asking for a place: its reservation and the isolation it needs. */
export interface PlacementRequest extends Reservation {
  isolation: Isolation;
}

export interface WorkerRecord {
  workerId: string;
  capacity: WorkerCapacity;
  isolation: readonly Isolation[];
  draining: boolean;
  /** The worker's own report (its engine answers, its disk is writable, …). */
  healthy: boolean;
  lastHeartbeatAt: number;
  inFlight: readonly Reservation[];
}

export type WorkerStatus = 'eligible' | 'unhealthy' | 'stale' | 'draining' | 'overloaded';

/** A worker silent for longer than this is stale (three missed 5 s heartbeats). */
export const DEFAULT_STALE_AFTER_MS = 15_000;

export interface FreeCapacity {
  slots: number;
  memoryMiB: number;
  /** Thousandths of a CPU, so sums of fractional CPUs stay exact. */
  milliCpus: number;
  diskMiB: number;
}

/**
 * The reservation for a run with these effective caps (the `policy.decided` receipt's
 * snake_case `caps`): memory is `memory_mib + disk_mib` because tmpfs pages count as memory.
 */
export function reservationFor(
  runId: string,
  caps: { memory_mib: number; disk_mib: number; cpus: number },
  isolation: Isolation = 'docker',
): PlacementRequest {
  return { runId, memoryMiB: caps.memory_mib + caps.disk_mib, cpus: caps.cpus, diskMiB: caps.disk_mib, isolation };
}

export function freeCapacity(worker: WorkerRecord): FreeCapacity {
  const free: FreeCapacity = {
    slots: worker.capacity.slots - worker.inFlight.length,
    memoryMiB: worker.capacity.memoryMiB,
    milliCpus: milli(worker.capacity.cpus),
    diskMiB: worker.capacity.diskMiB,
  };
  for (const held of worker.inFlight) {
    free.memoryMiB -= held.memoryMiB;
    free.milliCpus -= milli(held.cpus);
    free.diskMiB -= held.diskMiB;
  }
  return free;
}

/** A run is admitted only if all of its reservation fits what the worker has free. */
export function fits(reservation: Reservation, free: FreeCapacity): boolean {
  return (
    free.slots >= 1 &&
    reservation.memoryMiB <= free.memoryMiB &&
    milli(reservation.cpus) <= free.milliCpus &&
    reservation.diskMiB <= free.diskMiB
  );
}

/** Why a worker may or may not take work now; the first reason that applies, in this order. */
export function workerStatus(worker: WorkerRecord, now: number, staleAfterMs = DEFAULT_STALE_AFTER_MS): WorkerStatus {
  if (!worker.healthy) return 'unhealthy';
  if (!(now - worker.lastHeartbeatAt <= staleAfterMs)) return 'stale';
  if (worker.draining) return 'draining';
  const free = freeCapacity(worker);
  // Over-committed in any dimension (say, after a restart with less memory) counts as overloaded.
  if (!(free.slots >= 1 && free.memoryMiB >= 0 && free.milliCpus >= 0 && free.diskMiB >= 0)) return 'overloaded';
  return 'eligible';
}

/** Workers that may take work now: stale, draining, unhealthy and overloaded ones are gone before any scoring. */
export function eligibleWorkers<W extends WorkerRecord>(workers: readonly W[], now: number, staleAfterMs = DEFAULT_STALE_AFTER_MS): W[] {
  return workers.filter((worker) => workerStatus(worker, now, staleAfterMs) === 'eligible');
}

export interface PlaceOptions {
  staleAfterMs?: number;
}

/**
 * The worker a run should go to, or `null` when none has room (the run waits). Among eligible
 * workers with the isolation it needs and room for its whole reservation, the one with the most
 * free slots, then the most free memory, then the smallest id — the same answer every time.
 * A run already held by a worker is placed there again, so a redelivered request never places a
 * run twice.
 */
export function placeRun(
  workers: readonly WorkerRecord[],
  request: PlacementRequest,
  now: number,
  options: PlaceOptions = {},
): WorkerRecord | null {
  const holder = workers.find((worker) => worker.inFlight.some((held) => held.runId === request.runId));
  if (holder !== undefined) return holder;

  let best: { worker: WorkerRecord; free: FreeCapacity } | null = null;
  for (const worker of eligibleWorkers(workers, now, options.staleAfterMs)) {
    if (!worker.isolation.includes(request.isolation)) continue;
    const free = freeCapacity(worker);
    if (!fits(request, free)) continue;
    if (best === null || better({ worker, free }, best)) best = { worker, free };
  }
  return best?.worker ?? null;
}

function better(a: { worker: WorkerRecord; free: FreeCapacity }, b: { worker: WorkerRecord; free: FreeCapacity }): boolean {
  if (a.free.slots !== b.free.slots) return a.free.slots > b.free.slots;
  if (a.free.memoryMiB !== b.free.memoryMiB) return a.free.memoryMiB > b.free.memoryMiB;
  return a.worker.workerId < b.worker.workerId;
}

export type Admission = { ok: true; worker: WorkerRecord } | { ok: false; reason: WorkerStatus | 'no_room' | 'isolation' };

/**
 * The worker with the run's reservation added, or why not. Bounded by `slots` and the free
 * capacity; admitting a run the worker already holds changes nothing.
 */
export function admitRun(worker: WorkerRecord, request: PlacementRequest, now: number, options: PlaceOptions = {}): Admission {
  if (worker.inFlight.some((held) => held.runId === request.runId)) return { ok: true, worker };
  const status = workerStatus(worker, now, options.staleAfterMs);
  if (status !== 'eligible') return { ok: false, reason: status };
  if (!worker.isolation.includes(request.isolation)) return { ok: false, reason: 'isolation' };
  if (!fits(request, freeCapacity(worker))) return { ok: false, reason: 'no_room' };
  const held: Reservation = { runId: request.runId, memoryMiB: request.memoryMiB, cpus: request.cpus, diskMiB: request.diskMiB };
  return { ok: true, worker: { ...worker, inFlight: [...worker.inFlight, held] } };
}

/** The worker without the run's reservation (its sandbox is gone, or its lease expired). */
export function releaseRun(worker: WorkerRecord, runId: string): WorkerRecord {
  return { ...worker, inFlight: worker.inFlight.filter((held) => held.runId !== runId) };
}

export interface Heartbeat {
  at: number;
  healthy: boolean;
  draining: boolean;
}

/**
 * The worker after a heartbeat. Capacity is not in a heartbeat: it is fixed at start (I-6/I-9).
 * A heartbeat older than the last one (delivered late) changes nothing.
 */
export function recordHeartbeat(worker: WorkerRecord, heartbeat: Heartbeat): WorkerRecord {
  if (heartbeat.at < worker.lastHeartbeatAt) return worker;
  return { ...worker, lastHeartbeatAt: heartbeat.at, healthy: heartbeat.healthy, draining: heartbeat.draining };
}

function milli(cpus: number): number {
  return Math.round(cpus * 1000);
}
