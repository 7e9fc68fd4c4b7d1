import { isCairnError } from '@cairn/contracts';
import { testNatsUrl, uniqueName } from '@cairn/testing';
import { jetstreamManager } from '@nats-io/jetstream';
import type { JetStreamManager } from '@nats-io/jetstream';
import { Objm } from '@nats-io/obj';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { createCipheriv, createHash, randomBytes } from 'node:crypto';
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IMPORT_MARKER, importArtifactDir } from './artifact-import.js';
import { FsArtifactStore } from './artifact-store.adapter.js';
import { digestHex, NatsArtifactStore, objectStoreStreamName } from './nats-artifact-store.adapter.js';

const MIB = 1024 * 1024;
let nc: NatsConnection;
let jsm: JetStreamManager;
const buckets: string[] = [];

/** A writer's store of the test's own (deleted in afterAll). */
async function writer(label: string, maxBytes = 64 * MIB): Promise<NatsArtifactStore> {
  const bucket = uniqueName(`art_${label}`);
  buckets.push(bucket);
  return NatsArtifactStore.open(nc, { bucket, create: { maxBytes } });
}

beforeAll(async () => {
  nc = await connect({ servers: testNatsUrl() });
  jsm = await jetstreamManager(nc);
});

afterAll(async () => {
  for (const bucket of buckets) await jsm.streams.delete(objectStoreStreamName(bucket)).catch(() => false);
  await nc.close();
});

const sha = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');

async function codeOf(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
    return 'resolved';
  } catch (error) {
    return isCairnError(error) ? error.code : String(error);
  }
}

async function served(store: NatsArtifactStore, id: string, maxBytes = 1 << 30): Promise<{ bytes: Buffer; utf8: boolean; size: number }> {
  const artifact = await store.openVerified(id, { maxBytes });
  const parts: Uint8Array[] = [];
  for await (const chunk of artifact.chunks()) parts.push(chunk);
  await artifact.close();
  return { bytes: Buffer.concat(parts), utf8: artifact.utf8, size: artifact.bytes };
}

async function lastSeq(store: NatsArtifactStore): Promise<number> {
  return (await jsm.streams.info(store.stream)).state.last_seq;
}

