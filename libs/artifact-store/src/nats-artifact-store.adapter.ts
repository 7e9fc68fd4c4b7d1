import { DEFAULT_NATS_REPLICAS, isLeaderless, replicasHint, replicasProblem, whileLeaderless } from '@cairn/config';
import { CairnError, isCairnError, Sha256HexSchema } from '@cairn/contracts';
import { jetstreamManager, JetStreamApiCodes, JetStreamApiError } from '@nats-io/jetstream';
import type { JetStreamManager, StoredMsg } from '@nats-io/jetstream';
import { Objm, StorageType } from '@nats-io/obj';
import type { ObjectInfo, ObjectStore } from '@nats-io/obj';
import type { NatsConnection } from '@nats-io/transport-node';
import { createHash } from 'node:crypto';
import type { ArtifactState, ArtifactStore, VerifiedArtifact } from './artifact-store.adapter.js';
import { DigestCheck } from './digest-check.js';

/** How long a put waits out a leaderless store (a cluster electing after losing a node). */
const PUT_OUTAGE_MS = 30_000;

/** JetStream's answer to a publish past the stream's max_bytes (the object store's stream discards new). */
const MAX_BYTES_EXCEEDED = 10077;
const BUCKET_NAME = /^[A-Za-z0-9_-]{1,64}$/;
/** What the object store library writes as an object's digest: `SHA-256=` and the base64url of the hash. */
const DIGEST_PREFIX = 'SHA-256=';

export interface NatsArtifactStoreOptions {
  /** The object store bucket (its stream is `OBJ_<bucket>`). */
  bucket: string;
  /**
   * Given by the one writer (the runtime), which creates the bucket when it is absent with these;
   * readers leave it out: they never create it, and read a bucket that is not there as empty.
   */
  create?: { replicas?: number; maxBytes: number };
}

/** What a put may come from: its bytes at once, or chunks read as they are uploaded. */
type Source = Uint8Array | AsyncIterable<Uint8Array>;

function corrupt(sha256: string, actual: string): CairnError {
  return new CairnError('E_INTERNAL', `artifact ${sha256} is corrupt: its bytes hash to ${actual}`, { sha256, actual, reason: 'artifact_corrupt' });
}

function checkName(sha256: string): void {
  if (!Sha256HexSchema.safeParse(sha256).success) throw new CairnError('E_INPUT', `not a lower-case hex sha256: ${JSON.stringify(sha256)}`);
}

/** The sha256 (hex) an object's own digest names, or null when it names none. */
export function digestHex(digest: string | undefined): string | null {
  if (digest === undefined || !digest.startsWith(DIGEST_PREFIX)) return null;
  const bytes = Buffer.from(digest.slice(DIGEST_PREFIX.length), 'base64url');
  return bytes.byteLength === 32 ? bytes.toString('hex') : null;
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * The artifact store in a JetStream object store: each artifact is an object named by its sha256
 * (hex), so what a receipt names is where its bytes are, on whichever host reads them. Created by
 * the runtime with CAIRN_NATS_REPLICAS replicas and a size cap (its stream discards new: a full
 * store refuses a put, E_CAPACITY, and never drops an older artifact). Readers open it, never create it.
 *
 * Every read re-hashes the bytes against the name, whatever the object's own digest says; a put of
 * a name already stored is a no-op once the stored object's digest is that name. Reads walk the
 * object's chunk messages one request at a time (`STREAM.MSG.GET`, answered by the stream's leader,
 * so a lagging replica never serves a short object), so memory holds one chunk, however large the
 * object and however slowly it is consumed.
 */
export class NatsArtifactStore implements ArtifactStore {
  private store: ObjectStore | null = null;
  private jsm: Promise<JetStreamManager> | null = null;

  private constructor(
    private readonly nc: NatsConnection,
    private readonly options: NatsArtifactStoreOptions,
  ) {}

