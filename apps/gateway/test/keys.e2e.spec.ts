import 'reflect-metadata';
import { EventPageSchema, KeyCreatedSchema, KeyListSchema, KeySchema, ProofBundleSchema, TenantListSchema, TenantSchema } from '@cairn/contracts';
import type { KeyCreated } from '@cairn/contracts';
import { loadConfig } from '@cairn/config';
import { verifyChain } from '@cairn/evidence';
import { bucketStreamName } from '@cairn/operational';
import { migrate } from '@cairn/persistence';
import { JsonLogger } from '@cairn/service-kit';
import { createTestDatabase, testNatsUrl, uniqueName } from '@cairn/testing';
import type { TestDatabase } from '@cairn/testing';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GatewayConfigSchema } from '../src/gateway.config.js';
import type { GatewayConfig } from '../src/gateway.config.js';
import { startGateway } from '../src/start-gateway.js';
import type { RunningGateway } from '../src/start-gateway.js';
import { http, INTAKE_MAIN, PROJECTOR_MAIN, startServiceProcess, untilServing } from './gateway.harness.js';
import type { HttpAnswer, ServiceProcess } from './gateway.harness.js';

/*
 * Key and tenant administration through REST (docs/adr/0011) on an in-process gateway with the real
 * intake and projector processes: who may do what, the secret shown once, rotation (at once and with
 * grace), revocation on the very next request, expiry, bad input creating nothing, and the admin
 * chain recorded through intake, verifiable, and consistent with the table across an intake outage.
 */

const OPERATOR_KEY = `cairn_keysopgw_${'K'.repeat(43)}`;

let db: TestDatabase;
let env: Record<string, string>;
let config: GatewayConfig;
let gateway: RunningGateway;
let intake: ServiceProcess;
let projector: ServiceProcess;
const logLines: string[] = [];
const acme = uniqueName('acme').toLowerCase().replace(/[^a-z0-9_-]/g, '');
const globex = uniqueName('globex').toLowerCase().replace(/[^a-z0-9_-]/g, '');
let acmeAdmin: KeyCreated;
/** The bootstrap key's id, as the table holds it. */
let operatorId = '';
let globexAdmin: KeyCreated;

function call(method: 'GET' | 'POST' | 'PUT' | 'DELETE', path: string, key: string | null, body?: unknown, headers?: Record<string, string>): Promise<HttpAnswer> {
  return http(gateway.url, method, path, { key, ...(body === undefined ? {} : { body }), ...(headers === undefined ? {} : { headers }) });
}

async function createKey(adminKey: string, body: Record<string, unknown>, headers?: Record<string, string>): Promise<KeyCreated> {
  const answer = await call('POST', '/v1/keys', adminKey, body, headers);
  expect(answer.status, answer.text).toBe(201);
  return KeyCreatedSchema.parse(answer.body);
}

/** The key a receipt names, if it names one. */
function keyIdOf(receipt: unknown): unknown {
  return (receipt as { key_id?: unknown }).key_id;
}

async function sql<T>(text: string, parameters: unknown[] = []): Promise<T[]> {
  const client = new pg.Client({ connectionString: db.url });
  await client.connect();
  try {
    return (await client.query(text, parameters)).rows as T[];
  } finally {
    await client.end();
  }
}

async function waitFor<T>(what: string, probe: () => Promise<T | null>, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== null) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** The tenant's admin chain as projected, once it holds `count` receipts. */
async function adminChain(tenant: string, count: number, key = OPERATOR_KEY) {
  return waitFor(`adm_${tenant} with ${count} receipts`, async () => {
    const answer = await call('GET', `/v1/tenants/${tenant}/bundle`, key);
    if (answer.status !== 200) return null;
    const bundle = ProofBundleSchema.parse(answer.body);
    return bundle.receipts.length >= count ? bundle : null;
  });
}

