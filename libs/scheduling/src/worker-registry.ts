/*
 * The scheduler's view of runtime workers. Operational state, not evidence (PRODUCT.md "State that
 * is not evidence"): it lives in a KV bucket, and these pure functions decide over a snapshot of it.
 * Times are epoch milliseconds.
 */

import type { CapacityResource } from '@cairn/contracts';

/** Isolation a worker offers. gVisor, Kata and Firecracker join through the external driver protocol. */
export type Isolation = 'docker';

/**
 * Fixed when the worker starts (I-6/I-9): a heartbeat never raises it. Memory, disk and processes
 * are hard reservations (what a sandbox can pin); CPU is a share: caps stay hard quotas, but
 * admission counts `cpus × cpuOversubscription` of them (`runCpuOversubscription` for runs, which
 * are busy for their whole life where a session mostly waits).
 */
export interface WorkerCapacity {
  /** Concurrent sandboxes. */
  slots: number;
  memoryMiB: number;
  cpus: number;
  diskMiB: number;
  /** The pids caps of its sandboxes together; absent: not bounded (a record from before). */
  pids?: number;
  /** Absent: 1 (a record from before). */
  cpuOversubscription?: number;
  /** Absent: as `cpuOversubscription`. */
  runCpuOversubscription?: number;
}

/** What one admitted run holds on a worker until it is released. */
export interface Reservation {
  runId: string;
  /** The container's memory limit: the run's memory plus its tmpfs, which is charged to memory. */
  memoryMiB: number;
  cpus: number;
  /** The run's tmpfs (its disk cap). */
  diskMiB: number;
  /** Its pids cap; absent: 0 (a reservation from before). */
  pids?: number;
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
  /** Thousandths of a CPU share (CPUs × oversubscription), so sums of fractional CPUs stay exact. */
  milliCpus: number;
  /** The share left to runs (their own oversubscription), in thousandths. */
  runMilliCpus: number;
  diskMiB: number;
  /** Infinity when the worker does not bound processes. */
  pids: number;
}

/** Whether a chain is a sandbox session (mostly idle) rather than a run (busy for its life). */
export function isSessionId(runId: string): boolean {
  return runId.startsWith('sbx_');
}

/**
 * The reservation for a run with these effective caps (the `policy.decided` receipt's
 * snake_case `caps`): memory is `memory_mib + disk_mib` because tmpfs pages count as memory.
 */
export function reservationFor(
  runId: string,
  caps: { memory_mib: number; disk_mib: number; cpus: number; pids?: number },
  isolation: Isolation = 'docker',
): PlacementRequest {
  return {
    runId,
    memoryMiB: caps.memory_mib + caps.disk_mib,
    cpus: caps.cpus,
    diskMiB: caps.disk_mib,
    ...(caps.pids === undefined ? {} : { pids: caps.pids }),
    isolation,
  };
}

function factor(value: number | undefined, fallback: number): number {
  return value !== undefined && Number.isFinite(value) && value > 0 ? value : fallback;
}

/** The CPU shares admission counts on a worker: for everything, and for runs. */
export function cpuShares(capacity: WorkerCapacity): { all: number; runs: number } {
  const all = factor(capacity.cpuOversubscription, 1);
  return { all: milli(capacity.cpus * all), runs: milli(capacity.cpus * factor(capacity.runCpuOversubscription, all)) };
}

export function freeCapacity(worker: WorkerRecord): FreeCapacity {
  const shares = cpuShares(worker.capacity);
  const free: FreeCapacity = {
    slots: worker.capacity.slots - worker.inFlight.length,
    memoryMiB: worker.capacity.memoryMiB,
    milliCpus: shares.all,
    runMilliCpus: shares.runs,
    diskMiB: worker.capacity.diskMiB,
    pids: worker.capacity.pids ?? Number.POSITIVE_INFINITY,
  };
  for (const held of worker.inFlight) {
    free.memoryMiB -= held.memoryMiB;
    free.milliCpus -= milli(held.cpus);
    if (!isSessionId(held.runId)) free.runMilliCpus -= milli(held.cpus);
    free.diskMiB -= held.diskMiB;
    free.pids -= held.pids ?? 0;
  }
  return free;
}