  /**
   * The writer's store, its bucket created when absent (an existing one keeps its own max_bytes,
   * but one with other replicas is refused, E_UNAVAILABLE, as the streams are); a reader's, opened
   * on first use. A malformed bucket name is E_INPUT at once.
   */
  static async open(nc: NatsConnection, options: NatsArtifactStoreOptions): Promise<NatsArtifactStore> {
    if (!BUCKET_NAME.test(options.bucket)) throw new CairnError('E_INPUT', `invalid artifact bucket name ${JSON.stringify(options.bucket)}: [A-Za-z0-9_-], at most 64`);
    const artifacts = new NatsArtifactStore(nc, options);
    if (options.create !== undefined) await artifacts.createBucket(options.create);
    return artifacts;
  }

  get bucket(): string {
    return this.options.bucket;
  }

  /** The JetStream stream behind the bucket (tests delete it to clean up). */
  get stream(): string {
    return objectStoreStreamName(this.options.bucket);
  }

  private async createBucket(create: { replicas?: number; maxBytes: number }): Promise<void> {
    const replicas = create.replicas ?? DEFAULT_NATS_REPLICAS;
    const { bucket } = this.options;
    // Opened when it is there: a service whose NATS user may not create streams (ADR 0022) finds it made.
    let store: ObjectStore | null = await this.opened();
    try {
      store ??= await whileLeaderless(() => new Objm(this.nc).create(bucket, { replicas, max_bytes: create.maxBytes, storage: StorageType.File }));
    } catch (error) {
      const hint = replicasHint(error instanceof JetStreamApiError ? error.code : undefined, replicas);
      throw new CairnError('E_UNAVAILABLE', `cannot create the artifact store ${bucket}: ${describe(error)}${hint}`, { bucket });
    }
    const status = await this.call(`cannot read the artifact store ${bucket}`, () => whileLeaderless(() => store.status()));
    const problem = replicasProblem(this.stream, status.replicas, replicas);
    if (problem !== null) throw new CairnError('E_UNAVAILABLE', `artifact store ${bucket}: ${problem}`, { bucket });
    this.store = store;
  }

  /** The bucket, or null while nobody has created it (a reader started before any runtime). */
  private async opened(): Promise<ObjectStore | null> {
    if (this.store !== null) return this.store;
    try {
      this.store = await new Objm(this.nc).open(this.options.bucket);
      return this.store;
    } catch (error) {
      if (error instanceof Error && error.message === 'object store not found') return null;
      throw new CairnError('E_UNAVAILABLE', `cannot open the artifact store ${this.options.bucket}: ${describe(error)}`, { bucket: this.options.bucket });
    }
  }

  private manager(): Promise<JetStreamManager> {
    this.jsm ??= jetstreamManager(this.nc);
    return this.jsm;
  }

  /** Anything but a CairnError becomes E_UNAVAILABLE: a broker problem, retryable. */
  private async call<T>(what: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (error) {
      if (isCairnError(error)) throw error;
      throw new CairnError('E_UNAVAILABLE', `${what}: ${describe(error)}`, { bucket: this.options.bucket });
    }
  }

  /** The stored object named `sha256`, or null (absent, deleted, or no bucket yet). */
  private async infoOf(sha256: string): Promise<ObjectInfo | null> {
    checkName(sha256);
    const store = await this.opened();
    if (store === null) return null;
    const info = await this.call(`cannot read artifact ${sha256}`, () => store.info(sha256));
    return info === null || info.deleted ? null : info;
  }

  async put(bytes: Uint8Array): Promise<string> {
    const sha256 = createHash('sha256').update(bytes).digest('hex');
    await this.putAs(sha256, bytes);
    return sha256;
  }

  /**
   * Stores chunks whose sha256 the caller already knows (a file hashed as it was read), streamed:
   * at most one chunk is held here. Bytes that turn out not to hash to `sha256` are removed again
   * and refused (E_INPUT); nothing is stored under a name it does not hash to.
   */
  async putStream(sha256: string, chunks: AsyncIterable<Uint8Array>): Promise<string> {
    checkName(sha256);
    await this.putAs(sha256, chunks);
    return sha256;
  }