describe('NatsArtifactStore', () => {
  it('stores bytes as an object named by their sha256, replicated and capped as configured, and gives them back', async () => {
    const store = await writer('roundtrip');
    const bytes = randomBytes(300_000);
    const id = await store.put(bytes);
    expect(id).toBe(sha(bytes));
    const info = await (await new Objm(nc).open(store.bucket)).info(id);
    expect(info).toMatchObject({ name: id, size: bytes.length });
    expect(digestHex(info?.digest)).toBe(id);
    const config = (await jsm.streams.info(store.stream)).config;
    expect(config).toMatchObject({ num_replicas: 1, max_bytes: 64 * MIB, discard: 'new' });
    expect(await store.has(id)).toBe(true);
    expect(await store.sizeOf(id)).toBe(bytes.length);
    expect(Buffer.from(await store.get(id)).equals(bytes)).toBe(true);
    expect(await store.verify(id)).toBe('ok');
    const out = await served(store, id);
    expect(out.bytes.equals(bytes)).toBe(true);
    expect(out).toMatchObject({ size: bytes.length, utf8: false });
    expect((await served(store, await store.put(new TextEncoder().encode('héllo wörld 😀\n'.repeat(20_000))))).utf8).toBe(true);
    const empty = await store.put(new Uint8Array());
    expect((await store.get(empty)).byteLength).toBe(0);
    expect((await served(store, empty)).bytes.length).toBe(0);
  });

  it('stores equal bytes once: a second put, and puts at the same time, write nothing more', async () => {
    const store = await writer('idempotent');
    const bytes = randomBytes(200_000);
    const id = await store.put(bytes);
    const after = await lastSeq(store);
    expect(await store.put(bytes)).toBe(id);
    expect(await lastSeq(store)).toBe(after);
    const together = randomBytes(50_000);
    const ids = await Promise.all(Array.from({ length: 6 }, () => store.put(together)));
    expect(new Set(ids)).toEqual(new Set([sha(together)]));
    expect(Buffer.from(await store.get(sha(together))).equals(together)).toBe(true);
    const objects = (await (await new Objm(nc).open(store.bucket)).list()).filter((o) => o.name === sha(together));
    expect(objects).toHaveLength(1);
  });

  it('never returns bytes that do not hash to their name: an object put under another name through the raw API', async () => {
    const store = await writer('misnamed');
    const claimed = sha(new TextEncoder().encode('what the receipt recorded'));
    const raw = await new Objm(nc).open(store.bucket);
    await raw.putBlob({ name: claimed }, new TextEncoder().encode('something else entirely'));
    expect(await store.verify(claimed)).toBe('corrupt');
    await expect(store.get(claimed)).rejects.toMatchObject({ code: 'E_INTERNAL', details: { reason: 'artifact_corrupt', sha256: claimed } });
    await expect(store.openVerified(claimed, { maxBytes: 1024 })).rejects.toMatchObject({ code: 'E_INTERNAL', details: { reason: 'artifact_corrupt' } });
    // A put of the right bytes replaces the misnamed object: the name then holds what it names.
    expect(await store.put(new TextEncoder().encode('what the receipt recorded'))).toBe(claimed);
    expect(new TextDecoder().decode(await store.get(claimed))).toBe('what the receipt recorded');
  });

  it('re-hashes every read: a chunk replaced under an object whose own digest still looks right is refused', async () => {
    const store = await writer('rotten');
    const original = randomBytes(400_000);
    const id = await store.put(original);
    const info = await (await new Objm(nc).open(store.bucket)).info(id);
    const subject = `$O.${store.bucket}.C.${info!.nuid}`;
    // The same chunks, one byte changed in the last: the object's metadata is untouched.
    const chunks: Uint8Array[] = [];
    let seq = 1;
    for (;;) {
      const query: { seq: number; next_by_subj: string } = { seq, next_by_subj: subject };
      const m = await jsm.streams.getMessage(store.stream, query);
      if (m === null) break;
      chunks.push(new Uint8Array(m.data));
      seq = m.seq + 1;
    }
    expect(chunks.length).toBeGreaterThan(1);
    const last = chunks.at(-1)!;
    last.set([last[0]! ^ 0xff]);
    await jsm.streams.purge(store.stream, { filter: subject });
    for (const chunk of chunks) await nc.request(subject, chunk);
    expect(await store.sizeOf(id)).toBe(original.length);
    expect(await store.verify(id)).toBe('corrupt');
    await expect(store.openVerified(id, { maxBytes: MIB })).rejects.toMatchObject({ code: 'E_INTERNAL', details: { reason: 'artifact_corrupt', sha256: id } });
  });

  it('stops serving, with an error, an object whose chunks went between the check and the serving', async () => {
    const store = await writer('swapped');
    const id = await store.put(randomBytes(500_000));
    const artifact = await store.openVerified(id, { maxBytes: MIB });
    const info = await (await new Objm(nc).open(store.bucket)).info(id);
    await jsm.streams.purge(store.stream, { filter: `$O.${store.bucket}.C.${info!.nuid}` });
    const read = async () => {
      for await (const _chunk of artifact.chunks()) {
        // drained
      }
    };
    await expect(read()).rejects.toMatchObject({ code: 'E_INTERNAL', details: { reason: 'artifact_corrupt' } });
    expect(await store.verify(id)).toBe('corrupt');
  });

  it('tells missing from corrupt, refuses bad names and oversized serving, and a reader neither creates nor writes', async () => {
    const store = await writer('missing');
    const absent = sha(randomBytes(16));
    expect(await store.has(absent)).toBe(false);
    expect(await store.sizeOf(absent)).toBeNull();
    expect(await store.verify(absent)).toBe('missing');
    await expect(store.get(absent)).rejects.toMatchObject({ code: 'E_NOT_FOUND', details: { reason: 'artifact_missing' } });
    await expect(store.openVerified(absent, { maxBytes: 10 })).rejects.toMatchObject({ code: 'E_NOT_FOUND', details: { reason: 'artifact_missing' } });
    const id = await store.put(new TextEncoder().encode('eleven bytes'));
    expect(await codeOf(store.openVerified(id, { maxBytes: 5 }))).toBe('E_TOO_LARGE');
    for (const bad of ['../../etc/passwd', 'ABC', 'a'.repeat(63), 'A'.repeat(64), `${'a'.repeat(62)}/x`, '*', '>']) {
      expect(await codeOf(store.get(bad))).toBe('E_INPUT');
      expect(await codeOf(store.has(bad))).toBe('E_INPUT');
    }
    expect(await codeOf(NatsArtifactStore.open(nc, { bucket: 'a.b', create: { maxBytes: MIB } }))).toBe('E_INPUT');

    const nowhere = uniqueName('art_nowhere');
    const reader = await NatsArtifactStore.open(nc, { bucket: nowhere });
    expect(await reader.sizeOf(id)).toBeNull();
    expect(await reader.verify(id)).toBe('missing');
    expect(await jsm.streams.info(objectStoreStreamName(nowhere)).catch(() => null)).toBeNull();
    const sameBucket = await NatsArtifactStore.open(nc, { bucket: store.bucket });
    expect(new TextDecoder().decode(await sameBucket.get(id))).toBe('eleven bytes');
    expect(await codeOf(sameBucket.put(new Uint8Array([1])))).toBe('E_INTERNAL');
  });

  it('refuses an existing bucket with other replicas than asked, naming the setting', async () => {
    const store = await writer('replicas');
    await expect(NatsArtifactStore.open(nc, { bucket: store.bucket, create: { replicas: 3, maxBytes: MIB } })).rejects.toMatchObject({
      code: 'E_UNAVAILABLE',
      message: expect.stringMatching(/num_replicas is 1, not the 3 CAIRN_NATS_REPLICAS asks for/) as unknown,
    });
  });

  it('refuses a put into a full store with E_CAPACITY, keeping what it holds and nothing of the refused bytes', async () => {
    const store = await writer('full', 512 * 1024);
    const first = randomBytes(300_000);
    const id = await store.put(first);
    const before = (await jsm.streams.info(store.stream)).state;
    const refused = randomBytes(300_000);
    await expect(store.put(refused)).rejects.toMatchObject({ code: 'E_CAPACITY', details: { reason: 'artifact_store_full', bucket: store.bucket, sha256: sha(refused) } });
    expect(await store.has(sha(refused))).toBe(false);
    expect((await jsm.streams.info(store.stream)).state.bytes).toBe(before.bytes);
    expect(Buffer.from(await store.get(id)).equals(first)).toBe(true);
    // What still fits is still stored; a put of what is there already needs no room.
    expect(await store.put(first)).toBe(id);
    expect(await store.has(await store.put(new Uint8Array()))).toBe(true);
  });

  it('streams a 100 MiB object in and out without holding it', async () => {
    const size = 100 * MIB;
    const store = await writer('large', 160 * MIB);
    // Pseudo-random bytes made twice the same way: hashed first, then uploaded.
    const key = randomBytes(16);
    const iv = randomBytes(16);
    function* blocks(): Generator<Uint8Array> {
      const cipher = createCipheriv('aes-128-ctr', key, iv);
      const zeros = new Uint8Array(MIB);
      for (let i = 0; i < size / MIB; i++) yield cipher.update(zeros);
    }
    const chunks = () => Readable.from(blocks()) as AsyncIterable<Uint8Array>;
    const hash = createHash('sha256');
    for await (const chunk of chunks()) hash.update(chunk);
    const id = hash.digest('hex');

    const memory = () => process.memoryUsage().heapUsed + process.memoryUsage().arrayBuffers;
    const baseline = memory();
    let peak = 0;
    const sampled = async function* (): AsyncGenerator<Uint8Array> {
      for await (const chunk of chunks()) {
        peak = Math.max(peak, memory() - baseline);
        yield chunk;
      }
    };
    const startedUp = performance.now();
    expect(await store.putStream(id, sampled())).toBe(id);
    const uploadMs = performance.now() - startedUp;
    expect(await store.sizeOf(id)).toBe(size);

    const startedDown = performance.now();
    const artifact = await store.openVerified(id, { maxBytes: size });
    const again = createHash('sha256');
    let read = 0;
    for await (const chunk of artifact.chunks()) {
      again.update(chunk);
      read += chunk.byteLength;
      peak = Math.max(peak, memory() - baseline);
    }
    const downloadMs = performance.now() - startedDown;
    expect(read).toBe(size);
    expect(again.digest('hex')).toBe(id);
    console.log(`100 MiB object: upload ${Math.round(uploadMs)} ms, check + serve ${Math.round(downloadMs)} ms, peak heap+buffers above baseline ${(peak / MIB).toFixed(1)} MiB`);
    // Holding the object would take 100 MiB; what is measured here includes garbage not yet collected.
    expect(peak).toBeLessThan(64 * MIB);
    // Bytes that do not hash to the name given are not kept under it.
    const wrong = sha(randomBytes(8));
    await expect(store.putStream(wrong, Readable.from([new Uint8Array(10)]) as AsyncIterable<Uint8Array>)).rejects.toMatchObject({ code: 'E_INPUT' });
    expect(await store.has(wrong)).toBe(false);
  }, 240_000);
});