beforeAll(async () => {
  db = await createTestDatabase('gateway_keys');
  await migrate(db.url);
  env = {
    CAIRN_NATS_URL: testNatsUrl(),
    CAIRN_DATABASE_URL: db.url,
    CAIRN_EVIDENCE_STREAM: uniqueName('KG_EVIDENCE').toUpperCase(),
    CAIRN_EVIDENCE_SUBJECT_PREFIX: uniqueName('kg_ev').toLowerCase(),
    CAIRN_COMMAND_STREAM: uniqueName('KG_COMMANDS').toUpperCase(),
    CAIRN_COMMAND_SUBJECT_PREFIX: uniqueName('kg_cmd').toLowerCase(),
    CAIRN_WORKERS_BUCKET: uniqueName('kg_workers'),
  };
  config = loadConfig(GatewayConfigSchema, { ...env, CAIRN_GATEWAY_PORT: '0', CAIRN_API_KEY: OPERATOR_KEY, CAIRN_GATEWAY_COMMAND_TIMEOUT_MS: '3000' });
  intake = startServiceProcess('intake', INTAKE_MAIN, env);
  projector = startServiceProcess('projector', PROJECTOR_MAIN, env);
  gateway = await startGateway(config, { logger: new JsonLogger('gateway', 'debug', (line) => void logLines.push(line)) });
  // The gateway's commands wait 3 s for an answer: not long enough for a loaded host to boot intake.
  await untilServing(intake);
  operatorId = (await sql<{ id: string }>(`SELECT id FROM api_keys WHERE prefix = 'keysopgw'`))[0]!.id;
  for (const tenant of [acme, globex]) expect((await call('POST', '/v1/tenants', OPERATOR_KEY, { id: tenant })).status).toBe(201);
  acmeAdmin = await createKey(OPERATOR_KEY, { tenant: acme, scopes: ['admin'] });
  globexAdmin = await createKey(OPERATOR_KEY, { tenant: globex, scopes: ['admin'] });
}, 60_000);

afterAll(async () => {
  await gateway?.close();
  await intake?.stop();
  await projector?.stop();
  if (config !== undefined) {
    const nc = await connect({ servers: testNatsUrl() });
    try {
      const jsm = await jetstreamManager(nc);
      for (const stream of [config.CAIRN_EVIDENCE_STREAM, config.CAIRN_COMMAND_STREAM, bucketStreamName(config.CAIRN_WORKERS_BUCKET)]) await jsm.streams.delete(stream).catch(() => false);
    } finally {
      await nc.close();
    }
  }
  await db?.drop();
});

describe('the bootstrap key and tenants', () => {
  it("records the bootstrap key's creation on adm_default once intake answers, as the gateway's", async () => {
    const bundle = await adminChain('default', 2);
    expect(bundle.receipts[1]).toMatchObject({ key_id: operatorId });
    expect(bundle.runId).toBe('adm_default');
    expect(bundle.receipts.slice(0, 2)).toEqual([
      expect.objectContaining({ type: 'admin.tenant_created', created_by: 'gateway', actor: 'intake' }),
      expect.objectContaining({ type: 'admin.key_created', prefix: 'keysopgw', scopes: ['admin'], created_by: 'gateway' }),
    ]);
    expect(verifyChain(bundle.receipts)).toMatchObject({ ok: true, chainId: 'adm_default' });
  });

  it('lets the operator create and list tenants; a tenant again is 409; a tenant admin neither creates nor lists (403)', async () => {
    expect((await call('POST', '/v1/tenants', OPERATOR_KEY, { id: acme })).body).toMatchObject({ code: 'E_CONFLICT' });
    const listed = TenantListSchema.parse((await call('GET', '/v1/tenants', OPERATOR_KEY)).body).items.map((t) => t.id);
    expect(listed).toEqual(expect.arrayContaining(['default', acme, globex]));
    expect((await call('POST', '/v1/tenants', acmeAdmin.key, { id: uniqueName('x').toLowerCase() })).body).toMatchObject({ code: 'E_FORBIDDEN' });
    expect((await call('GET', '/v1/tenants', acmeAdmin.key)).status).toBe(403);
    // Its own tenant it reads; another is 404, like any other tenant's object.
    expect(TenantSchema.parse((await call('GET', `/v1/tenants/${acme}`, acmeAdmin.key)).body)).toMatchObject({ id: acme, chainId: `adm_${acme}`, recorded: true });
    expect((await call('GET', `/v1/tenants/${globex}`, acmeAdmin.key)).body).toMatchObject({ code: 'E_NOT_FOUND' });
    expect((await call('GET', `/v1/tenants/${globex}/bundle`, acmeAdmin.key)).status).toBe(404);
    const bad = await call('POST', '/v1/tenants', OPERATOR_KEY, { id: 'Not A Tenant' });
    expect(bad.body).toMatchObject({ code: 'E_INPUT' });
    expect(TenantListSchema.parse((await call('GET', '/v1/tenants', OPERATOR_KEY)).body).items).toHaveLength(listed.length);
  });
});