  private async putAs(sha256: string, source: Source): Promise<void> {
    // A cluster electing the store's leader (a node lost) is waited out, as an append to the log is:
    // the run's step must not fail for it. Bytes in hand are put again; a stream cannot be.
    const outageUntil = Date.now() + PUT_OUTAGE_MS;
    const store = this.store;
    if (store === null || this.options.create === undefined) {
      throw new CairnError('E_INTERNAL', `the artifact store ${this.options.bucket} was opened to read: only its writer stores artifacts`);
    }
    for (let attempt = 0; ; attempt++) {
      const existing = await this.call(`cannot read artifact ${sha256}`, () => whileLeaderless(() => store.info(sha256), PUT_OUTAGE_MS));
      // Equal bytes are one artifact: stored already under a digest that is its name, nothing to do.
      if (existing !== null && !existing.deleted && digestHex(existing.digest) === sha256) return;
      try {
        // Conditional on the name's last revision: of two writers of one name, one stores it and the
        // other finds it stored (a stored object whose digest is not its name is replaced).
        const info = await store.put({ name: sha256 }, readable(source), { previousRevision: existing?.revision ?? 0 });
        const stored = digestHex(info.digest);
        if (stored !== sha256) {
          await store.delete(sha256).catch(() => undefined);
          throw new CairnError('E_INPUT', `the bytes put as artifact ${sha256} hash to ${stored ?? info.digest}: not stored`, { sha256, actual: stored });
        }
        return;
      } catch (error) {
        if (isCairnError(error)) throw error;
        if (error instanceof JetStreamApiError && error.code === MAX_BYTES_EXCEEDED) {
          const maxBytes = this.options.create.maxBytes;
          throw new CairnError('E_CAPACITY', `the artifact store ${this.options.bucket} is full (its max_bytes, CAIRN_ARTIFACT_STORE_MAX_BYTES, is ${maxBytes}): artifact ${sha256} was not stored`, {
            reason: 'artifact_store_full',
            bucket: this.options.bucket,
            sha256,
          });
        }
        if (isLeaderless(error) && !isIterable(source) && Date.now() < outageUntil) {
          await new Promise((resolve) => setTimeout(resolve, 200 + Math.random() * 300));
          continue;
        }
        const raced = error instanceof JetStreamApiError && (error.code === JetStreamApiCodes.StreamWrongLastSequence || error.code === JetStreamApiCodes.StreamWrongLastSequenceUnknown);
        if (raced && attempt < 3 && !isIterable(source)) continue;
        if (raced && isIterable(source)) {
          // A stream cannot be read twice: the other writer's object is checked instead.
          const now = await this.call(`cannot read artifact ${sha256}`, () => store.info(sha256));
          if (now !== null && !now.deleted && digestHex(now.digest) === sha256) return;
        }
        throw new CairnError('E_UNAVAILABLE', `cannot store artifact ${sha256} in ${this.options.bucket}: ${describe(error)}`, { bucket: this.options.bucket, sha256 });
      }
    }
  }

  async get(sha256: string): Promise<Uint8Array> {
    const info = await this.infoOf(sha256);
    if (info === null) throw new CairnError('E_NOT_FOUND', `no artifact ${sha256}`, { sha256, reason: 'artifact_missing' });
    const out = new Uint8Array(info.size);
    const hash = createHash('sha256');
    let read = 0;
    for await (const { data } of this.walk(info)) {
      hash.update(data);
      if (read + data.byteLength > out.byteLength) throw corrupt(sha256, 'a longer object');
      out.set(data, read);
      read += data.byteLength;
    }
    const actual = hash.digest('hex');
    if (read !== info.size || actual !== sha256) throw corrupt(sha256, actual);
    return out;
  }

  async has(sha256: string): Promise<boolean> {
    return (await this.infoOf(sha256)) !== null;
  }

  /** Its size as stored, or null when it is not there. */
  async sizeOf(sha256: string): Promise<number | null> {
    return (await this.infoOf(sha256))?.size ?? null;
  }

  async verify(sha256: string): Promise<ArtifactState> {
    try {
      await this.get(sha256);
      return 'ok';
    } catch (error) {
      if (isCairnError(error) && error.code === 'E_NOT_FOUND') return 'missing';
      if (isCairnError(error) && error.code === 'E_INTERNAL') return 'corrupt';
      throw error;
    }
  }

