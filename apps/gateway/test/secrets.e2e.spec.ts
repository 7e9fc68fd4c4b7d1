import 'reflect-metadata';
import { randomBytes } from 'node:crypto';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '@cairn/config';
import { isCairnError } from '@cairn/contracts';
import type { ApiKeyScope } from '@cairn/contracts';
import { bucketStreamName } from '@cairn/operational';
import { migrate } from '@cairn/persistence';
import { formatBoxKeyring, formatBoxPublicKeys, formatSecretKeyring, generateBoxKey, generateSecretKey, openSealedBox } from '@cairn/secrets';
import type { BoxPrivateKey } from '@cairn/secrets';
import { readSecretKeyFile, SecretStore } from '@cairn/secret-store';
import { JsonLogger } from '@cairn/service-kit';
import { createTestDatabase, provisionKey, testNatsUrl, uniqueName } from '@cairn/testing';
import type { TestDatabase } from '@cairn/testing';
import { jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { connect } from '@nats-io/transport-node';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GatewayConfigSchema } from '../src/gateway.config.js';
import type { GatewayConfig } from '../src/gateway.config.js';
import { startGateway } from '../src/start-gateway.js';
import type { RunningGateway } from '../src/start-gateway.js';
import { startIntakeFor } from './gateway.harness.js';
import type { ServiceProcess } from './gateway.harness.js';

/*
 * The secret store's REST routes, on an in-process gateway with its own streams, database and key
 * file: write-only (a value goes in and never comes out; a listing shows the last four
 * characters), scoped (`secrets:write`), per tenant, and every bad request refused with its code.
 */

const BOOTSTRAP_KEY = `cairn_secretsg_${'S'.repeat(43)}`;

let db: TestDatabase;
let dir: string;
let config: GatewayConfig;
let boxKey: BoxPrivateKey;
let gateway: RunningGateway;
let intake: ServiceProcess;
const logLines: string[] = [];
const keys = { secrets: '', runsOnly: '', globex: '', otherOps: '' };
/** Key ids, for grants (`key:<id>`). */
const ids = { secrets: '', ci: '', globex: '', otherOps: '' };

/** A value of the test's own (random), so a search for it cannot be fooled. */
const freshValue = () => `tok_${randomBytes(21).toString('base64url')}`;

interface Answer {
  status: number;
  text: string;
  body: Record<string, unknown> | null;
}

async function call(method: string, path: string, options: { key?: string | null; text?: string | Uint8Array; contentType?: string } = {}): Promise<Answer> {
  const headers: Record<string, string> = {};
  const key = options.key === undefined ? keys.secrets : options.key;
  if (key !== null) headers.authorization = `Bearer ${key}`;
  if (options.text !== undefined) headers['content-type'] = options.contentType ?? 'text/plain; charset=utf-8';
  const response = await fetch(`${gateway.url}${path}`, { method, headers, ...(options.text === undefined ? {} : { body: options.text }) });
  const text = await response.text();
  let body: Record<string, unknown> | null = null;
  try {
    body = JSON.parse(text) as Record<string, unknown>;
  } catch {
    body = null;
  }
  return { status: response.status, text, body };
}

/** Everything the catalog bucket holds, and whatever PostgreSQL's old `secrets` table holds (nothing, now). */
async function tableDump(): Promise<string> {
  const nc = await connect({ servers: testNatsUrl() });
  const lines: string[] = [];
  try {
    const kv = await new Kvm(nc).open(config.CAIRN_SECRETS_BUCKET);
    for await (const key of await kv.keys()) {
      const entry = await kv.get(key);
      if (entry?.operation === 'PUT') lines.push(`${key} ${entry.string()}`);
    }
  } finally {
    await nc.close();
  }
  const client = new pg.Client({ connectionString: db.url });
  await client.connect();
  try {
    const exists = (await client.query<{ t: string | null }>(`SELECT to_regclass('secrets')::text AS t`)).rows[0]?.t;
    if (exists !== null && exists !== undefined) lines.push(...(await client.query<{ row: string }>(`SELECT t::text AS row FROM secrets t`)).rows.map((r) => r.row));
  } finally {
    await client.end();
  }
  return lines.join('\n');
}

