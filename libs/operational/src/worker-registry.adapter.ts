import { CairnError, inputIssues, WorkerIdSchema } from '@cairn/contracts';
import type { KV } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import { observedWorker, Sightings } from '@cairn/scheduling';
import { LazyBucketMirror } from './bucket-mirror.js';
import { decodeEntry, isWrongRevision, keyLister, kvCall, openBucket } from './kv-bucket.js';
import type { BucketLimits } from './kv-bucket.js';
import { RegisteredWorkerSchema } from './worker-record.schema.js';
import type { RegisteredWorker } from './worker-record.schema.js';

export interface WorkerRegistryOptions extends Partial<BucketLimits> {
  /** Default `cairn_workers`. */
  bucket?: string;
  /** The bucket's replicas (CAIRN_NATS_REPLICAS); default 1. */
  replicas?: number;
  /**
   * For an observer that judges staleness (the scheduler, policy): reads give every worker the
   * `lastHeartbeatAt` of this observer's clock — when it first saw the record's current revision
   * (ADR 0033) — never the time the worker's own wall clock wrote. Such a registry only reads.
   */
  observe?: boolean;
}

export const DEFAULT_WORKERS_BUCKET = 'cairn_workers';
const DEFAULT_LIMITS: BucketLimits = { ttlMs: 5 * 60_000, history: 1, maxBytes: 64 * 1024 * 1024, maxValueBytes: 256 * 1024 };
/** Compare-and-set attempts before a write that keeps losing gives up (E_CONFLICT). */
const CAS_ATTEMPTS = 8;

/**
 * Runtime workers and their heartbeats in a KV bucket (operational state, not evidence): a key per
 * worker id, expiring when the worker goes silent past the bucket's TTL. The scheduler reads it; the
 * runtime writes its own record.
 */
export class WorkerRegistry {
  /** Lists are served from memory once it follows the bucket (`BucketMirror`). */
  private readonly mirror: LazyBucketMirror<RegisteredWorker>;

  private readonly sightings: Sightings | null;

  private constructor(
    private readonly kv: KV,
    readonly bucket: string,
    private readonly keys: () => Promise<string[]>,
    observe = false,
  ) {
    this.mirror = new LazyBucketMirror(kv, (entry) => decodeEntry(entry, RegisteredWorkerSchema));
    this.sightings = observe ? new Sightings() : null;
  }

  static async open(nc: NatsConnection, options: WorkerRegistryOptions = {}): Promise<WorkerRegistry> {
    const bucket = options.bucket ?? DEFAULT_WORKERS_BUCKET;
    const kv = await openBucket(nc, bucket, { ...DEFAULT_LIMITS, ...definedLimits(options) }, options.replicas);
    return new WorkerRegistry(kv, bucket, keyLister(nc, bucket, 'workers'), options.observe === true);
  }

  /** Writes the worker's record as it starts: its capacity is fixed from here on (I-6/I-9). */
  async register(record: RegisteredWorker): Promise<RegisteredWorker> {
    const worker = checked(record);
    const revision = await kvCall(`cannot register worker ${worker.workerId}`, () => this.kv.put(worker.workerId, JSON.stringify(worker)));
    this.mirror.apply(worker.workerId, revision, worker);
    return worker;
  }

  /**
   * Refreshes the worker's record (liveness, health, in-flight runs, local images). Capacity cannot
   * change by heartbeat (E_CONFLICT: re-register after a restart); a drain set by an operator stays
   * set; a heartbeat older than the stored one changes nothing. A worker whose key expired is
   * registered again.
   */
  async heartbeat(record: RegisteredWorker): Promise<RegisteredWorker> {
    const incoming = checked(record);
    return this.update(incoming.workerId, (stored) => {
      if (stored === null) return incoming;
      if (JSON.stringify(stored.capacity) !== JSON.stringify(incoming.capacity)) {
        throw new CairnError('E_CONFLICT', `worker ${incoming.workerId}: capacity is fixed at registration; register again to change it`, {
          workerId: incoming.workerId,
        });
      }
      if (incoming.lastHeartbeatAt < stored.lastHeartbeatAt) return stored;
      return { ...incoming, draining: stored.draining || incoming.draining };
    });
  }