  /**
   * Checks an artifact through once, in bounded memory, before a byte is served: E_NOT_FOUND when
   * absent, E_TOO_LARGE past `maxBytes` (nothing read), E_INTERNAL (`artifact_corrupt`) when its
   * bytes do not hash to its name. `chunks()` then reads the very chunk messages that were checked
   * (by their stream sequence), hashing again, and throws instead of finishing if any changed.
   */
  async openVerified(sha256: string, options: { maxBytes: number }): Promise<VerifiedArtifact> {
    const info = await this.infoOf(sha256);
    if (info === null) throw new CairnError('E_NOT_FOUND', `no artifact ${sha256}`, { sha256, reason: 'artifact_missing' });
    if (info.size > options.maxBytes) {
      throw new CairnError('E_TOO_LARGE', `artifact ${sha256} is ${info.size} bytes, more than the ${options.maxBytes} served at most`, { sha256, bytes: info.size, maxBytes: options.maxBytes });
    }
    const check = new DigestCheck();
    const seqs: number[] = [];
    let size = 0;
    for await (const { seq, data } of this.walk(info)) {
      seqs.push(seq);
      size += data.byteLength;
      check.update(data);
    }
    const { sha256: actual, wellFormed } = check.finish();
    if (size !== info.size || actual !== sha256) throw corrupt(sha256, actual);
    const subject = chunkSubject(this.options.bucket, info.nuid);
    const fetch = (seq: number) => this.message(sha256, { seq });
    return {
      sha256,
      bytes: size,
      utf8: wellFormed,
      close: () => Promise.resolve(),
      async *chunks() {
        const again = createHash('sha256');
        let served = 0;
        for (const seq of seqs) {
          const message = await fetch(seq);
          if (message === null || message.subject !== subject) throw corrupt(sha256, `a chunk gone from seq ${seq}`);
          again.update(message.data);
          served += message.data.byteLength;
          if (served > size) throw corrupt(sha256, 'a longer object');
          yield message.data;
        }
        const digest = again.digest('hex');
        if (served !== size || digest !== sha256) throw corrupt(sha256, digest);
      },
    };
  }

  /** The object's chunk messages in order, one request each; fewer than it records is a corrupt object. */
  private async *walk(info: ObjectInfo): AsyncGenerator<{ seq: number; data: Uint8Array }> {
    const subject = chunkSubject(this.options.bucket, info.nuid);
    let seq = 1;
    for (let n = 0; n < info.chunks; n++) {
      const message = await this.message(info.name, { seq, next_by_subj: subject });
      if (message === null) throw corrupt(info.name, `${n} of its ${info.chunks} chunks`);
      seq = message.seq + 1;
      yield { seq: message.seq, data: message.data };
    }
  }

  /** `next_by_subj` is the server's STREAM.MSG.GET field (the first message on the subject from `seq`), which the client passes on though its type names only `seq`. */
  private async message(sha256: string, query: { seq: number; next_by_subj?: string }): Promise<StoredMsg | null> {
    const jsm = await this.call('cannot reach JetStream', () => this.manager());
    return this.call(`cannot read artifact ${sha256}`, () => jsm.streams.getMessage(this.stream, query));
  }
}

export function objectStoreStreamName(bucket: string): string {
  return `OBJ_${bucket}`;
}

function chunkSubject(bucket: string, nuid: string): string {
  return `$O.${bucket}.C.${nuid}`;
}

function isIterable(source: Source): source is AsyncIterable<Uint8Array> {
  return !(source instanceof Uint8Array);
}

/** A pull stream over the source: the library reads a chunk, publishes it, and only then asks for more. */
function readable(source: Source): ReadableStream<Uint8Array> {
  if (!isIterable(source)) {
    return new ReadableStream({
      pull(controller) {
        if (source.byteLength > 0) controller.enqueue(source);
        controller.close();
      },
    });
  }
  const iterator = source[Symbol.asyncIterator]();
  return new ReadableStream(
    {
      async pull(controller) {
        const next = await iterator.next();
        if (next.done === true) controller.close();
        else controller.enqueue(next.value);
      },
      async cancel() {
        await iterator.return?.();
      },
    },
    { highWaterMark: 0 },
  );
}
