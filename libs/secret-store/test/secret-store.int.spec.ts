import 'reflect-metadata';
import { randomBytes } from 'node:crypto';
import { chmod, mkdtemp, readFile, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isCairnError } from '@cairn/contracts';
import { checkSchemaMatchesEntities } from '@cairn/persistence';
import { formatSecretKeyring, generateSecretKey } from '@cairn/secrets';
import type { SecretKeyring } from '@cairn/secrets';
import { createTestDatabase } from '@cairn/testing';
import type { TestDatabase } from '@cairn/testing';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureSecretKeyFile, readSecretKeyFile, SecretStore } from '../src/index.js';
import { createSecretStoreDataSource } from '../src/secret-store-data-source.js';

let db: TestDatabase;
let dir: string;
let keyring: SecretKeyring;
let store: SecretStore;

const enc = (text: string) => new Uint8Array(Buffer.from(text, 'utf8'));
/** A value of the test's own, so a search for it cannot be fooled by another test's. */
const freshValue = () => `v-${randomBytes(18).toString('base64url')}`;

async function codeOf(promise: Promise<unknown>): Promise<{ code: string; reason?: unknown; message: string }> {
  try {
    await promise;
    return { code: 'resolved', message: '' };
  } catch (error) {
    if (isCairnError(error)) return { code: error.code, reason: error.details?.reason, message: error.message };
    return { code: `not a CairnError: ${String(error)}`, message: '' };
  }
}

async function sql<T extends pg.QueryResultRow>(text: string, values: unknown[] = []): Promise<T[]> {
  const client = new pg.Client({ connectionString: db.url });
  await client.connect();
  try {
    return (await client.query<T>(text, values)).rows;
  } finally {
    await client.end();
  }
}

beforeAll(async () => {
  db = await createTestDatabase('cairn_secret_store');
  dir = await mkdtemp(join(tmpdir(), 'cairn-secret-store-'));
  keyring = { primary: generateSecretKey(), keys: [] };
  keyring = { primary: keyring.primary, keys: [keyring.primary] };
  store = await SecretStore.open({ url: db.url, keyring });
});

afterAll(async () => {
  await store?.close();
  await db?.drop();
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
});

