import { CairnError, ChainIdSchema, inputIssues, LeaseIdSchema, TimestampSchema, WorkerIdSchema } from '@cairn/contracts';
import { observedLease, Sightings } from '@cairn/scheduling';
import type { Lease } from '@cairn/scheduling';
import type { KV } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import { z } from 'zod';
import { LazyBucketMirror } from './bucket-mirror.js';
import { decodeEntry, isWrongRevision, keyLister, kvCall, openBucket } from './kv-bucket.js';
import type { BucketLimits } from './kv-bucket.js';
import { ReservationSchema } from './worker-record.schema.js';

/** A lease (as `run.scheduled` carries it) with the capacity it holds on its worker. */
export const LeaseRecordSchema = z
  .strictObject({
    lease_id: LeaseIdSchema,
    // A run's or a sandbox session's (which holds its worker slot for its life).
    run_id: ChainIdSchema,
    worker_id: WorkerIdSchema,
    attempt: z.number().int().min(1),
    granted_at: TimestampSchema,
    expires_at: TimestampSchema,
    reservation: ReservationSchema,
  })
  .refine((record) => record.reservation.runId === record.run_id, { message: 'the reservation is for another run', path: ['reservation', 'runId'] });
export type LeaseRecord = z.infer<typeof LeaseRecordSchema>;

const _isLease = (record: LeaseRecord): Lease => record;

export interface LeaseStoreOptions extends Partial<BucketLimits> {
  /** Default `cairn_leases`. */
  bucket?: string;
  /** The bucket's replicas (CAIRN_NATS_REPLICAS); default 1. */
  replicas?: number;
  /**
   * For an observer that judges expiry (the scheduler): reads give every lease the `expires_at`
   * of this observer's clock — `observeTtlMs` after it first saw the lease's current revision
   * (ADR 0033) — never the one its writer's wall clock wrote.
   */
  observeTtlMs?: number;
}

export const DEFAULT_LEASES_BUCKET = 'cairn_leases';
/**
 * A lease lives seconds, but the bucket keeps a forgotten one for a day: the scheduler's scan must
 * still see an expired lease after a long outage to fail its run, so the bucket's TTL is only a bound.
 */
const DEFAULT_LIMITS: BucketLimits = { ttlMs: 86_400_000, history: 1, maxBytes: 64 * 1024 * 1024, maxValueBytes: 64 * 1024 };
const CAS_ATTEMPTS = 8;

/** Why a renewal was refused, in `details.reason` of the E_CONFLICT. */
export type RenewRefusal = 'not_holder' | 'expired';

/**
 * Leases in a KV bucket, a key per run id (operational state; the grant and the loss are evidence,
 * the renewals are not). The scheduler writes and scans them; the runtime renews its own.
 */
export class LeaseStore {
  /** Lists are served from memory once it follows the bucket (`BucketMirror`). */
  private readonly mirror: LazyBucketMirror<LeaseRecord>;
  /** Renewals written from the mirror's copy of the lease, without reading it first. */
  renewedFromMirror = 0;

  private readonly sightings = new Sightings();

  private constructor(
    private readonly kv: KV,
    readonly bucket: string,
    private readonly keys: () => Promise<string[]>,
    private readonly observeTtlMs: number | null = null,
  ) {
    this.mirror = new LazyBucketMirror(kv, (entry) => decodeEntry(entry, LeaseRecordSchema));
  }

  static async open(nc: NatsConnection, options: LeaseStoreOptions = {}): Promise<LeaseStore> {
    const bucket = options.bucket ?? DEFAULT_LEASES_BUCKET;
    const limits = { ...DEFAULT_LIMITS };
    if (options.ttlMs !== undefined) limits.ttlMs = options.ttlMs;
    if (options.history !== undefined) limits.history = options.history;
    if (options.maxBytes !== undefined) limits.maxBytes = options.maxBytes;
    if (options.maxValueBytes !== undefined) limits.maxValueBytes = options.maxValueBytes;
    return new LeaseStore(await openBucket(nc, bucket, limits, options.replicas), bucket, keyLister(nc, bucket, 'leases'), options.observeTtlMs ?? null);
  }

  /** Writes the run's lease, replacing any other. */
  async put(record: LeaseRecord): Promise<LeaseRecord> {
    const lease = checked(record);
    const revision = await kvCall(`cannot write the lease of ${lease.run_id}`, () => this.kv.put(lease.run_id, JSON.stringify(lease)));
    this.mirror.apply(lease.run_id, revision, lease);
    return lease;
  }

  /**
   * Writes the run's lease unless the run already has one; returns the lease the run holds now and
   * whether it is this one. Two schedulers racing for a run both end up naming the same lease.
   */
  async create(record: LeaseRecord): Promise<{ lease: LeaseRecord; created: boolean }> {
    const lease = checked(record);
    try {
      const revision = await this.kv.create(lease.run_id, JSON.stringify(lease));
      this.mirror.apply(lease.run_id, revision, lease);
      return { lease, created: true };
    } catch (error) {
      if (!isWrongRevision(error)) throw new CairnError('E_UNAVAILABLE', `cannot write the lease of ${lease.run_id}: ${String(error)}`);
    }
    const held = await this.get(lease.run_id);
    if (held === null) throw new CairnError('E_CONFLICT', `the lease of ${lease.run_id} changed while it was written`);
    return { lease: held, created: false };
  }

