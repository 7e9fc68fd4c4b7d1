import 'reflect-metadata';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '@cairn/config';
import { bucketStreamName } from '@cairn/operational';
import { migrate } from '@cairn/persistence';
import { DEFAULT_POLICY, parsePolicy, policyVersion } from '@cairn/policy';
import { JsonLogger } from '@cairn/service-kit';
import { createTestDatabase, provisionKey, testNatsUrl, uniqueName } from '@cairn/testing';
import type { TestDatabase } from '@cairn/testing';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import type { DataSource } from 'typeorm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGatewayDataSource } from '../src/gateway-data-source.js';
import { GatewayConfigSchema } from '../src/gateway.config.js';
import type { GatewayConfig } from '../src/gateway.config.js';
import { RunListSchema } from '../src/http/api.schemas.js';
import { PolicyInForceSchema } from '../src/policy/policy.schemas.js';
import { startGateway } from '../src/start-gateway.js';
import type { RunningGateway } from '../src/start-gateway.js';
import { http, startIntakeFor } from './gateway.harness.js';
import type { ServiceProcess } from './gateway.harness.js';

/*
 * What the gateway adds for the admin dashboard, through a real gateway on the real NATS and
 * PostgreSQL: the dashboard's static files (content types, caching, CSP, the SPA's paths), the
 * policy in force (`GET /v1/policy`), and the runs list's time window. The projections are written
 * directly here (the gateway only reads them), so times and decisions are exact.
 */

const POLICY = { ...JSON.parse(JSON.stringify(DEFAULT_POLICY)), budgets: { runsPerJob: 3, jobMinutes: 30, outputBytesPerStep: 4096 } } as Record<string, unknown>;
const JS = 'assets/index-Ab12Cd34.js';

let db: TestDatabase;
let dir: string;
let policyFile: string;
let config: GatewayConfig;
let gateway: RunningGateway;
let base: string;
let keysDb: DataSource;
let intake: ServiceProcess;
/** The operator's key (CAIRN_API_KEY): it mints the test keys. */
const OPERATOR_KEY = `cairn_dashopgw_${'D'.repeat(43)}`;
const keys = { reader: '', other: '', secretsOnly: '' };

/** A run row as the projector writes it, and optionally its policy.decided receipt. */
async function projectRun(runId: string, tenant: string, createdAt: string, decidedVersion?: string): Promise<void> {
  await keysDb.query(
    `INSERT INTO runs (run_id, tenant, name, state, created_at, updated_at, last_seq, head_hash, event_count, sealed, last_stream_seq)
     VALUES ($1, $2, $1, 'SUBMITTED', $3, $3, 1, $4, 1, false, 1)`,
    [runId, tenant, createdAt, 'a'.repeat(64)],
  );
  if (decidedVersion === undefined) return;
  const receipt = { v: 1, seq: 2, run_id: runId, tenant, type: 'policy.decided', actor: 'policy', ts: createdAt, causation: `${runId}:1`, decision: 'allow', policy_version: decidedVersion, reasons: [], prev_hash: 'a'.repeat(64), hash: 'b'.repeat(64) };
  await keysDb.query(
    `INSERT INTO evidence_events (stream_seq, chain_id, seq, type, tenant, actor, ts, causation, prev_hash, hash, receipt)
     VALUES ((SELECT coalesce(max(stream_seq), 0) + 1 FROM evidence_events), $1, 2, 'policy.decided', $2, 'policy', $3, $4, $5, $6, $7::jsonb)`,
    [runId, tenant, createdAt, `${runId}:1`, receipt.prev_hash, receipt.hash, JSON.stringify(receipt)],
  );
}

beforeAll(async () => {
  db = await createTestDatabase('gateway_dashboard_e2e');
  await migrate(db.url);
  dir = await mkdtemp(join(tmpdir(), 'cairn-gateway-dashboard-'));
  await mkdir(join(dir, 'build', 'assets'), { recursive: true });
  await writeFile(join(dir, 'build', 'index.html'), `<!doctype html><title>Cairn</title><script type="module" src="/dashboard/${JS}"></script>`);
  await writeFile(join(dir, 'build', JS), 'export const dashboard = true;');
  policyFile = join(dir, 'policy.json');
  await writeFile(policyFile, JSON.stringify(POLICY, null, 2));
  config = loadConfig(GatewayConfigSchema, {
    CAIRN_NATS_URL: testNatsUrl(),
    CAIRN_DATABASE_URL: db.url,
    CAIRN_EVIDENCE_STREAM: uniqueName('GWD_EVIDENCE').toUpperCase(),
    CAIRN_EVIDENCE_SUBJECT_PREFIX: uniqueName('gwd_ev').toLowerCase(),
    CAIRN_COMMAND_STREAM: uniqueName('GWD_COMMANDS').toUpperCase(),
    CAIRN_COMMAND_SUBJECT_PREFIX: uniqueName('gwd_cmd').toLowerCase(),
    CAIRN_WORKERS_BUCKET: uniqueName('gwd_workers'),
    CAIRN_LEASES_BUCKET: uniqueName('gwd_leases'),
    CAIRN_GATEWAY_PORT: '0',
    CAIRN_DASHBOARD_DIR: join(dir, 'build'),
    CAIRN_POLICY_FILE: policyFile,
    CAIRN_API_KEY: OPERATOR_KEY,
  });
  gateway = await startGateway(config, { logger: new JsonLogger('gateway', 'warn', () => undefined) });
  base = gateway.url;
  keysDb = createGatewayDataSource(db.url, 2);
  await keysDb.initialize();
  // Test keys are made as the product makes them: through POST /v1/keys, recorded by intake.
  intake = startIntakeFor(config);
  keys.reader = (await provisionKey(base, OPERATOR_KEY, { tenant: 'acme', scopes: ['runs:read'] })).key;
  keys.other = (await provisionKey(base, OPERATOR_KEY, { tenant: 'globex', scopes: ['runs:read'] })).key;
  keys.secretsOnly = (await provisionKey(base, OPERATOR_KEY, { tenant: 'acme', scopes: ['secrets:write'] })).key;
});