describe('importArtifactDir', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'cairn-art-import-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('uploads an old artifact directory once, each file checked, a corrupt one left behind and named', async () => {
    const old = new FsArtifactStore(dir);
    const kept = [randomBytes(1000), randomBytes(200_000), new Uint8Array()];
    const ids = await Promise.all(kept.map((bytes) => old.put(bytes)));
    const rotten = await old.put(new TextEncoder().encode('the original'));
    await chmod(old.pathOf(rotten), 0o644);
    await writeFile(old.pathOf(rotten), 'tampered');
    await writeFile(join(dir, 'sha256', ids[0]!.slice(0, 2), 'not-a-hash'), 'stray');
    const store = await writer('import');
    await store.put(kept[2]!);

    const result = await importArtifactDir(dir, store);
    expect(result).toEqual({ imported: 2, present: 1, corrupt: [rotten], skipped: 1 });
    for (const [i, id] of ids.entries()) expect(Buffer.from(await store.get(id)).equals(Buffer.from(kept[i]!))).toBe(true);
    expect(await store.has(rotten)).toBe(false);
    expect(JSON.parse(await readFile(join(dir, IMPORT_MARKER), 'utf8'))).toMatchObject({ bucket: store.bucket, imported: 2 });
    expect(await importArtifactDir(dir, store)).toBeNull();
    expect(await importArtifactDir(join(dir, 'nothing-here'), store)).toBeNull();
  });
});