describe('keys', () => {
  it('shows the secret once; listings carry id, prefix, last four, scopes, status and never a secret or hash', async () => {
    const reader = await createKey(acmeAdmin.key, { scopes: ['runs:read'] });
    expect(reader).toMatchObject({ tenant: acme, scopes: ['runs:read'], status: 'active', createdBy: `key:${acmeAdmin.id}`, expiresAt: null, rotations: 0 });
    expect(reader.key.startsWith(`cairn_${reader.prefix}_`)).toBe(true);
    expect(reader.lastFour).toBe(reader.key.slice(-4));
    const listed = await call('GET', '/v1/keys', acmeAdmin.key);
    const items = KeyListSchema.parse(listed.body).items;
    expect(items.map((k) => k.id)).toEqual(expect.arrayContaining([acmeAdmin.id, reader.id]));
    expect(listed.text).not.toContain(reader.key.slice(15));
    const [row] = await sql<{ key_sha256: string }>('SELECT key_sha256 FROM api_keys WHERE id = $1', [reader.id]);
    expect(listed.text).not.toContain(row!.key_sha256);
    expect(logLines.join('\n')).not.toContain(reader.key.slice(15));
    const dump = (await sql<{ row: string }>('SELECT t::text AS row FROM api_keys t')).map((r) => r.row).join('\n');
    expect(dump).not.toContain(reader.key.slice(15));
    // Used within its scope; refused past it.
    expect((await call('GET', '/v1/runs', reader.key)).status).toBe(200);
    expect((await call('GET', '/v1/keys', reader.key)).body).toMatchObject({ code: 'E_FORBIDDEN' });
  });

  it("keeps tenants apart: another tenant's keys are 404, naming another tenant is 403; the operator administers any", async () => {
    const theirs = await createKey(globexAdmin.key, { scopes: ['runs:read'] });
    expect((await call('POST', `/v1/keys/${theirs.id}/revoke`, acmeAdmin.key, {})).body).toMatchObject({ code: 'E_NOT_FOUND' });
    expect((await call('POST', `/v1/keys/${theirs.id}/rotate`, acmeAdmin.key, {})).body).toMatchObject({ code: 'E_NOT_FOUND' });
    expect((await call('POST', '/v1/keys', acmeAdmin.key, { scopes: ['runs:read'], tenant: globex })).body).toMatchObject({ code: 'E_FORBIDDEN' });
    expect((await call('GET', `/v1/keys?tenant=${globex}`, acmeAdmin.key)).body).toMatchObject({ code: 'E_FORBIDDEN' });
    expect(KeyListSchema.parse((await call('GET', '/v1/keys', acmeAdmin.key)).body).items.map((k) => k.id)).not.toContain(theirs.id);
    expect(KeyListSchema.parse((await call('GET', `/v1/keys?tenant=${globex}`, OPERATOR_KEY)).body).items.map((k) => k.id)).toContain(theirs.id);
    expect((await call('GET', '/v1/runs', theirs.key)).status).toBe(200);
    expect(KeySchema.parse((await call('POST', `/v1/keys/${theirs.id}/revoke`, OPERATOR_KEY, {})).body).status).toBe('revoked');
    expect((await call('GET', '/v1/runs', theirs.key)).status).toBe(401);
    expect((await call('POST', '/v1/keys', OPERATOR_KEY, { scopes: ['runs:read'], tenant: 'no-such-tenant' })).body).toMatchObject({ code: 'E_NOT_FOUND' });
  });

  it('rotates: the old secret is refused at once and the new one works; with grace the old one works until it ends', async () => {
    const key = await createKey(acmeAdmin.key, { scopes: ['runs:read'] });
    const rotated = KeyCreatedSchema.parse((await call('POST', `/v1/keys/${key.id}/rotate`, acmeAdmin.key, {})).body);
    expect(rotated).toMatchObject({ id: key.id, prefix: key.prefix, scopes: ['runs:read'], rotations: 1, status: 'active' });
    expect(rotated.key).not.toBe(key.key);
    expect((await call('GET', '/v1/runs', key.key)).body).toMatchObject({ code: 'E_UNAUTHORIZED' });
    expect((await call('GET', '/v1/runs', rotated.key)).status).toBe(200);

    const graced = KeyCreatedSchema.parse((await call('POST', `/v1/keys/${key.id}/rotate`, acmeAdmin.key, { graceSeconds: 2 })).body);
    expect(graced.rotations).toBe(2);
    expect(graced.previousValidUntil).not.toBeNull();
    expect((await call('GET', '/v1/runs', rotated.key)).status).toBe(200);
    expect((await call('GET', '/v1/runs', graced.key)).status).toBe(200);
    await new Promise((resolve) => setTimeout(resolve, 2_100));
    expect((await call('GET', '/v1/runs', rotated.key)).status).toBe(401);
    expect((await call('GET', '/v1/runs', graced.key)).status).toBe(200);
    expect((await call('POST', `/v1/keys/${key.id}/rotate`, acmeAdmin.key, { graceSeconds: 3601 })).body).toMatchObject({ code: 'E_INPUT' });
  });

  it('revokes on the very next request, answers a second revocation as it is, and takes no rotation after', async () => {
    const key = await createKey(acmeAdmin.key, { scopes: ['runs:read'] });
    expect((await call('GET', '/v1/runs', key.key)).status).toBe(200);
    const revoked = KeySchema.parse((await call('POST', `/v1/keys/${key.id}/revoke`, acmeAdmin.key, { reason: 'rotated out' })).body);
    expect(revoked).toMatchObject({ status: 'revoked' });
    expect((await call('GET', '/v1/runs', key.key)).body).toMatchObject({ code: 'E_UNAUTHORIZED' });
    expect(KeySchema.parse((await call('POST', `/v1/keys/${key.id}/revoke`, acmeAdmin.key)).body).revokedAt).toBe(revoked.revokedAt);
    expect((await call('POST', `/v1/keys/${key.id}/rotate`, acmeAdmin.key, {})).body).toMatchObject({ code: 'E_CONFLICT' });
    expect((await call('POST', '/v1/keys/no-such-key/revoke', acmeAdmin.key, {})).body).toMatchObject({ code: 'E_NOT_FOUND' });
  });

  it('refuses an expired key with 401 E_UNAUTHORIZED and lists it expired', async () => {
    const key = await createKey(acmeAdmin.key, { scopes: ['runs:read'], expiresAt: new Date(Date.now() + 1_500).toISOString() });
    expect((await call('GET', '/v1/runs', key.key)).status).toBe(200);
    await new Promise((resolve) => setTimeout(resolve, 1_600));
    expect((await call('GET', '/v1/runs', key.key)).body).toMatchObject({ code: 'E_UNAUTHORIZED' });
    const listed = KeyListSchema.parse((await call('GET', '/v1/keys', acmeAdmin.key)).body).items.find((k) => k.id === key.id);
    expect(listed).toMatchObject({ status: 'expired', expiresAt: key.expiresAt });
  });

  it('refuses bad input with E_INPUT and creates nothing', async () => {
    const [before] = await sql<{ n: string }>('SELECT count(*) AS n FROM api_keys');
    for (const body of [
      {},
      { scopes: [] },
      { scopes: ['root'] },
      { scopes: ['runs:read', 'runs:read'] },
      { scopes: ['runs:read'], expiresAt: '2020-01-01T00:00:00.000Z' },
      { scopes: ['runs:read'], expiresAt: 'tomorrow' },
      { scopes: ['runs:read'], secret: 'mine' },
      { scopes: ['runs:read'], tenant: 'Bad Tenant' },
    ]) {
      const answer = await call('POST', '/v1/keys', acmeAdmin.key, body);
      expect(answer.status, JSON.stringify(body)).toBe(400);
      expect(answer.body).toMatchObject({ code: 'E_INPUT' });
    }
    const [after] = await sql<{ n: string }>('SELECT count(*) AS n FROM api_keys');
    expect(after!.n).toBe(before!.n);
  });

  it('takes many acts at once (more than the connection pool holds) without one waiting on another', async () => {
    const started = Date.now();
    const created = await Promise.all(Array.from({ length: 16 }, () => createKey(acmeAdmin.key, { scopes: ['runs:read'] })));
    expect(new Set(created.map((k) => k.id)).size).toBe(16);
    expect(Date.now() - started).toBeLessThan(20_000);
    const listed = KeyListSchema.parse((await call('GET', '/v1/keys', acmeAdmin.key)).body).items.map((k) => k.id);
    expect(listed).toEqual(expect.arrayContaining(created.map((k) => k.id)));
  });

  it('makes a retry safe with an Idempotency-Key: the same request names the same key, another body is 422', async () => {
    const idem = uniqueName('idem');
    const first = await createKey(acmeAdmin.key, { scopes: ['runs:read'] }, { 'idempotency-key': idem });
    const again = await call('POST', '/v1/keys', acmeAdmin.key, { scopes: ['runs:read'] }, { 'idempotency-key': idem });
    expect(again.body).toMatchObject({ code: 'E_CONFLICT', details: { id: first.id } });
    expect((await call('POST', '/v1/keys', acmeAdmin.key, { scopes: ['admin'] }, { 'idempotency-key': idem })).status).toBe(422);
  });
});

