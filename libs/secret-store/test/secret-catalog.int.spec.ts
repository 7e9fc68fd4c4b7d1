import { chmod, mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isCairnError } from '@cairn/contracts';
import { generateBoxKey, generateSecretKey } from '@cairn/secrets';
import type { BoxKeyring } from '@cairn/secrets';
import { createTestDatabase, testNatsUrl, uniqueName } from '@cairn/testing';
import type { TestDatabase } from '@cairn/testing';
import { jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import type { KV } from '@nats-io/kv';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBoxKeyFiles, readBoxKeyringFile, readBoxPublicKeyFile, rotateBoxKeyFiles, SecretCatalog, SecretStore, SecretValuesReader } from '../src/index.js';

/*
 * The secret catalog on real NATS (ADR 0028): sealed to a public key, opened only with the private
 * one; every change a compare-and-set, so concurrent writers are all answered and no record is torn;
 * an edited or moved value fails closed; the move out of PostgreSQL; re-sealing after a rotation.
 */

let nc: NatsConnection;
let bucket: string;
let raw: KV;
let dir: string;
const key = generateBoxKey();
const keyring: BoxKeyring = { current: key, keys: [key] };
let writer: SecretCatalog;
let reader: SecretCatalog;

const enc = (text: string) => new Uint8Array(Buffer.from(text, 'utf8'));
const freshValue = () => `v-${randomBytes(18).toString('base64url')}`;
const text = (bytes: Uint8Array) => Buffer.from(bytes).toString('utf8');

async function codeOf(promise: Promise<unknown>): Promise<{ code: string; reason?: unknown; message: string }> {
  try {
    await promise;
    return { code: 'resolved', message: '' };
  } catch (error) {
    if (isCairnError(error)) return { code: error.code, reason: error.details?.reason, message: error.message };
    return { code: `not a CairnError: ${String(error)}`, message: '' };
  }
}

async function rawRecord(k: string): Promise<Record<string, unknown>> {
  return (await raw.get(k))!.json<Record<string, unknown>>();
}

beforeAll(async () => {
  nc = await connect({ servers: testNatsUrl() });
  bucket = uniqueName('secret_catalog');
  writer = await SecretCatalog.open(nc, { bucket, publicKey: key.publicKey });
  reader = await SecretCatalog.open(nc, { bucket });
  raw = await new Kvm(nc).open(bucket);
  dir = await mkdtemp(join(tmpdir(), 'cairn-secret-catalog-'));
});

afterAll(async () => {
  if (nc !== undefined) {
    const jsm = await jetstreamManager(nc);
    await jsm.streams.delete(`KV_${bucket}`).catch(() => false);
    await nc.close();
  }
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
});