describe('SecretStore on PostgreSQL', () => {
  it('given a value put, when read back for the tenant, then the same bytes come; the table holds only its sealed form', async () => {
    const value = freshValue();
    const put = await store.put('acme', 'API_TOKEN', enc(value));
    expect(put).toMatchObject({ name: 'API_TOKEN', created: true, lastFour: value.slice(-4) });
    const [read] = await store.read('acme', ['API_TOKEN']);
    expect(read?.name).toBe('API_TOKEN');
    expect(Buffer.from(read!.value).toString('utf8')).toBe(value);

    const rows = await sql<{ dump: string }>(`SELECT string_agg(t::text, E'\\n') AS dump FROM secrets t`);
    const dump = rows[0]!.dump;
    expect(dump).toContain('API_TOKEN');
    expect(dump).not.toContain(value);
    expect(dump).not.toContain(Buffer.from(value).toString('hex'));
  });

  it('given a value replaced, when listed, then only names and last four characters show, per tenant', async () => {
    await store.put('acme', 'DB_PASSWORD', enc(freshValue()));
    const second = freshValue();
    const replaced = await store.put('acme', 'DB_PASSWORD', enc(second));
    expect(replaced.created).toBe(false);
    await store.put('other', 'ONLY_OTHER', enc(freshValue()));

    const listed = await store.list('acme');
    expect(listed.map((s) => s.name)).toEqual(['API_TOKEN', 'DB_PASSWORD']);
    expect(listed.find((s) => s.name === 'DB_PASSWORD')).toMatchObject({ lastFour: second.slice(-4), keyId: keyring.primary.id });
    expect(JSON.stringify(listed)).not.toContain(second);
    expect(await store.names('acme')).toEqual(['API_TOKEN', 'DB_PASSWORD']);
    expect(await store.names('other')).toEqual(['ONLY_OTHER']);
    expect(await store.names('nobody')).toEqual([]);
  });

  it('given a name the tenant lacks (another tenant has it), when read, then E_NOT_FOUND names it', async () => {
    const failure = await codeOf(store.read('acme', ['API_TOKEN', 'ONLY_OTHER']));
    expect(failure.code).toBe('E_NOT_FOUND');
    expect(failure.message).toContain('ONLY_OTHER');
  });

  it('given a deleted secret, when deleted again or read, then it is gone', async () => {
    await store.put('acme', 'TEMPORARY', enc(freshValue()));
    expect(await store.delete('acme', 'TEMPORARY')).toBe(true);
    expect(await store.delete('acme', 'TEMPORARY')).toBe(false);
    expect((await codeOf(store.read('acme', ['TEMPORARY']))).code).toBe('E_NOT_FOUND');
  });

  it('given a sealed value edited in the table, when read, then it fails authentication and the listing shows no last four', async () => {
    await store.put('acme', 'TAMPERED', enc(freshValue()));
    await sql(`UPDATE secrets SET sealed = overlay(sealed placing '\\xff'::bytea from length(sealed) for 1) WHERE tenant = 'acme' AND name = 'TAMPERED'`);
    expect(await codeOf(store.read('acme', ['TAMPERED']))).toMatchObject({ code: 'E_INTERNAL', reason: 'tampered' });
    expect((await store.list('acme')).find((s) => s.name === 'TAMPERED')?.lastFour).toBeNull();
  });

  it('given one tenant’s sealed value copied onto another tenant’s row, when read there, then it fails authentication', async () => {
    await store.put('acme', 'MOVED', enc(freshValue()));
    await store.put('other', 'MOVED', enc(freshValue()));
    await sql(`UPDATE secrets SET sealed = (SELECT sealed FROM secrets WHERE tenant = 'acme' AND name = 'MOVED') WHERE tenant = 'other' AND name = 'MOVED'`);
    expect(await codeOf(store.read('other', ['MOVED']))).toMatchObject({ code: 'E_INTERNAL', reason: 'tampered' });
  });

  it('given bad names, tenants or values, when put, then E_INPUT / E_TOO_LARGE and nothing is stored', async () => {
    expect((await codeOf(store.put('acme', 'bad-name', enc(freshValue())))).code).toBe('E_INPUT');
    expect((await codeOf(store.put('Not A Tenant', 'OK_NAME', enc(freshValue())))).code).toBe('E_INPUT');
    expect((await codeOf(store.put('acme', 'SHORT', enc('1234567')))).code).toBe('E_INPUT');
    expect((await codeOf(store.put('acme', 'HUGE', new Uint8Array(40_000).fill(0x61)))).code).toBe('E_TOO_LARGE');
    expect(await store.names('acme')).not.toContain('SHORT');
  });

  it('given a store opened without keys (policy), when it is asked for names, then it answers; for values, E_INTERNAL', async () => {
    const namesOnly = await SecretStore.open({ url: db.url });
    try {
      expect(await namesOnly.names('acme')).toContain('API_TOKEN');
      expect((await codeOf(namesOnly.read('acme', ['API_TOKEN']))).code).toBe('E_INTERNAL');
      expect((await codeOf(namesOnly.put('acme', 'X_NAME', enc(freshValue())))).code).toBe('E_INTERNAL');
    } finally {
      await namesOnly.close();
    }
  });

  it('given a new primary key with the old one kept, when resealed, then every value opens under the new key alone', async () => {
    const rotating = await createTestDatabase('cairn_secret_rotate');
    const oldKey = generateSecretKey();
    const before = await SecretStore.open({ url: rotating.url, keyring: { primary: oldKey, keys: [oldKey] } });
    const value = freshValue();
    try {
      await before.put('acme', 'ROTATED', enc(value));
    } finally {
      await before.close();
    }
    const newKey = generateSecretKey();
    const during = await SecretStore.open({ url: rotating.url, keyring: { primary: newKey, keys: [newKey, oldKey] } });
    try {
      expect(await during.sealedKeyIdOf('acme', 'ROTATED')).toBe(oldKey.id);
      expect(await during.reseal()).toEqual({ resealed: 1, unreadable: [] });
      expect(await during.sealedKeyIdOf('acme', 'ROTATED')).toBe(newKey.id);
      expect(await during.reseal()).toEqual({ resealed: 0, unreadable: [] });
    } finally {
      await during.close();
    }
    const after = await SecretStore.open({ url: rotating.url, keyring: { primary: newKey, keys: [newKey] } });
    try {
      expect(Buffer.from((await after.read('acme', ['ROTATED']))[0]!.value).toString('utf8')).toBe(value);
    } finally {
      await after.close();
      await rotating.drop();
    }
  });

  it('has a migrated schema that matches its entity', async () => {
    const dataSource = createSecretStoreDataSource(db.url);
    await dataSource.initialize();
    try {
      expect(await checkSchemaMatchesEntities(dataSource)).toEqual({ matches: true, differences: [] });
    } finally {
      await dataSource.destroy();
    }
  });
});