function env(extra: Record<string, string> = {}): GatewayConfig {
  return loadConfig(GatewayConfigSchema, {
    CAIRN_NATS_URL: testNatsUrl(),
    CAIRN_DATABASE_URL: db.url,
    CAIRN_EVIDENCE_STREAM: uniqueName('SG_EVIDENCE').toUpperCase(),
    CAIRN_EVIDENCE_SUBJECT_PREFIX: uniqueName('sg_ev').toLowerCase(),
    CAIRN_COMMAND_STREAM: uniqueName('SG_COMMANDS').toUpperCase(),
    CAIRN_COMMAND_SUBJECT_PREFIX: uniqueName('sg_cmd').toLowerCase(),
    CAIRN_WORKERS_BUCKET: uniqueName('sg_workers'),
    CAIRN_SECRETS_BUCKET: uniqueName('sg_secrets'),
    CAIRN_GATEWAY_PORT: '0',
    CAIRN_API_KEY: BOOTSTRAP_KEY,
    ...extra,
  });
}

async function dropStreams(used: GatewayConfig): Promise<void> {
  const nc = await connect({ servers: testNatsUrl() });
  try {
    const jsm = await jetstreamManager(nc);
    for (const stream of [used.CAIRN_EVIDENCE_STREAM, used.CAIRN_COMMAND_STREAM, bucketStreamName(used.CAIRN_WORKERS_BUCKET), bucketStreamName(used.CAIRN_SECRETS_BUCKET)]) await jsm.streams.delete(stream).catch(() => false);
  } finally {
    await nc.close();
  }
}

beforeAll(async () => {
  db = await createTestDatabase('gateway_secrets');
  await migrate(db.url);
  dir = await mkdtemp(join(tmpdir(), 'cairn-gateway-secrets-'));
  const keyFile = join(dir, 'secrets.key');
  await writeFile(keyFile, formatSecretKeyring([generateSecretKey()]), { mode: 0o600 });
  // The gateway gets the public half only (ADR 0028); the private half stays with the test, as with a worker.
  boxKey = generateBoxKey();
  const publicFile = join(dir, 'secrets-box.pub');
  await writeFile(publicFile, formatBoxPublicKeys([boxKey.publicKey]), { mode: 0o644 });
  config = env({ CAIRN_SECRETS_KEY_FILE: keyFile, CAIRN_SECRETS_PUBLIC_KEY_FILE: publicFile });
  gateway = await startGateway(config, { logger: new JsonLogger('gateway', 'debug', (line) => void logLines.push(line)) });
  // Test keys are made as the product makes them: through POST /v1/keys, recorded by intake.
  intake = startIntakeFor(config);
  const mint = (tenant: string, scopes: ApiKeyScope[]) => provisionKey(gateway.url, BOOTSTRAP_KEY, { tenant, scopes });
  const minted = {
    secrets: await mint('acme', ['secrets:write']),
    runsOnly: await mint('acme', ['runs:read', 'runs:write']),
    globex: await mint('globex', ['secrets:write']),
    otherOps: await mint('acme', ['secrets:write']),
    ci: await mint('acme', ['runs:write', 'secrets:use']),
  };
  keys.secrets = minted.secrets.key;
  keys.runsOnly = minted.runsOnly.key;
  keys.globex = minted.globex.key;
  keys.otherOps = minted.otherOps.key;
  ids.secrets = minted.secrets.id;
  ids.ci = minted.ci.id;
  ids.globex = minted.globex.id;
  ids.otherOps = minted.otherOps.id;
});

afterAll(async () => {
  await gateway?.close();
  await intake?.stop();
  if (config !== undefined) await dropStreams(config);
  await db?.drop();
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
});