/** The first dimension (slots, memory, disk, pids, cpu) the reservation does not fit in, or null when it fits. */
export function shortfall(reservation: Reservation, free: FreeCapacity): CapacityResource | null {
  if (free.slots < 1) return 'slots';
  if (reservation.memoryMiB > free.memoryMiB) return 'memory';
  if (reservation.diskMiB > free.diskMiB) return 'disk';
  if ((reservation.pids ?? 0) > free.pids) return 'pids';
  const cpus = milli(reservation.cpus);
  if (cpus > free.milliCpus || (!isSessionId(reservation.runId) && cpus > free.runMilliCpus)) return 'cpu';
  return null;
}

/** A run is admitted only if all of its reservation fits what the worker has free. */
export function fits(reservation: Reservation, free: FreeCapacity): boolean {
  return shortfall(reservation, free) === null;
}

/** The dimension in which the reservation is larger than the whole (empty) worker, or null: it could fit some day. */
export function neverFits(reservation: Reservation, worker: WorkerRecord): CapacityResource | null {
  const slots = worker.capacity.slots;
  return slots < 1 ? 'slots' : shortfall(reservation, freeCapacity({ ...worker, inFlight: [] }));
}

/** Why a worker may or may not take work now; the first reason that applies, in this order. */
export function workerStatus(worker: WorkerRecord, now: number, staleAfterMs = DEFAULT_STALE_AFTER_MS): WorkerStatus {
  if (!worker.healthy) return 'unhealthy';
  if (!(now - worker.lastHeartbeatAt <= staleAfterMs)) return 'stale';
  if (worker.draining) return 'draining';
  const free = freeCapacity(worker);
  // Over-committed in any dimension (say, after a restart with less memory) counts as overloaded.
  if (!(free.slots >= 1 && free.memoryMiB >= 0 && free.milliCpus >= 0 && free.diskMiB >= 0 && free.pids >= 0)) return 'overloaded';
  return 'eligible';
}

/** Workers that may take work now: stale, draining, unhealthy and overloaded ones are gone before any scoring. */
export function eligibleWorkers<W extends WorkerRecord>(workers: readonly W[], now: number, staleAfterMs = DEFAULT_STALE_AFTER_MS): W[] {
  return workers.filter((worker) => workerStatus(worker, now, staleAfterMs) === 'eligible');
}

/** Workers that are up (healthy, heard from, not draining), full or not: the ones a wait for room can end on. */
export function liveWorkers<W extends WorkerRecord>(workers: readonly W[], now: number, staleAfterMs = DEFAULT_STALE_AFTER_MS): W[] {
  return workers.filter((worker) => {
    const status = workerStatus(worker, now, staleAfterMs);
    return status === 'eligible' || status === 'overloaded';
  });
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

/**
 * Where a request stands: placed on a worker; waiting — for room (naming the first dimension the
 * roomiest live worker lacks) or for a runtime (no live worker with its isolation); or never
 * placeable (larger than every live worker even when empty, naming the dimension).
 */
export type Placement =
  | { kind: 'placed'; worker: WorkerRecord }
  | { kind: 'wait'; waitingFor: CapacityResource | 'runtime' }
  | { kind: 'never'; resource: CapacityResource };

export function placement(workers: readonly WorkerRecord[], request: PlacementRequest, now: number, options: PlaceOptions = {}): Placement {
  const placed = placeRun(workers, request, now, options);
  if (placed !== null) return { kind: 'placed', worker: placed };
  const live = liveWorkers(workers, now, options.staleAfterMs).filter((worker) => worker.isolation.includes(request.isolation));
  if (live.length === 0) return { kind: 'wait', waitingFor: 'runtime' };
  const never = live.map((worker) => neverFits(request, worker));
  if (never.every((resource) => resource !== null)) return { kind: 'never', resource: never[0] ?? 'slots' };
  // What the roomiest worker that could ever hold it lacks now.
  let best: { worker: WorkerRecord; free: FreeCapacity } | null = null;
  for (const [i, worker] of live.entries()) {
    if (never[i] !== null) continue;
    const free = freeCapacity(worker);
    if (best === null || better({ worker, free }, best)) best = { worker, free };
  }
  return { kind: 'wait', waitingFor: (best === null ? null : shortfall(request, best.free)) ?? 'slots' };
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
  const { isolation: _isolation, ...held } = request;
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