describe('the admin chain', () => {
  it("records every act of the tenant on adm_<tenant>, which verifies; a tampered copy does not", async () => {
    const key = await createKey(acmeAdmin.key, { scopes: ['approve'] });
    await call('POST', `/v1/keys/${key.id}/rotate`, acmeAdmin.key, {});
    await call('POST', `/v1/keys/${key.id}/revoke`, acmeAdmin.key, {});
    const bundle = await waitFor('the revocation projected', async () => {
      const b = await adminChain(acme, 1, acmeAdmin.key);
      return b.receipts.some((r) => r.type === 'admin.key_revoked' && keyIdOf(r) === key.id) ? b : null;
    });
    expect(bundle.receipts[0]).toMatchObject({ type: 'admin.tenant_created', tenant: acme, created_by: `key:${operatorId}` });
    const mine = bundle.receipts.filter((r) => keyIdOf(r) === key.id).map((r) => [r.type, r.causation]);
    const created = bundle.receipts.find((r) => r.type === 'admin.key_created' && keyIdOf(r) === key.id);
    expect(mine).toEqual([
      ['admin.key_created', `adm_${acme}:1`],
      ['admin.key_rotated', `adm_${acme}:${created?.seq}`],
      ['admin.key_revoked', `adm_${acme}:${created?.seq}`],
    ]);
    expect(JSON.stringify(bundle)).not.toMatch(/key_sha256|cairn_[a-z2-7]{8}_/);
    expect(verifyChain(bundle.receipts)).toMatchObject({ ok: true, chainId: `adm_${acme}` });
    const tampered = bundle.receipts.map((r) => (keyIdOf(r) === key.id && r.type === 'admin.key_created' ? { ...r, scopes: ['admin'] } : r));
    expect(verifyChain(tampered)).toMatchObject({ ok: false, firstBadSeq: created?.seq });
    const page = EventPageSchema.parse((await call('GET', `/v1/tenants/${acme}/events?after=0&limit=2`, acmeAdmin.key)).body);
    expect(page.items.map((r) => r.seq)).toEqual([1, 2]);
  });

  it('keeps table and chain in agreement across an intake outage: a pending key is refused, a retry finishes it, a revocation stands and is recorded later', async () => {
    await intake.stop();
    try {
      const idem = uniqueName('outage');
      const failed = await call('POST', '/v1/keys', acmeAdmin.key, { scopes: ['runs:read'] }, { 'idempotency-key': idem });
      expect(failed.body).toMatchObject({ code: 'E_UNAVAILABLE' });
      const pending = KeyListSchema.parse((await call('GET', '/v1/keys', acmeAdmin.key)).body).items.filter((k) => k.status === 'pending');
      expect(pending).toHaveLength(1);

      // A revocation while intake is away: refused at once, recorded once intake is back.
      const victim = (await sql<{ id: string }>(`SELECT id FROM api_keys WHERE tenant = $1 AND revoked_at IS NULL AND issued_at IS NOT NULL AND 'runs:read' = ANY(scopes) LIMIT 1`, [acme]))[0]!;
      expect((await call('POST', `/v1/keys/${victim.id}/revoke`, acmeAdmin.key, {})).body).toMatchObject({ code: 'E_UNAVAILABLE' });
      const [row] = await sql<{ revoked_at: Date | null; unrecorded: string | null }>('SELECT revoked_at, unrecorded FROM api_keys WHERE id = $1', [victim.id]);
      expect(row).toMatchObject({ unrecorded: 'revoked' });
      expect(row?.revoked_at).not.toBeNull();

      intake = startServiceProcess('intake', INTAKE_MAIN, env);
      const retried = await waitFor('intake back', async () => {
        const answer = await call('POST', '/v1/keys', acmeAdmin.key, { scopes: ['runs:read'] }, { 'idempotency-key': idem });
        return answer.status === 201 ? KeyCreatedSchema.parse(answer.body) : null;
      }, 30_000);
      expect(retried.id).toBe(pending[0]!.id);
      expect((await call('GET', '/v1/runs', retried.key)).status).toBe(200);
      await waitFor('the revocation recorded', async () => {
        const [after] = await sql<{ unrecorded: string | null }>('SELECT unrecorded FROM api_keys WHERE id = $1', [victim.id]);
        return after?.unrecorded === null ? true : null;
      }, 30_000);
      const bundle = await waitFor('both on the chain', async () => {
        const b = await adminChain(acme, 1, acmeAdmin.key);
        const revokedThere = b.receipts.some((r) => r.type === 'admin.key_revoked' && keyIdOf(r) === victim.id);
        return revokedThere && b.receipts.some((r) => keyIdOf(r) === retried.id) ? b : null;
      });
      expect(bundle.receipts.filter((r) => r.type === 'admin.key_created' && keyIdOf(r) === retried.id)).toHaveLength(1);
      expect(verifyChain(bundle.receipts)).toMatchObject({ ok: true });
    } finally {
      if (intake.child.exitCode !== null || intake.child.signalCode !== null) intake = startServiceProcess('intake', INTAKE_MAIN, env);
    }
  }, 90_000);

  it('rotates the bootstrap key; a gateway started again with its earlier secret does not register it', async () => {
    const rotated = KeyCreatedSchema.parse((await call('POST', `/v1/keys/${operatorId}/rotate`, OPERATOR_KEY, {})).body);
    expect(rotated).toMatchObject({ id: operatorId, prefix: 'keysopgw', rotations: 1 });
    expect((await call('GET', '/v1/tenants', OPERATOR_KEY)).status).toBe(401);
    expect((await call('GET', '/v1/tenants', rotated.key)).status).toBe(200);
    const lines: string[] = [];
    const again = await startGateway(config, { logger: new JsonLogger('gateway', 'debug', (line) => void lines.push(line)) });
    try {
      expect(lines.join('\n')).toContain('earlier secret of a rotated key');
      expect((await http(again.url, 'GET', '/v1/tenants', { key: OPERATOR_KEY })).status).toBe(401);
      expect((await http(again.url, 'GET', '/v1/tenants', { key: rotated.key })).status).toBe(200);
      const [row] = await sql<{ n: string }>(`SELECT count(*) AS n FROM api_keys WHERE prefix = 'keysopgw'`);
      expect(row?.n).toBe('1');
    } finally {
      await again.close();
    }
  });
});
