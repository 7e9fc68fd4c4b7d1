import type { LeaseRecord, RegisteredWorker } from '@cairn/operational';
import type { Reservation } from '@cairn/scheduling';

/**
 * The workers as placement must see them: what each reports in flight, plus every run the lease
 * store holds on it (a run scheduled a moment ago is not in its worker's heartbeat yet).
 */
export function withLeasedReservations(workers: readonly RegisteredWorker[], leases: readonly LeaseRecord[]): RegisteredWorker[] {
  return workers.map((worker) => {
    const held = new Map<string, Reservation>(worker.inFlight.map((r) => [r.runId, r]));
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
