import { ChainIdSchema, ImageRefSchema, WorkerIdSchema } from '@cairn/contracts';
import { workerStatus } from '@cairn/scheduling';
import type { Reservation, WorkerRecord } from '@cairn/scheduling';
import { z } from 'zod';

/** An image a worker has locally, keyed by `name:tag` (no digest), as policy names images. */
export const LocalImageTagSchema = ImageRefSchema.refine((ref) => !ref.includes('@'), 'an image tag without a digest');
export const LocalImageDigestSchema = z.string().regex(/^sha256:[0-9a-f]{64}$/, 'a digest is sha256:<64 lower-case hex>');

export const ReservationSchema = z.strictObject({
  runId: ChainIdSchema,
  memoryMiB: z.number().int().min(0),
  cpus: z.number().min(0),
  diskMiB: z.number().int().min(0),
  pids: z.number().int().min(0).optional(),
}) satisfies z.ZodType<Reservation>;

/** `@cairn/scheduling`'s `WorkerRecord` as stored in the `cairn_workers` bucket, plus the worker's local images. */
export const RegisteredWorkerSchema = z.strictObject({
  workerId: WorkerIdSchema,
  capacity: z.strictObject({
    slots: z.number().int().min(0).max(4096),
    memoryMiB: z.number().int().min(0),
    cpus: z.number().min(0).max(4096),
    diskMiB: z.number().int().min(0),
    /** Optional: records written before capacity counted processes and CPU shares read as before. */
    pids: z.number().int().min(0).optional(),
    cpuOversubscription: z.number().min(1).max(1024).optional(),
    runCpuOversubscription: z.number().min(1).max(1024).optional(),
  }),
  isolation: z.array(z.enum(['docker'])).max(8),
  draining: z.boolean(),
  healthy: z.boolean(),
  /** Epoch milliseconds, by the worker's clock. */
  lastHeartbeatAt: z.number().int().min(0),
  inFlight: z.array(ReservationSchema).max(4096),
  images: z.record(LocalImageTagSchema, LocalImageDigestSchema),
  /**
   * The worker's warm pool and containers, counted since the worker started (`/metrics`). Optional:
   * records written before it read as before.
   */
  pool: z
    .strictObject({
      size: z.number().int().min(0),
      hits: z.number().int().min(0),
      misses: z.number().int().min(0),
      containersStarted: z.number().int().min(0),
    })
    .optional(),
});
export type RegisteredWorker = z.infer<typeof RegisteredWorkerSchema>;

// The stored record must stay usable wherever the scheduling library expects a WorkerRecord.
const _isWorkerRecord = (worker: RegisteredWorker): WorkerRecord => worker;

/**
 * Digest of each image tag on the workers that may take work now, for policy's `localImageDigests`.
 * A tag whose live workers disagree on the digest is left out: policy then knows no digest for it
 * (a pinned digest is still enforced, by policy and at placement), rather than picking one blindly.
 */
export function liveImageDigests(workers: readonly RegisteredWorker[], now: number, staleAfterMs?: number): Record<string, string> {
  const seen = new Map<string, string | null>();
  for (const worker of workers) {
    const status = workerStatus(worker, now, staleAfterMs);
    if (status === 'unhealthy' || status === 'stale') continue;
    for (const [tag, digest] of Object.entries(worker.images)) {
      const known = seen.get(tag);
      seen.set(tag, known === undefined || known === digest ? digest : null);
    }
  }
  const digests: Record<string, string> = {};
  for (const [tag, digest] of [...seen].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) if (digest !== null) digests[tag] = digest;
  return digests;
}

/**
 * The workers as placement must see them: every run the lease store holds on each (a run scheduled
 * a moment ago is not in its worker's heartbeat yet), plus what the worker reports in flight — but
 * only runs that still hold a lease. A heartbeat is up to one interval old, and the runtime deletes
 * a run's lease when the run ends, so a report without a lease is a run that has finished: counting
 * it would keep its capacity taken until the next heartbeat and make new runs back off.
 */
export function withLeasedReservations(workers: readonly RegisteredWorker[], leases: readonly { run_id: string; worker_id: string; reservation: Reservation }[]): RegisteredWorker[] {
  const leased = new Set(leases.map((lease) => lease.run_id));
  return workers.map((worker) => {
    const held = new Map<string, Reservation>(worker.inFlight.filter((r) => leased.has(r.runId)).map((r) => [r.runId, r]));
    for (const lease of leases) if (lease.worker_id === worker.workerId) held.set(lease.run_id, lease.reservation);
    return { ...worker, inFlight: [...held.values()] };
  });
}