describe('PUT / GET / DELETE /v1/secrets: write-only, per tenant', () => {
  it('stores a value and answers with its last four characters only; replacing says so', async () => {
    const value = freshValue();
    const stored = await call('PUT', '/v1/secrets/API_TOKEN', { text: value });
    expect(stored.status, stored.text).toBe(200);
    expect(stored.body).toMatchObject({ name: 'API_TOKEN', created: true, lastFour: value.slice(-4) });
    expect(stored.text).not.toContain(value);

    const second = freshValue();
    const replaced = await call('PUT', '/v1/secrets/API_TOKEN', { text: second });
    expect(replaced.body).toMatchObject({ name: 'API_TOKEN', created: false, lastFour: second.slice(-4) });

    const listed = await call('GET', '/v1/secrets');
    expect(listed.status).toBe(200);
    const items = (listed.body?.items ?? []) as { name: string; lastFour: string; keyId: string }[];
    expect(items.map((i) => [i.name, i.lastFour])).toEqual([['API_TOKEN', second.slice(-4)]]);
    expect(Object.keys(items[0]!).sort()).toEqual(['createdAt', 'grants', 'keyId', 'lastFour', 'name', 'setBy', 'updatedAt']);
    expect(listed.text).not.toContain(second);
    expect(listed.text).not.toContain(value);

    // Nowhere at rest or in the gateway's log either: only the sealed form, only the name.
    const dump = await tableDump();
    for (const v of [value, second]) {
      expect(dump).not.toContain(v);
      expect(dump).not.toContain(Buffer.from(v).toString('hex'));
      expect(logLines.join('')).not.toContain(v);
    }
    expect(logLines.some((line) => line.includes('"msg":"secret stored"') && line.includes('API_TOKEN'))).toBe(true);
    // Sealed to the workers' key: only its private half opens what the gateway stored.
    const record = JSON.parse(dump.split('\n').find((line) => line.startsWith('acme.API_TOKEN '))!.slice('acme.API_TOKEN '.length)) as { sealed: string; key_id: string };
    expect(record.key_id).toBe(boxKey.id);
    expect(items[0]!.keyId).toBe(boxKey.id);
    expect(Buffer.from(openSealedBox({ current: boxKey, keys: [boxKey] }, { tenant: 'acme', name: 'API_TOKEN' }, Buffer.from(record.sealed, 'base64'))).toString()).toBe(second);
  });

  it('keeps tenants apart: another tenant lists none of them and cannot remove them (404)', async () => {
    await call('PUT', '/v1/secrets/SHARED_NAME', { text: freshValue() });
    const theirs = freshValue();
    expect((await call('PUT', '/v1/secrets/SHARED_NAME', { key: keys.globex, text: theirs })).body).toMatchObject({ created: true });
    const globex = await call('GET', '/v1/secrets', { key: keys.globex });
    expect(((globex.body?.items ?? []) as { name: string; lastFour: string }[]).map((i) => [i.name, i.lastFour])).toEqual([['SHARED_NAME', theirs.slice(-4)]]);
    expect((await call('DELETE', '/v1/secrets/API_TOKEN', { key: keys.globex })).body).toMatchObject({ code: 'E_NOT_FOUND' });
    expect(((await call('GET', '/v1/secrets')).body?.items as { name: string }[]).map((i) => i.name)).toContain('API_TOKEN');
  });

  it('removes a secret; removing it again is 404 E_NOT_FOUND', async () => {
    await call('PUT', '/v1/secrets/SHORT_LIVED', { text: freshValue() });
    const removed = await call('DELETE', '/v1/secrets/SHORT_LIVED');
    expect(removed.status).toBe(200);
    expect(removed.body).toEqual({ name: 'SHORT_LIVED', deleted: true });
    const again = await call('DELETE', '/v1/secrets/SHORT_LIVED');
    expect([again.status, again.body?.code]).toEqual([404, 'E_NOT_FOUND']);
  });

  it('needs the secrets:write scope: 401 without a key, 403 E_FORBIDDEN with runs:write only', async () => {
    for (const [method, path, text] of [
      ['PUT', '/v1/secrets/API_TOKEN', freshValue()],
      ['GET', '/v1/secrets', undefined],
      ['DELETE', '/v1/secrets/API_TOKEN', undefined],
    ] as const) {
      const anonymous = await call(method, path, { key: null, ...(text === undefined ? {} : { text }) });
      expect([anonymous.status, anonymous.body?.code], `${method} ${path}`).toEqual([401, 'E_UNAUTHORIZED']);
      const weak = await call(method, path, { key: keys.runsOnly, ...(text === undefined ? {} : { text }) });
      expect([weak.status, weak.body?.code], `${method} ${path}`).toEqual([403, 'E_FORBIDDEN']);
    }
  });

  it('refuses bad names and values with their codes, stores nothing, and never echoes a value', async () => {
    const before = await tableDump();
    const value = freshValue();
    const cases: [string, Parameters<typeof call>[2], number, string][] = [
      ['/v1/secrets/api-token', { text: value }, 400, 'E_INPUT'],
      ['/v1/secrets/API_TOKEN', { text: JSON.stringify({ value }), contentType: 'application/json' }, 400, 'E_INPUT'],
      ['/v1/secrets/API_TOKEN', { text: 'short' }, 400, 'E_INPUT'],
      ['/v1/secrets/API_TOKEN', { text: `${value}\u0000${value}` }, 400, 'E_INPUT'],
      ['/v1/secrets/API_TOKEN', { text: new Uint8Array([0xff, 0xfe, 0xfd, 0x41, 0x42, 0x43, 0x44, 0x45, 0x46]) }, 400, 'E_INPUT'],
      ['/v1/secrets/API_TOKEN', { text: 'v'.repeat(40_000) }, 413, 'E_TOO_LARGE'],
      ['/v1/secrets/API_TOKEN', {}, 400, 'E_INPUT'],
    ];
    for (const [path, options, status, code] of cases) {
      const answer = await call('PUT', path, options);
      expect([answer.status, answer.body?.code], `${path} ${JSON.stringify(options).slice(0, 60)}`).toEqual([status, code]);
      expect(answer.text).not.toContain(value);
    }
    expect(await tableDump()).toBe(before);
  });
});