  /** Stops new work going to the worker; its runs carry on. E_NOT_FOUND for an unknown worker. */
  async markDraining(workerId: string): Promise<RegisteredWorker> {
    return this.update(workerId, (stored) => {
      if (stored === null) throw new CairnError('E_NOT_FOUND', `no worker ${workerId} is registered`, { workerId });
      return { ...stored, draining: true };
    });
  }

  /** Removes the worker's record (a clean shutdown); false when there was none. */
  async deregister(workerId: string): Promise<boolean> {
    const existing = await this.get(workerId);
    if (existing === null) return false;
    await kvCall(`cannot deregister worker ${workerId}`, () => this.kv.delete(workerId));
    this.mirror.deleted(workerId);
    return true;
  }

  /** The worker's record, or null (unknown, expired, or a value that does not validate). */
  async get(workerId: string): Promise<RegisteredWorker | null> {
    if (!WorkerIdSchema.safeParse(workerId).success) return null;
    const entry = await kvCall(`cannot read worker ${workerId}`, () => this.kv.get(workerId));
    const worker = decodeEntry(entry, RegisteredWorkerSchema);
    return worker === null || entry === null ? worker : this.observed(workerId, entry.revision, worker);
  }

  /** The worker as this registry's observer judges it (`observe`), or as stored. */
  private observed(key: string, revision: number, worker: RegisteredWorker): RegisteredWorker {
    if (this.sightings === null) return worker;
    const mono = performance.now();
    return observedWorker(worker, this.sightings.see(key, revision, mono), mono, Date.now());
  }

  /**
   * Every registered worker, by id; records that do not validate are not workers. From memory while
   * the bucket is followed (a moment behind other writers at most), else read key by key.
   */
  async list(): Promise<RegisteredWorker[]> {
    const mirrored = this.mirror.entries();
    if (mirrored !== null) {
      this.sightings?.keepOnly(mirrored.map((e) => e.key));
      return mirrored.map(({ key, revision, value }) => this.observed(key, revision, value));
    }
    const workers: RegisteredWorker[] = [];
    for (const key of await this.keys()) {
      const worker = await this.get(key);
      if (worker !== null) workers.push(worker);
    }
    this.sightings?.keepOnly(workers.map((w) => w.workerId));
    return workers;
  }

  /** Read, change, compare-and-set; retried while other writers win. */
  private async update(workerId: string, change: (stored: RegisteredWorker | null) => RegisteredWorker): Promise<RegisteredWorker> {
    for (let attempt = 1; ; attempt++) {
      const entry = await kvCall(`cannot read worker ${workerId}`, () => this.kv.get(workerId));
      const stored = decodeEntry(entry, RegisteredWorkerSchema);
      const next = checked(change(stored));
      if (stored !== null && JSON.stringify(next) === JSON.stringify(stored)) return stored;
      try {
        const data = JSON.stringify(next);
        // A deleted or expired key is written afresh; a live one only over the revision read.
        const revision = entry === null || entry.operation !== 'PUT' ? await this.kv.create(workerId, data) : await this.kv.update(workerId, data, entry.revision);
        this.mirror.apply(workerId, revision, next);
        return next;
      } catch (error) {
        if (!isWrongRevision(error)) throw new CairnError('E_UNAVAILABLE', `cannot write worker ${workerId}: ${error instanceof Error ? error.message : String(error)}`);
        if (attempt >= CAS_ATTEMPTS) throw new CairnError('E_CONFLICT', `worker ${workerId} kept changing: gave up after ${attempt} attempts`);
      }
    }
  }
}

function checked(record: RegisteredWorker): RegisteredWorker {
  const parsed = RegisteredWorkerSchema.safeParse(record);
  if (parsed.success) return parsed.data;
  const issues = inputIssues(parsed.error);
  throw new CairnError('E_INPUT', `invalid worker record: ${issues.map((i) => `${i.path}: ${i.message}`).join('; ')}`, { issues });
}

function definedLimits(options: Partial<BucketLimits>): Partial<BucketLimits> {
  const limits: Partial<BucketLimits> = {};
  if (options.ttlMs !== undefined) limits.ttlMs = options.ttlMs;
  if (options.history !== undefined) limits.history = options.history;
  if (options.maxBytes !== undefined) limits.maxBytes = options.maxBytes;
  if (options.maxValueBytes !== undefined) limits.maxValueBytes = options.maxValueBytes;
  return limits;
}