describe('SecretCatalog on NATS', () => {
  it('given a value put by the writer, when a reader reads it with the private key, then the same bytes come; the bucket holds only the sealed form', async () => {
    const value = freshValue();
    const put = await writer.put('acme', 'API_TOKEN', enc(value), { setBy: 'key:k1' });
    expect(put).toMatchObject({ name: 'API_TOKEN', created: true, lastFour: value.slice(-4) });
    const [read] = await reader.read(keyring, 'acme', ['API_TOKEN']);
    expect(text(read!.value)).toBe(value);
    const stored = JSON.stringify(await rawRecord('acme.API_TOKEN'));
    expect(stored).not.toContain(value);
    expect(stored).not.toContain(Buffer.from(value).toString('base64'));
    expect(await reader.access('acme', ['API_TOKEN', 'ABSENT'])).toEqual([{ name: 'API_TOKEN', grantees: ['key:k1'] }]);
    expect((await reader.list('acme')).map((s) => [s.name, s.lastFour, s.keyId, s.setBy])).toEqual([['API_TOKEN', value.slice(-4), key.id, 'key:k1']]);
  });

  it('given a catalog opened without the public key (policy, the workers), when it is asked to seal, then E_INTERNAL and nothing is written', async () => {
    expect((await codeOf(reader.put('acme', 'READER_PUT', enc(freshValue())))).code).toBe('E_INTERNAL');
    expect(await raw.get('acme.READER_PUT')).toBeNull();
  });

  it('given eight PUTs of one name at once, when they settle, then all are answered, exactly one created it, and the record opens to one of the values', async () => {
    const values = Array.from({ length: 8 }, freshValue);
    const outcomes = await Promise.all(values.map((v, i) => writer.put('acme', 'RACED', enc(v), { setBy: `key:r${i}` })));
    expect(outcomes.filter((o) => o.created)).toHaveLength(1);
    const [read] = await reader.read(keyring, 'acme', ['RACED']);
    expect(values).toContain(text(read!.value));
    // Every setter's grant survived every other write: none was lost to a race.
    expect((await reader.access('acme', ['RACED']))[0]!.grantees).toEqual(values.map((_, i) => `key:r${i}`).sort());
  });

  it('given grants and revokes at the same time as sets, when they settle, then each grant is kept and each revoke applied', async () => {
    await writer.put('acme', 'GRANTED', enc(freshValue()), { setBy: 'key:owner' });
    await writer.grant('acme', 'GRANTED', ['key:gone'], 'key:owner');
    await Promise.all([
      ...Array.from({ length: 4 }, () => writer.put('acme', 'GRANTED', enc(freshValue()), { setBy: 'key:owner' })),
      ...Array.from({ length: 4 }, (_, i) => writer.grant('acme', 'GRANTED', [`key:g${i}`], 'key:owner')),
      writer.revoke('acme', 'GRANTED', 'key:gone'),
    ]);
    expect((await reader.access('acme', ['GRANTED']))[0]!.grantees).toEqual(['key:g0', 'key:g1', 'key:g2', 'key:g3', 'key:owner']);
  });

  it('given a guard that refuses on the stored record, when a change is attempted, then it throws and nothing is written', async () => {
    await writer.put('acme', 'GUARDED', enc(freshValue()), { setBy: 'key:owner' });
    const before = (await raw.get('acme.GUARDED'))!.revision;
    const refuse = () => {
      throw new Error('not yours');
    };
    await expect(writer.put('acme', 'GUARDED', enc(freshValue()), { setBy: 'key:other', guard: refuse })).rejects.toThrow('not yours');
    await expect(writer.delete('acme', 'GUARDED', refuse)).rejects.toThrow('not yours');
    expect((await raw.get('acme.GUARDED'))!.revision).toBe(before);
  });

  it('given one byte of a sealed value edited in the bucket, when a run reads it, then E_INTERNAL (tampered) naming the secret, never the bytes', async () => {
    await writer.put('acme', 'TAMPERED', enc(freshValue()));
    const record = await rawRecord('acme.TAMPERED');
    const sealed = Buffer.from(String(record.sealed), 'base64');
    sealed[sealed.length - 1] = sealed[sealed.length - 1]! ^ 0x01;
    await raw.put('acme.TAMPERED', JSON.stringify({ ...record, sealed: sealed.toString('base64') }));
    const failed = await codeOf(reader.read(keyring, 'acme', ['TAMPERED']));
    expect(failed).toMatchObject({ code: 'E_INTERNAL', reason: 'tampered' });
    expect(failed.message).toContain('TAMPERED');
  });

  it('given a sealed value copied onto another name or tenant (an AAD swap), when read there, then it is refused as tampered', async () => {
    await writer.put('acme', 'SOURCE', enc(freshValue()));
    await writer.put('acme', 'TARGET', enc(freshValue()));
    await writer.put('globex', 'SOURCE', enc(freshValue()));
    const source = await rawRecord('acme.SOURCE');
    await raw.put('acme.TARGET', JSON.stringify({ ...(await rawRecord('acme.TARGET')), sealed: source.sealed }));
    await raw.put('globex.SOURCE', JSON.stringify({ ...(await rawRecord('globex.SOURCE')), sealed: source.sealed }));
    expect(await codeOf(reader.read(keyring, 'acme', ['TARGET']))).toMatchObject({ code: 'E_INTERNAL', reason: 'tampered' });
    expect(await codeOf(reader.read(keyring, 'globex', ['SOURCE']))).toMatchObject({ code: 'E_INTERNAL', reason: 'tampered' });
    // A whole record moved under another key names its own secret: refused before any opening.
    await raw.put('globex.MOVED', JSON.stringify(source));
    expect(await codeOf(reader.read(keyring, 'globex', ['MOVED']))).toMatchObject({ code: 'E_INTERNAL', reason: 'tampered' });
    expect(await reader.access('globex', ['MOVED'])).toEqual([]);
    // Listed (so an admin sees it), never with a last four; removable.
    expect((await reader.list('globex')).find((s) => s.name === 'MOVED')?.lastFour).toBeNull();
    expect(await writer.delete('globex', 'MOVED')).toBe(true);
  });

  it('given a value sealed to a key the reader lacks, or a name the tenant lacks, then E_INTERNAL unknown_key and E_NOT_FOUND naming them', async () => {
    const other = await SecretCatalog.open(nc, { bucket, publicKey: generateBoxKey().publicKey });
    await other.put('acme', 'FOREIGN', enc(freshValue()));
    expect(await codeOf(reader.read(keyring, 'acme', ['FOREIGN']))).toMatchObject({ code: 'E_INTERNAL', reason: 'unknown_key' });
    const missing = await codeOf(reader.read(keyring, 'acme', ['API_TOKEN', 'NOWHERE']));
    expect(missing.code).toBe('E_NOT_FOUND');
    expect(missing.message).toContain('NOWHERE');
  });

  it('given a reader without a private key file, when a run needs secrets, then E_RUNTIME_ABSENT; with one others may read, it refuses to start', async () => {
    const without = await SecretValuesReader.fromKeyFile(undefined, { bucket, nc: () => nc });
    expect((await codeOf(without.read('acme', ['API_TOKEN']))).code).toBe('E_RUNTIME_ABSENT');
    const files = await ensureBoxKeyFiles(join(dir, 'loose.key'), join(dir, 'loose.pub'));
    expect(files.created).toBe(true);
    await chmod(join(dir, 'loose.key'), 0o644);
    expect((await codeOf(SecretValuesReader.fromKeyFile(join(dir, 'loose.key'), { bucket, nc: () => nc }))).message).toContain('mode 0644');
  });
});