describe('who may use a secret: grants over REST', () => {
  interface Grant {
    grantee: string;
    grantedBy: string;
    grantedAt: string;
  }
  const listed = async (name: string) => ((await call('GET', '/v1/secrets')).body?.items as { name: string; lastFour: string; setBy: string | null; grants: Grant[] }[]).find((i) => i.name === name);

  it('grants the key that sets a secret, and the keys and scopes `grant` names, in the same write; the listing shows them', async () => {
    const value = freshValue();
    const path = `/v1/secrets/CI_TOKEN?grant=key:${ids.ci}&grant=scope:runs:write`;
    expect((await call('PUT', path, { text: value })).status).toBe(200);
    const secret = await listed('CI_TOKEN');
    expect(secret).toMatchObject({ setBy: `key:${ids.secrets}`, lastFour: value.slice(-4) });
    // In grantee order (byte order: what the store answers), each granted by the key that set it.
    const setter = `key:${ids.secrets}`;
    expect(secret!.grants.map((g) => [g.grantee, g.grantedBy])).toEqual([`key:${ids.ci}`, setter, 'scope:runs:write'].sort().map((grantee) => [grantee, setter]));
    const one = await call('PUT', `/v1/secrets/ONE_GRANT?grant=key:${ids.ci}`, { text: freshValue() });
    expect(one.status, one.text).toBe(200);
    expect((await listed('ONE_GRANT'))!.grants.map((g) => g.grantee).sort()).toEqual([`key:${ids.ci}`, `key:${ids.secrets}`].sort());
  });

  it('refuses a grant to a key that is not one of the tenant’s (unknown, or another tenant’s) or a bad grantee, storing nothing', async () => {
    const before = await tableDump();
    for (const [grant, status] of [
      ['key:9b2c1d3e-0000-4000-8000-00000000dead', 400],
      [`key:${ids.globex}`, 400],
      ['tenant:acme', 400],
      ['scope:root', 400],
    ] as const) {
      const answer = await call('PUT', `/v1/secrets/NEVER_STORED?grant=${encodeURIComponent(grant)}`, { text: freshValue() });
      expect([answer.status, answer.body?.code], grant).toEqual([status, 'E_INPUT']);
    }
    expect(await tableDump()).toBe(before);
  });

  it('lets only a key holding a grant change a secret: another secrets:write key may not replace, grant itself, revoke or remove it (403)', async () => {
    const before = await listed('CI_TOKEN');
    const attempts: [string, string, Parameters<typeof call>[2]][] = [
      ['PUT', '/v1/secrets/CI_TOKEN', { text: freshValue() }],
      ['POST', '/v1/secrets/CI_TOKEN/grants', { text: JSON.stringify({ grantees: [`key:${ids.otherOps}`] }), contentType: 'application/json' }],
      ['DELETE', `/v1/secrets/CI_TOKEN/grants/key:${ids.ci}`, {}],
      ['DELETE', '/v1/secrets/CI_TOKEN', {}],
    ];
    for (const [method, path, options] of attempts) {
      const answer = await call(method, path, { ...options, key: keys.otherOps });
      expect([answer.status, answer.body?.code], `${method} ${path}`).toEqual([403, 'E_FORBIDDEN']);
      expect(answer.body?.message).toContain('CI_TOKEN');
    }
    expect(await listed('CI_TOKEN')).toEqual(before);
    // Its own secret it manages as it likes.
    expect((await call('PUT', '/v1/secrets/OTHER_OPS', { key: keys.otherOps, text: freshValue() })).status).toBe(200);
  });

  it('grants, lists and revokes through /v1/secrets/:name/grants; a grant granted twice is held once; revoking what is not there is 404', async () => {
    const json = (body: unknown) => ({ text: JSON.stringify(body), contentType: 'application/json' });
    const granted = await call('POST', '/v1/secrets/CI_TOKEN/grants', json({ grantees: [`key:${ids.otherOps}`, `key:${ids.otherOps}`, 'scope:approve'] }));
    expect(granted.status, granted.text).toBe(200);
    const grantees = (granted.body?.grants as Grant[]).map((g) => g.grantee);
    expect(grantees).toEqual([...new Set([`key:${ids.ci}`, `key:${ids.otherOps}`, `key:${ids.secrets}`, 'scope:approve', 'scope:runs:write'])].sort());
    expect((await call('GET', '/v1/secrets/CI_TOKEN/grants')).body).toEqual(granted.body);
    // Now a grant holder, the other key may pass it on and take grants back.
    const revoked = await call('DELETE', `/v1/secrets/CI_TOKEN/grants/${encodeURIComponent('scope:approve')}`, { key: keys.otherOps });
    expect(revoked.status, revoked.text).toBe(200);
    expect((revoked.body?.grants as Grant[]).map((g) => g.grantee)).not.toContain('scope:approve');
    expect(await call('DELETE', '/v1/secrets/CI_TOKEN/grants/scope:approve')).toMatchObject({ status: 404, body: { code: 'E_NOT_FOUND' } });
    expect(await call('POST', '/v1/secrets/NO_SUCH_SECRET/grants', json({ grantees: ['scope:runs:write'] }))).toMatchObject({ status: 404, body: { code: 'E_NOT_FOUND' } });
    expect(await call('GET', '/v1/secrets/NO_SUCH_SECRET/grants')).toMatchObject({ status: 404, body: { code: 'E_NOT_FOUND' } });
    for (const bad of [{ grantees: [] }, { grantees: ['everyone'] }, { grantee: 'scope:runs:write' }]) {
      expect(await call('POST', '/v1/secrets/CI_TOKEN/grants', json(bad)), JSON.stringify(bad)).toMatchObject({ status: 400, body: { code: 'E_INPUT' } });
    }
    // Another tenant sees none of it.
    expect(await call('GET', '/v1/secrets/CI_TOKEN/grants', { key: keys.globex })).toMatchObject({ status: 404, body: { code: 'E_NOT_FOUND' } });
    expect(await call('POST', '/v1/secrets/CI_TOKEN/grants', { ...json({ grantees: [`key:${ids.globex}`] }), key: keys.globex })).toMatchObject({ status: 404 });
  });

  it('needs secrets:write for every grant route', async () => {
    for (const [method, path] of [
      ['GET', '/v1/secrets/CI_TOKEN/grants'],
      ['POST', '/v1/secrets/CI_TOKEN/grants'],
      ['DELETE', `/v1/secrets/CI_TOKEN/grants/key:${ids.ci}`],
    ] as const) {
      expect((await call(method, path, { key: keys.runsOnly })).status, `${method} ${path}`).toBe(403);
      expect((await call(method, path, { key: null })).status, `${method} ${path}`).toBe(401);
    }
  });
});

