import type { LeaseRecord, RegisteredWorker } from '@cairn/operational';
import type { Reservation } from '@cairn/scheduling';

/**
 * The workers as placement must see them: every run the lease store holds on each (a run scheduled
 * a moment ago is not in its worker's heartbeat yet), plus what the worker reports in flight — but
 * only runs that still hold a lease. A heartbeat is up to one interval old, and the runtime deletes
 * a run's lease when the run ends, so a report without a lease is a run that has finished: counting
 * it would keep its capacity taken until the next heartbeat and make new runs back off.
 */
export function withLeasedReservations(workers: readonly RegisteredWorker[], leases: readonly LeaseRecord[]): RegisteredWorker[] {
  const leased = new Set(leases.map((lease) => lease.run_id));
  return workers.map((worker) => {
    const held = new Map<string, Reservation>(worker.inFlight.filter((r) => leased.has(r.runId)).map((r) => [r.runId, r]));
    for (const lease of leases) if (lease.worker_id === worker.workerId) held.set(lease.run_id, lease.reservation);
    return { ...worker, inFlight: [...held.values()] };
  });
}

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