describe('key files and rotation', () => {
  it('given cairn up, when the keypair is made, then the private file is 0600, the public one names the same key and holds no private key', async () => {
    const made = await ensureBoxKeyFiles(join(dir, 'box.key'), join(dir, 'box.pub'));
    expect(made.created).toBe(true);
    expect((await stat(join(dir, 'box.key'))).mode & 0o777).toBe(0o600);
    expect((await readBoxPublicKeyFile(join(dir, 'box.pub'))).current.id).toBe(made.keyId);
    expect(await readFile(join(dir, 'box.pub'), 'utf8')).not.toContain('private');
    const again = await ensureBoxKeyFiles(join(dir, 'box.key'), join(dir, 'box.pub'));
    expect(again).toEqual({ created: false, keyId: made.keyId });
  });

  it('given a rotation, when the catalog is re-sealed where the private keys are, then every value opens under the new key alone', async () => {
    const privatePath = join(dir, 'rot.key');
    const publicPath = join(dir, 'rot.pub');
    await ensureBoxKeyFiles(privatePath, publicPath);
    const rotBucket = uniqueName('secret_rotate');
    const before = await SecretCatalog.open(nc, { bucket: rotBucket, publicKey: (await readBoxPublicKeyFile(publicPath)).current });
    try {
      const values = [freshValue(), freshValue()];
      await before.put('acme', 'ONE', enc(values[0]!));
      await before.put('globex', 'TWO', enc(values[1]!));
      const rotated = await rotateBoxKeyFiles(privatePath, publicPath);
      expect(rotated.keys).toBe(2);
      const ring = await readBoxKeyringFile(privatePath);
      expect(ring.current.id).toBe(rotated.current);
      expect((await readBoxPublicKeyFile(publicPath)).current.id).toBe(rotated.current);
      const outcome = await before.reseal(ring);
      expect(outcome).toEqual({ resealed: 2, unreadable: [] });
      expect(await before.reseal(ring)).toEqual({ resealed: 0, unreadable: [] });
      const newOnly: BoxKeyring = { current: ring.current, keys: [ring.current] };
      expect((await before.read(newOnly, 'acme', ['ONE'])).map((s) => text(s.value))).toEqual([values[0]]);
      expect((await before.read(newOnly, 'globex', ['TWO'])).map((s) => text(s.value))).toEqual([values[1]]);
      expect((await before.list('acme'))[0]!.keyId).toBe(rotated.current);
    } finally {
      await (await jetstreamManager(nc)).streams.delete(`KV_${rotBucket}`).catch(() => false);
    }
  });

  it('given a worker started before a rotation, when a value re-sealed to the new key is read, then it reads its key file again and opens it', async () => {
    const privatePath = join(dir, 'live.key');
    const publicPath = join(dir, 'live.pub');
    await ensureBoxKeyFiles(privatePath, publicPath);
    const liveBucket = uniqueName('secret_live');
    const gateway = await SecretCatalog.open(nc, { bucket: liveBucket, publicKey: (await readBoxPublicKeyFile(publicPath)).current });
    try {
      const value = freshValue();
      await gateway.put('acme', 'LIVE', enc(value));
      const worker = await SecretValuesReader.fromKeyFile(privatePath, { bucket: liveBucket, nc: () => nc });
      expect((await worker.read('acme', ['LIVE'])).map((s) => text(s.value))).toEqual([value]);
      await rotateBoxKeyFiles(privatePath, publicPath);
      expect(await gateway.reseal(await readBoxKeyringFile(privatePath))).toEqual({ resealed: 1, unreadable: [] });
      expect((await worker.read('acme', ['LIVE'])).map((s) => text(s.value))).toEqual([value]);
      // A key file made loose meanwhile is refused as at boot, not used.
      await rotateBoxKeyFiles(privatePath, publicPath);
      await gateway.reseal(await readBoxKeyringFile(privatePath));
      await chmod(privatePath, 0o644);
      expect((await codeOf(worker.read('acme', ['LIVE']))).message).toContain('mode 0644');
    } finally {
      await (await jetstreamManager(nc)).streams.delete(`KV_${liveBucket}`).catch(() => false);
    }
  });
});

