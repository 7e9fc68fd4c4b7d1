import { approvalsBucketFor, DEFAULT_NATS_REPLICAS, drainsBucketFor, isolatedNames, queueBucketFor, replicasHint, replicasProblem, tlogNamesFor, whileLeaderless } from '@cairn/config';
import { CairnError, isCairnError } from '@cairn/contracts';
import { jetstreamManager, JetStreamApiCodes, JetStreamApiError } from '@nats-io/jetstream';
import type { JetStreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import type { KV, KvEntry } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import type { z } from 'zod';

/** Limits of an operational bucket: state that is not evidence may lose history, so it is bounded. */
export interface BucketLimits {
  /** A key not written for this long disappears. */
  ttlMs: number;
  /** Values kept per key. */
  history: number;
  maxBytes: number;
  maxValueBytes: number;
}

const BUCKET_NAME = /^[A-Za-z0-9_-]{1,64}$/;

/**
 * The scheduler's approval deadlines (`<leases bucket>_approvals`): timeouts are at most 7 days (the
 * policy document's bound), a forgotten entry goes a day later. Here, not in the scheduler, so
 * `cairn up --nats-auth` can make the bucket before a scheduler that may not create it starts.
 */
export const APPROVAL_DEADLINES_LIMITS: BucketLimits = { history: 1, ttlMs: 8 * 86_400_000, maxBytes: 64 * 1024 * 1024, maxValueBytes: 4096 };

/**
 * Opens the bucket, creating it with `limits` and `replicas` (CAIRN_NATS_REPLICAS) when it does not
 * exist; an existing one keeps its own limits, but one with other replicas is refused (E_UNAVAILABLE,
 * naming the setting), as the streams are.
 */
export async function openBucket(nc: NatsConnection, name: string, limits: BucketLimits, replicas: number = DEFAULT_NATS_REPLICAS): Promise<KV> {
  if (!BUCKET_NAME.test(name)) throw new CairnError('E_INPUT', `invalid bucket name ${JSON.stringify(name)}: [A-Za-z0-9_-], at most 64`);
  const kv = await kvCall(`cannot open the KV bucket ${name}`, async () => {
    try {
      // A cluster's bucket answers once its stream has a leader (just made, or after losing one).
      return await whileLeaderless(() =>
        new Kvm(nc).create(name, {
          history: limits.history,
          ttl: limits.ttlMs,
          max_bytes: limits.maxBytes,
          maxValueSize: limits.maxValueBytes,
          replicas,
        }),
      );
    } catch (error) {
      const hint = replicasHint(error instanceof JetStreamApiError ? error.code : undefined, replicas);
      throw hint === '' ? error : new CairnError('E_UNAVAILABLE', `cannot create the KV bucket ${name}: ${error instanceof Error ? error.message : String(error)}${hint}`);
    }
  });
  const status = await kvCall(`cannot read the KV bucket ${name}`, () => whileLeaderless(() => kv.status()));
  const problem = replicasProblem(bucketStreamName(name), status.replicas, replicas);
  if (problem !== null) throw new CairnError('E_UNAVAILABLE', `KV bucket ${name}: ${problem}`, { bucket: name });
  return kv;
}

/** The JetStream stream behind a KV bucket (tests delete it to clean up). */
export function bucketStreamName(bucket: string): string {
  return `KV_${bucket}`;
}

/**
 * Every stream an isolated stack (`cairn up` with a stack id) makes — its evidence and command
 * streams, those behind its worker, lease, approval, queue and secret catalog buckets, its artifact object store's
 * (`OBJ_<bucket>`), and its log of seal heads with its checkpoints' bucket: what a teardown deletes.
 */
export function isolatedStackStreams(stackId: string): string[] {
  const names = isolatedNames(stackId);
  const tlog = tlogNamesFor(names.CAIRN_EVIDENCE_STREAM, names.CAIRN_EVIDENCE_SUBJECT_PREFIX);
  return [
    names.CAIRN_EVIDENCE_STREAM,
    names.CAIRN_COMMAND_STREAM,
    bucketStreamName(names.CAIRN_WORKERS_BUCKET),
    bucketStreamName(drainsBucketFor(names.CAIRN_WORKERS_BUCKET)),
    bucketStreamName(names.CAIRN_LEASES_BUCKET),
    bucketStreamName(approvalsBucketFor(names.CAIRN_LEASES_BUCKET)),
    bucketStreamName(queueBucketFor(names.CAIRN_LEASES_BUCKET)),
    `OBJ_${names.CAIRN_ARTIFACT_BUCKET}`,
    bucketStreamName(names.CAIRN_SECRETS_BUCKET),
    tlog.stream,
    bucketStreamName(tlog.checkpointBucket),
  ];
}

/** A compare-and-set write lost to another writer. */
export function isWrongRevision(error: unknown): boolean {
  return (
    error instanceof JetStreamApiError &&
    (error.code === JetStreamApiCodes.StreamWrongLastSequence || error.code === JetStreamApiCodes.StreamWrongLastSequenceUnknown)
  );
}

/** Runs a KV operation; anything but a CairnError becomes E_UNAVAILABLE (a broker problem, retryable). */
export async function kvCall<T>(what: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (error) {
    if (isCairnError(error)) throw error;
    throw new CairnError('E_UNAVAILABLE', `${what}: ${error instanceof Error ? error.message : String(error)}`);
  }
}

/** The entry's value checked against `schema`; null for a deleted key or a value that breaks the schema. */
export function decodeEntry<S extends z.ZodType>(entry: KvEntry | null, schema: S): z.infer<S> | null {
  if (entry === null || entry.operation !== 'PUT') return null;
  let raw: unknown;
  try {
    raw = entry.json<unknown>();
  } catch {
    return null;
  }
  const parsed = schema.safeParse(raw);
  return parsed.success ? parsed.data : null;
}

/**
 * Lists a bucket's keys from its stream's subject index: one request, no consumer. (`kv.keys()`
 * builds an ordered push consumer per call that was seen here to stall under concurrent writes,
 * and the lease scan lists every second — the stalled consumers piled up in the hundreds.) A
 * deleted key may still be listed until its marker ages out; callers read each key and skip those.
 */
export function keyLister(nc: NatsConnection, bucket: string, what: string): () => Promise<string[]> {
  const stream = bucketStreamName(bucket);
  const prefix = `$KV.${bucket}.`;
  let jsm: Promise<JetStreamManager> | null = null;
  return () =>
    kvCall(`cannot list ${what}`, async () => {
      jsm ??= jetstreamManager(nc);
      const info = await (await jsm).streams.info(stream, { subjects_filter: `${prefix}>` });
      return Object.keys(info.state.subjects ?? {})
        .filter((subject) => subject.startsWith(prefix))
        .map((subject) => subject.slice(prefix.length))
        .sort();
    });
}
