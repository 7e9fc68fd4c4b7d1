import type { RegisteredWorker } from '@cairn/operational';
export { withLeasedReservations } from '@cairn/operational';
import { eligibleWorkers } from '@cairn/scheduling';

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
 * nothing is known of images: the run waits for a runtime.
 */
export function imageMissing(workers: readonly RegisteredWorker[], image: string, runnableSince: number, now: number, staleAfterMs: number): number | null {
  const live = eligibleWorkers(workers, now, staleAfterMs);
  if (live.length === 0 || live.some((worker) => hasImage(worker, image))) return null;
  return now - runnableSince >= staleAfterMs ? live.length : null;
}