afterAll(async () => {
  await gateway?.close();
  await intake?.stop();
  await keysDb?.destroy();
  const nc = await connect({ servers: testNatsUrl() });
  try {
    const jsm = await jetstreamManager(nc);
    for (const stream of [config.CAIRN_EVIDENCE_STREAM, config.CAIRN_COMMAND_STREAM, bucketStreamName(config.CAIRN_WORKERS_BUCKET)]) await jsm.streams.delete(stream).catch(() => false);
  } finally {
    await nc.close();
  }
  await db?.drop();
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
});

describe('the dashboard, served by the gateway', () => {
  it('sends / and /dashboard to /dashboard/', async () => {
    const root = await fetch(`${base}/`, { redirect: 'manual' });
    expect(root.status).toBe(302);
    expect(root.headers.get('location')).toBe('/dashboard/');
    const bare = await fetch(`${base}/dashboard`, { redirect: 'manual' });
    expect(bare.status).toBe(301);
    expect(bare.headers.get('location')).toBe('/dashboard/');
  });

  it("serves index.html for the app's own paths, revalidated each time, under a strict CSP, without a key", async () => {
    for (const path of ['/dashboard/', '/dashboard/runs', '/dashboard/runs/run_abc?state=SEALED', '/dashboard/approvals']) {
      const answer = await http(base, 'GET', path);
      expect(answer.status, path).toBe(200);
      expect(answer.headers.get('content-type')).toBe('text/html; charset=utf-8');
      expect(answer.headers.get('cache-control')).toBe('no-cache');
      expect(answer.headers.get('content-security-policy')).toMatch(/default-src 'none'; script-src 'self'; style-src 'self'.*connect-src 'self'.*frame-ancestors 'none'/);
      expect(answer.headers.get('x-content-type-options')).toBe('nosniff');
      expect(answer.headers.get('referrer-policy')).toBe('no-referrer');
      expect(answer.text).toContain(`/dashboard/${JS}`);
    }
  });

  it('serves hashed assets with their type and immutable caching; a missing file is 404, not the page', async () => {
    const asset = await http(base, 'GET', `/dashboard/${JS}`);
    expect(asset.status).toBe(200);
    expect(asset.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    expect(asset.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    expect(asset.text).toBe('export const dashboard = true;');
    for (const path of ['/dashboard/assets/index-Zz99Yy88.js', '/dashboard/favicon.ico']) {
      const missing = await http(base, 'GET', path);
      expect(missing.status, path).toBe(404);
      expect(missing.body).toMatchObject({ code: 'E_NOT_FOUND' });
    }
    // A path that does not even decode is the request's fault.
    const malformed = await http(base, 'GET', '/dashboard/%E0%A4%A.js');
    expect(malformed.status).toBe(400);
    expect(malformed.body).toMatchObject({ code: 'E_INPUT' });
  });

  it('reads only its build: encoded traversal reaches no file outside it', async () => {
    for (const path of ['/dashboard/..%2fpolicy.json', '/dashboard/%2e%2e/policy.json', '/dashboard/assets/..%2f..%2fpolicy.json']) {
      const answer = await http(base, 'GET', path);
      expect(answer.text, path).not.toContain('runsPerJob');
      expect([200, 404], path).toContain(answer.status);
    }
  });

  it('leaves the API as it was: /v1 routes still need a key and answer JSON', async () => {
    const answer = await http(base, 'GET', '/v1/runs');
    expect(answer.status).toBe(401);
    expect(answer.body).toMatchObject({ code: 'E_UNAUTHORIZED' });
    expect(answer.headers.get('content-security-policy')).toBeNull();
  });
});

describe('GET /v1/policy', () => {
  it("answers the file's policy with its version, and the version the tenant's newest decision named", async () => {
    const version = policyVersion(parsePolicy(POLICY));
    const before = PolicyInForceSchema.parse((await http(base, 'GET', '/v1/policy', { key: keys.reader })).body);
    expect(before).toEqual({ version, source: 'file', policy: parsePolicy(POLICY), lastDecision: null });

    await projectRun('run_policy_old', 'acme', '2026-01-01T00:00:00.000Z', 'c'.repeat(64));
    await projectRun('run_policy_new', 'acme', '2026-01-02T00:00:00.000Z', version);
    await projectRun('run_policy_undecided', 'acme', '2026-01-03T00:00:00.000Z');
    await projectRun('run_policy_globex', 'globex', '2026-01-04T00:00:00.000Z', 'd'.repeat(64));
    const after = PolicyInForceSchema.parse((await http(base, 'GET', '/v1/policy', { key: keys.reader })).body);
    expect(after.lastDecision).toEqual({ version, runId: 'run_policy_new', at: '2026-01-02T00:00:00.000Z' });
    // Another tenant sees its own decisions only.
    const other = PolicyInForceSchema.parse((await http(base, 'GET', '/v1/policy', { key: keys.other })).body);
    expect(other.lastDecision).toEqual({ version: 'd'.repeat(64), runId: 'run_policy_globex', at: '2026-01-04T00:00:00.000Z' });
  });

  it('reads the file as it is now: an edit shows, a broken file is 503 E_UNAVAILABLE naming the variable', async () => {
    const edited = { ...POLICY, defaultImage: 'cairn/sandbox-debian:1' };
    await writeFile(policyFile, JSON.stringify(edited));
    const answer = PolicyInForceSchema.parse((await http(base, 'GET', '/v1/policy', { key: keys.reader })).body);
    expect(answer.version).toBe(policyVersion(parsePolicy(edited)));
    await writeFile(policyFile, '{"version": 2}');
    const broken = await http(base, 'GET', '/v1/policy', { key: keys.reader });
    expect(broken.status).toBe(503);
    expect(broken.body).toMatchObject({ code: 'E_UNAVAILABLE' });
    expect(String((broken.body as { message: string }).message)).toContain('CAIRN_POLICY_FILE');
    await writeFile(policyFile, JSON.stringify(POLICY));
  });

  it('needs a key with runs:read', async () => {
    expect((await http(base, 'GET', '/v1/policy')).status).toBe(401);
    const forbidden = await http(base, 'GET', '/v1/policy', { key: keys.secretsOnly });
    expect(forbidden.status).toBe(403);
    expect(forbidden.body).toMatchObject({ code: 'E_FORBIDDEN' });
  });
});

describe('GET /v1/runs: a window on creation time', () => {
  it('keeps runs created at or after createdAfter and before createdBefore, pages within the window, and stays in the tenant', async () => {
    const tenant = uniqueName('w').toLowerCase();
    const key = (await provisionKey(base, OPERATOR_KEY, { tenant, scopes: ['runs:read'] })).key;
    const times = ['2026-03-01T10:00:00.000Z', '2026-03-01T11:00:00.000Z', '2026-03-01T12:00:00.000Z', '2026-03-01T13:00:00.000Z'];
    for (const [i, time] of times.entries()) await projectRun(`run_window_${tenant.replace(/[^a-z0-9]/g, '')}_${i}`, tenant, time);
    await projectRun(`run_window_other_${tenant.replace(/[^a-z0-9]/g, '')}`, 'acme', '2026-03-01T11:30:00.000Z');
    const list = async (query: string) => RunListSchema.parse((await http(base, 'GET', `/v1/runs?${query}`, { key })).body);

    const window = await list('createdAfter=2026-03-01T11:00:00.000Z&createdBefore=2026-03-01T13:00:00.000Z');
    expect(window.items.map((run) => run.createdAt)).toEqual([times[2], times[1]]);
    expect((await list('createdAfter=2026-03-01T12:00:00.001Z')).items.map((run) => run.createdAt)).toEqual([times[3]]);
    expect((await list('createdBefore=2026-03-01T10:00:00.000Z')).items).toEqual([]);
    const first = await list('limit=1&createdAfter=2026-03-01T10:30:00.000Z');
    expect(first.items.map((run) => run.createdAt)).toEqual([times[3]]);
    const second = await list(`limit=1&createdAfter=2026-03-01T10:30:00.000Z&cursor=${encodeURIComponent(first.nextCursor ?? '')}`);
    expect(second.items.map((run) => run.createdAt)).toEqual([times[2]]);
  });

  it('refuses an instant that is not one with 400 E_INPUT naming the field', async () => {
    for (const bad of ['createdAfter=yesterday', 'createdAfter=2026-13-01T00:00:00.000Z', 'createdBefore=2026-02-30T00:00:00.000Z', 'createdBefore=2026-03-01T00:00:00Z']) {
      const answer = await http(base, 'GET', `/v1/runs?${bad}`, { key: keys.reader });
      expect(answer.status, bad).toBe(400);
      expect(answer.body, bad).toMatchObject({ code: 'E_INPUT' });
      expect(answer.text, bad).toContain(bad.split('=')[0]);
    }
  });
});