  /**
   * Extends the lease `workerId` holds on `runId` to `until` (epoch ms; never shortens it), with a
   * compare-and-set on the key's revision. Refused with E_CONFLICT when another worker holds it
   * (`details.reason: 'not_holder'`); E_NOT_FOUND when the run has no lease (the scheduler settled
   * it). Whether it has expired is not judged here against `expires_at`, which another machine's
   * clock may have written: the scheduler judges expiry on its own clock from the revisions it
   * sees (ADR 0033), and the holder stops renewing once its own clock says a TTL passed since its
   * last renewal (the runtime's `LeaseKeeper`), so a paused holder never revives a lease.
   */
  async renew(runId: string, workerId: string, until: number, now: number = Date.now()): Promise<LeaseRecord> {
    // The lease as the bucket's watch last delivered it: one write instead of a read and a write.
    // Its revision guards the write; a lease that moved since (or is not as this worker expects)
    // is read from the bucket below, and judged there.
    const mirrored = this.mirror.entry(runId, now);
    if (mirrored !== null && mirrored.value.worker_id === workerId && Number.isFinite(until)) {
      const renewed = extendedTo(mirrored.value, until);
      try {
        const revision = await this.kv.update(runId, JSON.stringify(renewed), mirrored.revision);
        this.mirror.apply(runId, revision, renewed);
        this.renewedFromMirror += 1;
        return renewed;
      } catch (error) {
        if (!isWrongRevision(error)) throw new CairnError('E_UNAVAILABLE', `cannot renew the lease of ${runId}: ${String(error)}`);
      }
    }
    for (let attempt = 1; ; attempt++) {
      const entry = await kvCall(`cannot read the lease of ${runId}`, () => this.kv.get(runId));
      const lease = decodeEntry(entry, LeaseRecordSchema);
      if (entry === null || lease === null) throw new CairnError('E_NOT_FOUND', `run ${runId} holds no lease`, { runId });
      if (lease.worker_id !== workerId) throw refusal(runId, 'not_holder', `the lease of ${runId} is held by another worker`);
      if (!Number.isFinite(until)) throw new CairnError('E_INPUT', 'until is not a time');
      const renewed = extendedTo(lease, until);
      try {
        const revision = await this.kv.update(runId, JSON.stringify(renewed), entry.revision);
        this.mirror.apply(runId, revision, renewed);
        return renewed;
      } catch (error) {
        if (!isWrongRevision(error)) throw new CairnError('E_UNAVAILABLE', `cannot renew the lease of ${runId}: ${String(error)}`);
        if (attempt >= CAS_ATTEMPTS) throw new CairnError('E_CONFLICT', `the lease of ${runId} kept changing: gave up after ${attempt} attempts`);
      }
    }
  }

  /** The run's lease, or null (none, or a value that does not validate). */
  async get(runId: string): Promise<LeaseRecord | null> {
    if (!ChainIdSchema.safeParse(runId).success) return null;
    const entry = await kvCall(`cannot read the lease of ${runId}`, () => this.kv.get(runId));
    const lease = decodeEntry(entry, LeaseRecordSchema);
    return lease === null || entry === null ? lease : this.observed(runId, entry.revision, lease);
  }

  /**
   * Every lease, by run id: from memory while the bucket is followed, else read key by key. What is
   * listed may be a moment behind other writers: read a lease with `get` before acting on it.
   */
  async list(): Promise<LeaseRecord[]> {
    const mirrored = this.mirror.entries();
    if (mirrored !== null) {
      const leases = mirrored.map(({ key, revision, value }) => this.observed(key, revision, value));
      if (this.observeTtlMs !== null) this.sightings.keepOnly(mirrored.map((e) => e.key));
      return leases;
    }
    const leases: LeaseRecord[] = [];
    for (const key of await this.keys()) {
      const lease = await this.get(key);
      if (lease !== null) leases.push(lease);
    }
    if (this.observeTtlMs !== null) this.sightings.keepOnly(leases.map((l) => l.run_id));
    return leases;
  }

  /** The lease as this store's observer judges it (`observeTtlMs`), or as stored. */
  private observed(key: string, revision: number, lease: LeaseRecord): LeaseRecord {
    if (this.observeTtlMs === null) return lease;
    const mono = performance.now();
    return observedLease(lease, this.sightings.see(key, revision, mono), this.observeTtlMs, mono, Date.now());
  }

  /**
   * Removes the run's lease; with `leaseId`, only if it is still that lease (so a cleanup never
   * removes a newer attempt's). True when a lease was removed.
   */
  async delete(runId: string, leaseId?: string): Promise<boolean> {
    const entry = await kvCall(`cannot read the lease of ${runId}`, () => this.kv.get(runId));
    const lease = decodeEntry(entry, LeaseRecordSchema);
    if (entry === null || entry.operation !== 'PUT') return false;
    if (leaseId !== undefined && lease?.lease_id !== leaseId) return false;
    try {
      await this.kv.delete(runId, { previousSeq: entry.revision });
      this.mirror.deleted(runId);
      return true;
    } catch (error) {
      if (isWrongRevision(error)) return false;
      throw new CairnError('E_UNAVAILABLE', `cannot delete the lease of ${runId}: ${String(error)}`);
    }
  }
}

function refusal(runId: string, reason: RenewRefusal, message: string): CairnError {
  return new CairnError('E_CONFLICT', message, { runId, reason });
}

function checked(record: LeaseRecord): LeaseRecord {
  const parsed = LeaseRecordSchema.safeParse(record);
  if (parsed.success) return parsed.data;
  const issues = inputIssues(parsed.error);
  throw new CairnError('E_INPUT', `invalid lease: ${issues.map((i) => `${i.path}: ${i.message}`).join('; ')}`, { issues });
}

/** The lease running until `until` (epoch ms), or as it is if it already runs longer: a renewal never shortens one. */
function extendedTo(lease: LeaseRecord, until: number): LeaseRecord {
  return { ...lease, expires_at: new Date(Math.max(Date.parse(lease.expires_at), until)).toISOString() };
}
