import type { CapacityResource } from '@cairn/contracts';
import type { RegisteredWorker } from '@cairn/operational';
export { withLeasedReservations } from '@cairn/operational';
import { eligibleWorkers, freeCapacity, isSessionId, liveWorkers, neverFits, shortfall, workerStatus } from '@cairn/scheduling';
import type { Reservation, WorkerRecord } from '@cairn/scheduling';

/**
 * Whether the worker has the image the decision names (`name:tag`, perhaps `@sha256:…`): there is
 * no registry to pull from, so a run goes only where its image already is, with the pinned digest
 * when the decision pins one.
 */
export function hasImage(worker: RegisteredWorker, image: string): boolean {
  const at = image.indexOf('@');
  if (at === -1) return Object.hasOwn(worker.images, image);
  return worker.images[image.slice(0, at)] === image.slice(at + 1);
}

/**
 * How many live workers there are when none of them has `image` and the run has been runnable for
 * at least `staleAfterMs` — a worker reports its images with every heartbeat, and one that has not
 * reported for that long is not live, so an image built (or a worker started) within that time is
 * still waited for; otherwise null (place it, or let it wait for room). With no live worker at all
 * nothing is known of images: the run waits for a runtime; nor while a drained (but heard-from)
 * worker has it: the run waits for the drain to end.
 */
export function imageMissing(workers: readonly RegisteredWorker[], image: string, runnableSince: number, now: number, staleAfterMs: number): number | null {
  const live = eligibleWorkers(workers, now, staleAfterMs);
  if (live.length === 0 || live.some((worker) => hasImage(worker, image))) return null;
  // A drained worker (ADR 0026) that has it: the run waits for the drain to be lifted rather than fail.
  if (workers.some((worker) => worker.draining && workerStatus(worker, now, staleAfterMs) === 'draining' && hasImage(worker, image))) return null;
  return now - runnableSince >= staleAfterMs ? live.length : null;
}

/** One dimension of room in words: `1 slot`, `128 MiB of memory`, `0.25 CPU`, `64 processes`. */
export function capacityAmount(resource: CapacityResource, amount: number): string {
  const n = Math.round(amount * 1000) / 1000;
  switch (resource) {
    case 'slots':
      return `${n} ${n === 1 ? 'slot' : 'slots'}`;
    case 'memory':
      return `${n} MiB of memory`;
    case 'disk':
      return `${n} MiB of disk`;
    case 'pids':
      return `${n} ${n === 1 ? 'process' : 'processes'}`;
    case 'cpu':
      return `${n} CPU`;
  }
}

function neededOf(reservation: Reservation, resource: CapacityResource): number {
  switch (resource) {
    case 'slots':
      return 1;
    case 'memory':
      return reservation.memoryMiB;
    case 'disk':
      return reservation.diskMiB;
    case 'pids':
      return reservation.pids ?? 0;
    case 'cpu':
      return reservation.cpus;
  }
}

/** What `worker` has free of `resource` for this reservation (a run's CPU is bounded by the runs' share too). */
function freeFor(worker: WorkerRecord, reservation: Reservation, resource: CapacityResource): number {
  const free = freeCapacity(worker);
  switch (resource) {
    case 'slots':
      return Math.max(0, free.slots);
    case 'memory':
      return Math.max(0, free.memoryMiB);
    case 'disk':
      return Math.max(0, free.diskMiB);
    case 'pids':
      return Math.max(0, free.pids);
    case 'cpu':
      return Math.max(0, isSessionId(reservation.runId) ? free.milliCpus : Math.min(free.milliCpus, free.runMilliCpus)) / 1000;
  }
}

/** The workers with `placed` added to their reservations: what is left once a queue pass has placed them. */
export function withPlaced<W extends WorkerRecord>(workers: readonly W[], placed: readonly { request: Reservation; worker: { workerId: string } }[]): W[] {
  return workers.map((worker) => {
    const mine = placed.filter((p) => p.worker.workerId === worker.workerId && !worker.inFlight.some((held) => held.runId === p.request.runId));
    if (mine.length === 0) return worker;
    const added = mine.map(({ request: { runId, memoryMiB, cpus, diskMiB, pids } }) => ({ runId, memoryMiB, cpus, diskMiB, ...(pids === undefined ? {} : { pids }) }));
    return { ...worker, inFlight: [...worker.inFlight, ...added] };
  });
}

/**
 * Why `chainId` found no room, as its creator reads it: what ran out and how much it needs, then
 * what the live workers that could ever hold it have — grouped by what each lacks first, so
 * the figure given for `resource` is the most free on any worker short of it, and a worker with
 * more of it free but short of something else is named as such rather than contradicting it.
 */
export function fullMessage(chainId: string, reservation: Reservation, resource: CapacityResource, workers: readonly WorkerRecord[], now: number, staleAfterMs: number): string {
  const live = liveWorkers(workers, now, staleAfterMs).filter((worker) => worker.isolation.includes('docker') && neverFits(reservation, worker) === null);
  const lacking = new Map<CapacityResource, number[]>();
  for (const worker of live) {
    const short = shortfall(reservation, freeCapacity(worker));
    // Room that the queue gave to work ahead of it counts as what it waits for.
    const dimension = short ?? resource;
    lacking.set(dimension, [...(lacking.get(dimension) ?? []), freeFor(worker, reservation, dimension)]);
  }
  const groups = [resource, ...[...lacking.keys()].filter((r) => r !== resource)].flatMap((r) => {
    const free = lacking.get(r);
    if (free === undefined) return [];
    const most = capacityAmount(r, Math.max(...free));
    if (live.length === 1) return [`the live worker has ${r === 'slots' && Math.max(...free) === 0 ? 'no slot' : most} free`];
    const verb = free.length === 1 ? 'has' : 'have';
    return [r === 'slots' && Math.max(...free) === 0 ? `${free.length} ${verb} no slot free` : `${free.length} ${verb} at most ${most} free`];
  });
  const where = live.length === 0 ? 'no live worker could hold it' : live.length === 1 ? groups.join('') : `of the ${live.length} live workers, ${groups.join('; ')}`;
  return `no worker has room for ${chainId}: ${resource} ran out (it needs ${capacityAmount(resource, neededOf(reservation, resource))}; ${where}); try again later, or ask to wait (waitSeconds)`;
}

/** Why `chainId` can never be placed: it needs more of `resource` than the largest live worker has in all. */
export function neverMessage(chainId: string, reservation: Reservation, resource: CapacityResource, workers: readonly WorkerRecord[], now: number, staleAfterMs: number): string {
  const live = liveWorkers(workers, now, staleAfterMs).filter((worker) => worker.isolation.includes('docker'));
  const largest = Math.max(0, ...live.map((worker) => freeFor({ ...worker, inFlight: [] }, reservation, resource)));
  return `no worker can ever hold ${chainId}: it needs ${capacityAmount(resource, neededOf(reservation, resource))}, and the largest live worker has ${capacityAmount(resource, largest)} in all`;
}