describe('the move out of PostgreSQL', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase('cairn_secret_move');
  });
  afterAll(async () => {
    await db?.drop();
  });

  it('given values sealed with the old AES key in PostgreSQL, when moved, then each lands in the catalog sealed to the public key with its grants, rows go, and one already in the catalog wins', async () => {
    const aes = generateSecretKey();
    const legacy = await SecretStore.open({ url: db.url, keyring: { primary: aes, keys: [aes] } });
    const moveBucket = uniqueName('secret_move');
    const catalog = await SecretCatalog.open(nc, { bucket: moveBucket, publicKey: key.publicKey });
    try {
      const old = { a: freshValue(), b: freshValue(), kept: freshValue() };
      await legacy.put('acme', 'OLD_A', enc(old.a), { setBy: 'key:k1', grants: ['scope:runs:write'] });
      await legacy.put('globex', 'OLD_B', enc(old.b));
      await legacy.put('acme', 'ALREADY', enc(freshValue()));
      await catalog.put('acme', 'ALREADY', enc(old.kept), { setBy: 'key:new' });
      // A row no key opens (sealed under another AES key) stays, named.
      const stray = generateSecretKey();
      const other = await SecretStore.open({ url: db.url, keyring: { primary: stray, keys: [stray] } });
      await other.put('acme', 'STRAY', enc(freshValue()));
      await other.close();

      const outcome = await legacy.drainTo((secret) => catalog.importIfAbsent(secret));
      expect(outcome).toEqual({ moved: 2, skipped: 1, unreadable: ['acme/STRAY'] });
      expect((await catalog.read(keyring, 'acme', ['OLD_A', 'ALREADY'])).map((s) => text(s.value))).toEqual([old.a, old.kept]);
      expect((await catalog.read(keyring, 'globex', ['OLD_B'])).map((s) => text(s.value))).toEqual([old.b]);
      expect((await catalog.list('acme')).find((s) => s.name === 'OLD_A')).toMatchObject({ setBy: 'key:k1', keyId: key.id, lastFour: old.a.slice(-4) });
      expect((await catalog.access('acme', ['OLD_A']))[0]!.grantees).toEqual(['key:k1', 'scope:runs:write']);
      const client = new pg.Client({ connectionString: db.url });
      await client.connect();
      try {
        expect((await client.query<{ name: string }>('SELECT name FROM secrets ORDER BY name')).rows.map((r) => r.name)).toEqual(['STRAY']);
        expect((await client.query('SELECT * FROM secret_grants')).rows).toEqual([]);
      } finally {
        await client.end();
      }
      // Run again: nothing more to move.
      expect(await legacy.drainTo((secret) => catalog.importIfAbsent(secret))).toEqual({ moved: 0, skipped: 0, unreadable: ['acme/STRAY'] });
    } finally {
      await legacy.close();
      await (await jetstreamManager(nc)).streams.delete(`KV_${moveBucket}`).catch(() => false);
    }
  });
});