describe('who may use a secret', () => {
  const SETTER = 'key:3b8e0c1a-0d7f-4a5e-9c2b-1f6e8d9a0b1c';
  const OTHER = 'key:8c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f';

  it('given a value set by a key, when listed, then the setter is recorded and granted; more grants come in the same put', async () => {
    await store.put('gov', 'CI_TOKEN', enc(freshValue()), { setBy: SETTER, grants: ['scope:runs:write', OTHER, OTHER] });
    const [listed] = await store.list('gov');
    expect(listed).toMatchObject({ name: 'CI_TOKEN', setBy: SETTER });
    expect(listed!.grants.map((g) => [g.grantee, g.grantedBy])).toEqual([
      [SETTER, SETTER],
      [OTHER, SETTER],
      ['scope:runs:write', SETTER],
    ]);
    expect(await store.access('gov')).toEqual([{ name: 'CI_TOKEN', grantees: [SETTER, OTHER, 'scope:runs:write'].sort() }]);
  });

  it('given grants, when granted again, revoked, or the value replaced by another key, then each grant is held once and only revokes remove one', async () => {
    const third = 'key:third-key';
    expect((await store.grant('gov', 'CI_TOKEN', [third, OTHER], OTHER)).map((g) => g.grantee)).toEqual([SETTER, OTHER, third, 'scope:runs:write'].sort());
    expect(await store.revoke('gov', 'CI_TOKEN', OTHER)).toBe(true);
    expect(await store.revoke('gov', 'CI_TOKEN', OTHER)).toBe(false);
    await store.put('gov', 'CI_TOKEN', enc(freshValue()), { setBy: third });
    const [listed] = await store.list('gov');
    expect(listed!.setBy).toBe(third);
    expect(listed!.grants.map((g) => g.grantee)).toEqual([SETTER, third, 'scope:runs:write'].sort());
  });

  it('given a bad grantee or a secret the tenant lacks, when granted, then E_INPUT / E_NOT_FOUND and nothing is stored', async () => {
    const before = await store.access('gov');
    expect((await codeOf(store.grant('gov', 'CI_TOKEN', ['tenant:gov'], SETTER))).code).toBe('E_INPUT');
    expect((await codeOf(store.put('gov', 'CI_TOKEN', enc(freshValue()), { setBy: SETTER, grants: ['scope:root'] }))).code).toBe('E_INPUT');
    expect((await codeOf(store.grant('gov', 'NO_SUCH', [OTHER], SETTER))).code).toBe('E_NOT_FOUND');
    expect((await codeOf(store.grant('acme', 'CI_TOKEN', [OTHER], SETTER))).code).toBe('E_NOT_FOUND');
    expect(await store.access('gov')).toEqual(before);
    expect(await store.access('acme', ['CI_TOKEN'])).toEqual([]);
  });

  it('given a secret removed, when set again, then its old grants are gone with it', async () => {
    expect(await store.delete('gov', 'CI_TOKEN')).toBe(true);
    expect(await sql('SELECT * FROM secret_grants WHERE tenant = $1', ['gov'])).toEqual([]);
    await store.put('gov', 'CI_TOKEN', enc(freshValue()), { setBy: OTHER });
    expect(await store.access('gov', ['CI_TOKEN', 'NOT_THERE'])).toEqual([{ name: 'CI_TOKEN', grantees: [OTHER] }]);
  });

  it('given a value set with no actor (before governance), when read for policy, then it has no grant at all', async () => {
    await store.put('gov', 'LEGACY', enc(freshValue()));
    expect(await store.access('gov', ['LEGACY'])).toEqual([{ name: 'LEGACY', grantees: [] }]);
    expect((await store.list('gov')).find((s) => s.name === 'LEGACY')).toMatchObject({ setBy: null, grants: [] });
  });
});

describe('the secret key file', () => {
  it('given no file, when ensured, then one key is written with mode 0600; ensured again, the same key is kept', async () => {
    const path = join(dir, 'fresh.key');
    const first = await ensureSecretKeyFile(path);
    expect(first.created).toBe(true);
    expect((await stat(path)).mode & 0o777).toBe(0o600);
    const again = await ensureSecretKeyFile(path);
    expect(again.created).toBe(false);
    expect(again.keyring.primary.id).toBe(first.keyring.primary.id);
    expect((await readFile(path, 'utf8')).trim()).toMatch(/^[0-9a-f]{64}$/);
  });

  it('given a key file others may read (0644, 0640) or a link, when read or ensured, then E_INPUT names the mode and nothing is changed', async () => {
    for (const mode of [0o644, 0o640, 0o604]) {
      const path = join(dir, `loose-${mode.toString(8)}.key`);
      await writeFile(path, formatSecretKeyring([generateSecretKey()]));
      await chmod(path, mode);
      const read = await codeOf(readSecretKeyFile(path));
      expect(read.code).toBe('E_INPUT');
      expect(read.message).toContain(`mode 0${mode.toString(8)}`);
      expect((await codeOf(ensureSecretKeyFile(path))).code).toBe('E_INPUT');
      expect((await stat(path)).mode & 0o777).toBe(mode);
    }
    const target = join(dir, 'target.key');
    await writeFile(target, formatSecretKeyring([generateSecretKey()]), { mode: 0o600 });
    const link = join(dir, 'link.key');
    await symlink(target, link);
    expect((await codeOf(readSecretKeyFile(link))).code).toBe('E_INPUT');
  });

  it('given a 0400 key file, when read, then it is accepted; a malformed one is E_INPUT without its content', async () => {
    const strict = join(dir, 'strict.key');
    await writeFile(strict, formatSecretKeyring([generateSecretKey()]), { mode: 0o400 });
    expect((await readSecretKeyFile(strict)).keys).toHaveLength(1);
    const bad = join(dir, 'bad.key');
    await writeFile(bad, 'not-hex-at-all\n', { mode: 0o600 });
    const failure = await codeOf(readSecretKeyFile(bad));
    expect(failure.code).toBe('E_INPUT');
    expect(failure.message).not.toContain('not-hex');
  });
});
