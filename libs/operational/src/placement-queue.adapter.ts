import { CairnError, ChainIdSchema, ImageRefSchema, inputIssues, QueueWaitSchema, TenantIdSchema } from '@cairn/contracts';
import type { KV } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import { z } from 'zod';
import { LazyBucketMirror } from './bucket-mirror.js';
import { decodeEntry, isWrongRevision, keyLister, kvCall, openBucket } from './kv-bucket.js';
import type { BucketLimits } from './kv-bucket.js';
import { ReservationSchema } from './worker-record.schema.js';

/** One run or sandbox create waiting for a worker with room (operational state: its placement is evidence, the wait is not). */
export const QueueEntrySchema = z
  .strictObject({
    chain_id: ChainIdSchema,
    tenant: TenantIdSchema,
    /** Epoch ms it started waiting: the queue's order. */
    enqueued_at: z.number().int().min(0),
    /** Epoch ms a sandbox create stops waiting (`waitSeconds`); null: a run waits until it is placed. */
    deadline_at: z.number().int().min(0).nullable(),
    /** The chain seq of the receipt that made it runnable (the decision, or the grant): its placement is caused by it. */
    runnable_seq: z.number().int().min(1),
    image: ImageRefSchema,
    reservation: ReservationSchema,
    waiting_for: QueueWaitSchema,
    /** The attempt its placement is (ADR 0035: after a `run.retried`, the next one); absent: 1. */
    attempt: z.number().int().min(1).optional(),
  })
  .refine((entry) => entry.reservation.runId === entry.chain_id, { message: 'the reservation is for another chain', path: ['reservation', 'runId'] });
export type QueueEntry = z.infer<typeof QueueEntrySchema>;

export interface PlacementQueueOptions extends Partial<BucketLimits> {
  bucket: string;
  /** The bucket's replicas (CAIRN_NATS_REPLICAS); default 1. */
  replicas?: number;
}

/** A run waits as long as it takes; an entry nobody touched for 8 days is gone (the bucket's TTL only bounds it). */
const DEFAULT_LIMITS: BucketLimits = { ttlMs: 8 * 86_400_000, history: 1, maxBytes: 64 * 1024 * 1024, maxValueBytes: 16 * 1024 };

/**
 * The scheduler's placement queue in a KV bucket (`<leases bucket>_queue`), a key per chain: work
 * that found no room waits here instead of in the scheduler's consumer (where it would hold up every
 * receipt behind it). The scheduler writes it; the gateway reads it to show a queued run's place
 * and what it waits for.
 */
export class PlacementQueue {
  private readonly mirror: LazyBucketMirror<QueueEntry>;

  private constructor(
    private readonly kv: KV,
    readonly bucket: string,
    private readonly keys: () => Promise<string[]>,
  ) {
    this.mirror = new LazyBucketMirror(kv, (entry) => decodeEntry(entry, QueueEntrySchema));
  }

  static async open(nc: NatsConnection, options: PlacementQueueOptions): Promise<PlacementQueue> {
    const limits = { ...DEFAULT_LIMITS };
    if (options.ttlMs !== undefined) limits.ttlMs = options.ttlMs;
    if (options.maxBytes !== undefined) limits.maxBytes = options.maxBytes;
    return new PlacementQueue(await openBucket(nc, options.bucket, limits, options.replicas), options.bucket, keyLister(nc, options.bucket, 'the placement queue'));
  }

  /**
   * Queues the chain unless it is queued already; returns the entry as stored (an earlier one keeps
   * its place in line: a redelivered decision does not move it to the back).
   */
  async enqueue(record: QueueEntry): Promise<QueueEntry> {
    const entry = checked(record);
    try {
      const revision = await this.kv.create(entry.chain_id, JSON.stringify(entry));
      this.mirror.apply(entry.chain_id, revision, entry);
      return entry;
    } catch (error) {
      if (!isWrongRevision(error)) throw new CairnError('E_UNAVAILABLE', `cannot queue ${entry.chain_id}: ${String(error)}`);
    }
    const held = await this.get(entry.chain_id);
    if (held === null) throw new CairnError('E_UNAVAILABLE', `the queue entry of ${entry.chain_id} changed while it was written`, { retryAfterMs: 100 });
    return held;
  }

  /** Records what an entry waits for now (nothing when it is unchanged or no longer queued). */
  async waitingFor(chainId: string, waiting: QueueEntry['waiting_for']): Promise<void> {
    const entry = await kvCall(`cannot read the queue entry of ${chainId}`, () => this.kv.get(chainId));
    const held = decodeEntry(entry, QueueEntrySchema);
    if (entry === null || held === null || held.waiting_for === waiting) return;
    const next = { ...held, waiting_for: waiting };
    try {
      const revision = await this.kv.update(chainId, JSON.stringify(next), entry.revision);
      this.mirror.apply(chainId, revision, next);
    } catch (error) {
      if (!isWrongRevision(error)) throw new CairnError('E_UNAVAILABLE', `cannot update the queue entry of ${chainId}: ${String(error)}`);
    }
  }

  async get(chainId: string): Promise<QueueEntry | null> {
    if (!ChainIdSchema.safeParse(chainId).success) return null;
    return decodeEntry(await kvCall(`cannot read the queue entry of ${chainId}`, () => this.kv.get(chainId)), QueueEntrySchema);
  }

  /** Every queued entry, in no particular order: from memory while the bucket is followed, else key by key. */
  async list(): Promise<QueueEntry[]> {
    const mirrored = this.mirror.values();
    if (mirrored !== null) return mirrored;
    const entries: QueueEntry[] = [];
    for (const key of await this.keys()) {
      const entry = await this.get(key);
      if (entry !== null) entries.push(entry);
    }
    return entries;
  }

  /** Takes the chain out of the queue (placed, failed, ended); false when it was not queued. */
  async delete(chainId: string): Promise<boolean> {
    for (let attempt = 1; ; attempt++) {
      const entry = await kvCall(`cannot read the queue entry of ${chainId}`, () => this.kv.get(chainId));
      if (entry === null || entry.operation !== 'PUT') return false;
      try {
        await this.kv.delete(chainId, { previousSeq: entry.revision });
        this.mirror.deleted(chainId);
        return true;
      } catch (error) {
        // Its `waiting_for` was written in between: read it again.
        if (!isWrongRevision(error) || attempt >= 8) throw new CairnError('E_UNAVAILABLE', `cannot remove ${chainId} from the queue: ${String(error)}`);
      }
    }
  }

  close(): void {
    this.mirror.close();
  }
}

function checked(record: QueueEntry): QueueEntry {
  const parsed = QueueEntrySchema.safeParse(record);
  if (parsed.success) return parsed.data;
  const issues = inputIssues(parsed.error);
  throw new CairnError('E_INPUT', `invalid queue entry: ${issues.map((i) => `${i.path}: ${i.message}`).join('; ')}`, { issues });
}