describe('the gateway and its key files', () => {
  it('refuses to start with a private key in its public key file (E_INPUT): the gateway may not hold what opens a value', async () => {
    const wrong = join(dir, 'wrong.pub');
    await writeFile(wrong, formatBoxKeyring([generateBoxKey()]), { mode: 0o600 });
    const refused = env({ CAIRN_SECRETS_PUBLIC_KEY_FILE: wrong });
    try {
      await startGateway(refused, { logger: new JsonLogger('gateway', 'error', () => undefined) });
      throw new Error('the gateway started');
    } catch (error) {
      expect(isCairnError(error) && error.code).toBe('E_INPUT');
      expect((error as Error).message).toContain('holds a private key');
    } finally {
      await dropStreams(refused);
    }
  });

  it('at start, moves what an earlier version left in PostgreSQL to the catalog, sealed to the public key, once, and logs how many', async () => {
    const legacyValue = freshValue();
    const aes = await readSecretKeyFile(config.CAIRN_SECRETS_KEY_FILE!);
    const legacy = await SecretStore.open({ url: db.url, keyring: aes });
    try {
      await legacy.put('acme', 'FROM_POSTGRES', new Uint8Array(Buffer.from(legacyValue)), { setBy: `key:${ids.secrets}`, grants: [`key:${ids.ci}`] });
    } finally {
      await legacy.close();
    }
    const moving = env({ CAIRN_SECRETS_KEY_FILE: config.CAIRN_SECRETS_KEY_FILE!, CAIRN_SECRETS_PUBLIC_KEY_FILE: config.CAIRN_SECRETS_PUBLIC_KEY_FILE!, CAIRN_SECRETS_BUCKET: config.CAIRN_SECRETS_BUCKET });
    const lines: string[] = [];
    const second = await startGateway(moving, { logger: new JsonLogger('gateway', 'info', (line) => void lines.push(line)) });
    try {
      const moved = lines.find((line) => line.includes('"msg":"secrets moved to the catalog"'));
      expect(moved).toBeDefined();
      expect(JSON.parse(moved!)).toMatchObject({ moved: 1, skipped: 0, unreadable: [] });
      const dump = await tableDump();
      expect(dump).toContain('acme.FROM_POSTGRES ');
      expect(dump).not.toContain(legacyValue);
      const record = JSON.parse(dump.split('\n').find((line) => line.startsWith('acme.FROM_POSTGRES '))!.slice('acme.FROM_POSTGRES '.length)) as { sealed: string; grants: { grantee: string }[]; set_by: string };
      expect(record.set_by).toBe(`key:${ids.secrets}`);
      expect(record.grants.map((g) => g.grantee).sort()).toEqual([`key:${ids.ci}`, `key:${ids.secrets}`].sort());
      expect(Buffer.from(openSealedBox({ current: boxKey, keys: [boxKey] }, { tenant: 'acme', name: 'FROM_POSTGRES' }, Buffer.from(record.sealed, 'base64'))).toString()).toBe(legacyValue);
    } finally {
      await second.close();
      await dropStreams({ ...moving, CAIRN_SECRETS_BUCKET: `${moving.CAIRN_SECRETS_BUCKET}_kept` });
    }
  });

  it('without a public key file, answers the secret routes 503 E_UNAVAILABLE and stores nothing', async () => {
    const bare = env();
    const plain = await startGateway(bare, { logger: new JsonLogger('gateway', 'error', () => undefined) });
    try {
      const answer = await fetch(`${plain.url}/v1/secrets/NOPE_NAME`, { method: 'PUT', headers: { authorization: `Bearer ${BOOTSTRAP_KEY}`, 'content-type': 'text/plain' }, body: freshValue() });
      expect(answer.status).toBe(503);
      expect(((await answer.json()) as { code: string }).code).toBe('E_UNAVAILABLE');
    } finally {
      await plain.close();
      await dropStreams(bare);
    }
  });

  it('refuses to start with a key file others may read (E_INPUT naming its mode)', async () => {
    const loose = join(dir, 'loose.key');
    await writeFile(loose, formatSecretKeyring([generateSecretKey()]));
    await chmod(loose, 0o644);
    const refused = env({ CAIRN_SECRETS_KEY_FILE: loose });
    try {
      await startGateway(refused, { logger: new JsonLogger('gateway', 'error', () => undefined) });
      throw new Error('the gateway started');
    } catch (error) {
      expect(isCairnError(error) && error.code).toBe('E_INPUT');
      expect((error as Error).message).toContain('mode 0644');
    } finally {
      await dropStreams(refused);
    }
  });
});
