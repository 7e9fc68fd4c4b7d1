import { CairnError, WorkerIdSchema } from '@cairn/contracts';
import type { KV } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import { z } from 'zod';
import { LazyBucketMirror } from './bucket-mirror.js';
import { decodeEntry, isWrongRevision, keyLister, kvCall, openBucket } from './kv-bucket.js';
import type { BucketLimits } from './kv-bucket.js';
import type { RegisteredWorker } from './worker-record.schema.js';

/** An operator's drain of a worker (ADR 0026): who asked, and when. */
export const WorkerDrainSchema = z.strictObject({
  workerId: WorkerIdSchema,
  /** Epoch milliseconds, by the gateway's clock. */
  drainedAt: z.number().int().min(0),
  /** The actor the gateway authenticated (`key:<id>`). */
  by: z.string().min(1).max(200),
});
export type WorkerDrain = z.infer<typeof WorkerDrainSchema>;

export interface WorkerDrainsOptions {
  /** `drainsBucketFor(<workers bucket>)`. */
  bucket: string;
  replicas?: number;
}

/** No TTL: a drain stays until an operator lifts it, across restarts of its worker and expiries of its record. */
const LIMITS: BucketLimits = { ttlMs: 0, history: 1, maxBytes: 16 * 1024 * 1024, maxValueBytes: 4096 };

/**
 * Operators' drains, a key per worker id, in a bucket of their own beside the worker registry: the
 * registry's records are the workers' own (rewritten at every start, expiring with silence), a
 * drain is the operator's and must outlive both. The gateway writes it; the scheduler reads it
 * before every placement (`withDrains`).
 */
export class WorkerDrains {
  private readonly mirror: LazyBucketMirror<WorkerDrain>;

  private constructor(
    private readonly kv: KV,
    readonly bucket: string,
    private readonly keys: () => Promise<string[]>,
  ) {
    this.mirror = new LazyBucketMirror(kv, (entry) => decodeEntry(entry, WorkerDrainSchema));
  }

  static async open(nc: NatsConnection, options: WorkerDrainsOptions): Promise<WorkerDrains> {
    const kv = await openBucket(nc, options.bucket, LIMITS, options.replicas);
    return new WorkerDrains(kv, options.bucket, keyLister(nc, options.bucket, 'worker drains'));
  }

  /** Marks the worker drained; a drain already set is kept as it was (its first time and actor). */
  async drain(drain: WorkerDrain): Promise<WorkerDrain> {
    const parsed = WorkerDrainSchema.safeParse(drain);
    if (!parsed.success) throw new CairnError('E_INPUT', `invalid drain: ${parsed.error.issues.map((i) => i.message).join('; ')}`);
    const { workerId } = parsed.data;
    const held = await this.get(workerId);
    if (held !== null) return held;
    try {
      // Created only where no drain is: of two operators draining at once, the first one's stays.
      const revision = await this.kv.create(workerId, JSON.stringify(parsed.data));
      this.mirror.apply(workerId, revision, parsed.data);
      return parsed.data;
    } catch (error) {
      if (!isWrongRevision(error)) throw new CairnError('E_UNAVAILABLE', `cannot drain worker ${workerId}: ${error instanceof Error ? error.message : String(error)}`);
      const first = await this.get(workerId);
      if (first === null) throw new CairnError('E_CONFLICT', `worker ${workerId}'s drain changed while it was set: try again`, { workerId });
      return first;
    }
  }

  /** Lifts the worker's drain; false when there was none. */
  async undrain(workerId: string): Promise<boolean> {
    if ((await this.get(workerId)) === null) return false;
    await kvCall(`cannot undrain worker ${workerId}`, () => this.kv.delete(workerId));
    this.mirror.deleted(workerId);
    return true;
  }

  /** The worker's drain, read from the bucket itself (not the mirror), or null. */
  async get(workerId: string): Promise<WorkerDrain | null> {
    if (!WorkerIdSchema.safeParse(workerId).success) return null;
    const entry = await kvCall(`cannot read the drain of worker ${workerId}`, () => this.kv.get(workerId));
    return decodeEntry(entry, WorkerDrainSchema);
  }

  /** Every drain, by worker id: from memory while the bucket is followed, else read key by key. */
  async list(): Promise<Map<string, WorkerDrain>> {
    const mirrored = this.mirror.values();
    const drains = mirrored ?? (await Promise.all((await this.keys()).map((key) => this.get(key)))).filter((d): d is WorkerDrain => d !== null);
    return new Map(drains.map((d) => [d.workerId, d]));
  }

  close(): void {
    this.mirror.close();
  }
}

/** The workers as placement must see them: an operator's drain counts as the worker's own. */
export function withDrains<W extends RegisteredWorker>(workers: readonly W[], drains: ReadonlyMap<string, WorkerDrain>): W[] {
  return workers.map((worker) => (drains.has(worker.workerId) && !worker.draining ? { ...worker, draining: true } : worker));
}
