import 'reflect-metadata';
import { API_ROUTES, CancelAcceptedSchema, EventPageSchema, HealthSchema, ProofBundleSchema, RunListSchema, RunSchema, SubmitAcceptedSchema, WorkerListSchema, WorkerSchema } from '@cairn/contracts';
import { drainsBucketFor, loadConfig, queueBucketFor } from '@cairn/config';
import type { ApiKeyScope, Receipt, Run, RunSpec } from '@cairn/contracts';
import { verifyChain } from '@cairn/evidence';
import { EvidenceLog } from '@cairn/evidence-log';
import { bucketStreamName, LeaseStore, WorkerRegistry } from '@cairn/operational';
import { checkSchemaMatchesEntities, migrate } from '@cairn/persistence';
import { runLifecycleEvents } from '@cairn/persistence/testing';
import { JsonLogger } from '@cairn/service-kit';
import { createTestDatabase, provisionKey, revokeKey, testNatsUrl, uniqueName } from '@cairn/testing';
import type { TestDatabase } from '@cairn/testing';
import { jetstreamManager } from '@nats-io/jetstream';
import type { JetStreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import type { DataSource } from 'typeorm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGatewayDataSource } from '../src/gateway-data-source.js';
import { GatewayConfigSchema } from '../src/gateway.config.js';
import type { GatewayConfig } from '../src/gateway.config.js';
import { buildOpenApi } from '../src/openapi/openapi.builder.js';
import { RunEventStreams } from '../src/runs/run-event-streams.service.js';
import { startGateway } from '../src/start-gateway.js';
import type { RunningGateway } from '../src/start-gateway.js';
import { http, INTAKE_MAIN, openSse, PROJECTOR_MAIN, startServiceProcess, waitFor } from './gateway.harness.js';
import type { ServiceProcess } from './gateway.harness.js';

const BOOTSTRAP_KEY = `cairn_boot2e2e_${'Q'.repeat(43)}`;
const SPEC: RunSpec = { name: 'hello', steps: [{ argv: ['echo', 'hello'] }] };

let db: TestDatabase;
let config: GatewayConfig;
let gateway: RunningGateway;
let base: string;
let nc: NatsConnection;
let jsm: JetStreamManager;
let log: EvidenceLog;
let keysDb: DataSource;
const services: ServiceProcess[] = [];
const logLines: string[] = [];
const keys = { writer: '', reader: '', other: '', expired: '', revoked: '' };

function spec(name: string): RunSpec {
  return { ...SPEC, name };
}

async function submit(key: string, body: unknown, idempotencyKey: string = uniqueName('idem')) {
  return http(base, 'POST', '/v1/runs', { key, body, headers: { 'idempotency-key': idempotencyKey } });
}

/** Submits and returns the run id (the gateway waits for the projection before answering). */
async function newRun(name = uniqueName('run'), key = keys.writer): Promise<string> {
  const answer = await submit(key, spec(name));
  expect(answer.status, answer.text).toBe(202);
  return SubmitAcceptedSchema.parse(answer.body).runId;
}

async function getRun(runId: string, key = keys.writer): Promise<Run> {
  const answer = await http(base, 'GET', `/v1/runs/${runId}`, { key });
  expect(answer.status, answer.text).toBe(200);
  return RunSchema.parse(answer.body);
}

async function commandStreamLastSeq(): Promise<number> {
  return (await jsm.streams.info(config.CAIRN_COMMAND_STREAM)).state.last_seq;
}

/** Appends the rest of a run's lifecycle (after run.submitted) up to and including `untilType`. */
async function appendLifecycle(runId: string, tenant: string, fromIndex: number, toIndex: number): Promise<void> {
  const events = runLifecycleEvents(runId, 2, 3);
  for (let i = fromIndex; i < toIndex; i++) {
    const event = events[i]!;
    await log.append(runId, { type: event.type, actor: event.actor, tenant, causation: `${runId}:${i}`, key: String(i), fields: event.fields });
  }
}

async function waitForEventCount(runId: string, count: number, key = keys.writer): Promise<Run> {
  return waitFor(`run ${runId} projected with ${count} events`, async () => {
    const run = await getRun(runId, key);
    return run.eventCount >= count ? run : null;
  });
}

beforeAll(async () => {
  db = await createTestDatabase('gateway_e2e');
  await migrate(db.url);
  const env = {
    CAIRN_NATS_URL: testNatsUrl(),
    CAIRN_DATABASE_URL: db.url,
    CAIRN_EVIDENCE_STREAM: uniqueName('GW_EVIDENCE').toUpperCase(),
    CAIRN_EVIDENCE_SUBJECT_PREFIX: uniqueName('gw_ev').toLowerCase(),
    CAIRN_COMMAND_STREAM: uniqueName('GW_COMMANDS').toUpperCase(),
    CAIRN_COMMAND_SUBJECT_PREFIX: uniqueName('gw_cmd').toLowerCase(),
    CAIRN_WORKERS_BUCKET: uniqueName('gw_workers'),
    CAIRN_LEASES_BUCKET: uniqueName('gw_leases'),
  };
  config = loadConfig(GatewayConfigSchema, {
    ...env,
    CAIRN_GATEWAY_PORT: '0',
    CAIRN_API_KEY: BOOTSTRAP_KEY,
    CAIRN_GATEWAY_SSE_HEARTBEAT_MS: '300',
  });
  nc = await connect({ servers: testNatsUrl() });
  jsm = await jetstreamManager(nc);
  log = await EvidenceLog.fromConnection(nc, { servers: testNatsUrl(), stream: env.CAIRN_EVIDENCE_STREAM, subjectPrefix: env.CAIRN_EVIDENCE_SUBJECT_PREFIX });

  services.push(startServiceProcess('intake', INTAKE_MAIN, env), startServiceProcess('projector', PROJECTOR_MAIN, env));
  gateway = await startGateway(config, { logger: new JsonLogger('gateway', 'debug', (line) => logLines.push(line)) });
  base = gateway.url;

  keysDb = createGatewayDataSource(db.url, 2);
  await keysDb.initialize();
  // Test keys are made as the product makes them: through POST /v1/keys with the operator's key.
  const mint = async (tenant: string, scopes: ApiKeyScope[], expiresAt?: string) => provisionKey(base, BOOTSTRAP_KEY, { tenant, scopes, ...(expiresAt === undefined ? {} : { expiresAt }) });
  keys.writer = (await mint('acme', ['runs:read', 'runs:write'])).key;
  // Far enough ahead that a loaded machine still makes it before it passes; asked after the first
  // mint, which pays the gateway's first request (and made it late under load).
  const expiresAt = Date.now() + 5_000;
  const expiring = mint('acme', ['runs:read'], new Date(expiresAt).toISOString());
  keys.reader = (await mint('acme', ['runs:read'])).key;
  keys.other = (await mint('globex', ['runs:read', 'runs:write'])).key;
  const revoked = await mint('acme', ['runs:read']);
  await revokeKey(base, BOOTSTRAP_KEY, revoked.id);
  keys.revoked = revoked.key;
  keys.expired = (await expiring).key;
  // Until it has expired: the tests take it as expired.
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, expiresAt + 50 - Date.now())));

  // Intake serving and the projector pulling, as the gateway's health sees them.
  await waitFor('intake and projector up', async () => {
    const health = HealthSchema.parse((await http(base, 'GET', '/v1/health')).body);
    return health.checks.services.intake === 'ok' && health.checks.services.projector === 'ok';
  });
});

afterAll(async () => {
  await gateway?.close();
  await Promise.all(services.map((service) => service.stop()));
  await keysDb?.destroy();
  await log?.close();
  if (jsm !== undefined) {
    for (const stream of [config.CAIRN_EVIDENCE_STREAM, config.CAIRN_COMMAND_STREAM, ...[config.CAIRN_WORKERS_BUCKET, drainsBucketFor(config.CAIRN_WORKERS_BUCKET), config.CAIRN_LEASES_BUCKET, queueBucketFor(config.CAIRN_LEASES_BUCKET)].map(bucketStreamName)]) {
      await jsm.streams.delete(stream).catch(() => false);
    }
  }
  await nc?.close();
  await db?.drop();
});

describe('the REST gateway, end to end', () => {
  it('reports health without a key: NATS, PostgreSQL, and which services are pulling', async () => {
    const answer = await http(base, 'GET', '/v1/health');
    expect(answer.status).toBe(200);
    const health = HealthSchema.parse(answer.body);
    expect(health.checks).toMatchObject({ nats: 'ok', postgres: 'ok' });
    expect(health.checks.services).toMatchObject({ intake: 'ok', projector: 'ok', policy: 'missing', grader: 'missing' });
    expect(health.status).toBe('degraded');
  });

  it('serves its OpenAPI document without a key, and serves every route the document names', async () => {
    const answer = await http(base, 'GET', '/openapi.json');
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual(JSON.parse(JSON.stringify(buildOpenApi())));
    const fastify = gateway.app.getHttpAdapter().getInstance();
    for (const route of Object.values(API_ROUTES)) expect(fastify.hasRoute({ method: route.method, url: route.path }), `${route.method} ${route.path}`).toBe(true);
  });

  it('submits a run: 202 with its id and Location, and GET shows it', async () => {
    const answer = await submit(keys.writer, spec('first run'));
    expect(answer.status, answer.text).toBe(202);
    const accepted = SubmitAcceptedSchema.parse(answer.body);
    expect(accepted).toMatchObject({ state: 'SUBMITTED', duplicate: false });
    expect(answer.headers.get('location')).toBe(`/v1/runs/${accepted.runId}`);
    const run = await getRun(accepted.runId);
    expect(run).toMatchObject({ runId: accepted.runId, tenant: 'acme', name: 'first run', state: 'SUBMITTED', eventCount: 1, sealed: false, verdict: null, score: null });
    // The chain records who asked: the key's id, never the key.
    const events = EventPageSchema.parse((await http(base, 'GET', `/v1/runs/${accepted.runId}/events`, { key: keys.writer })).body);
    expect(events.items[0]).toMatchObject({ type: 'run.submitted', submitted_by: expect.stringMatching(/^key:[0-9a-f-]{36}$/) as unknown });
  });

  it('answers a resubmission with the same run, and the same key with another body with 422', async () => {
    const idem = uniqueName('idem');
    const first = SubmitAcceptedSchema.parse((await submit(keys.writer, spec('idempotent'), idem)).body);
    const again = await submit(keys.writer, spec('idempotent'), idem);
    expect(again.status).toBe(202);
    expect(again.body).toEqual({ runId: first.runId, state: 'SUBMITTED', duplicate: true });
    const mismatch = await submit(keys.writer, spec('something else'), idem);
    expect(mismatch.status).toBe(422);
    expect(mismatch.body).toMatchObject({ code: 'E_IDEMPOTENCY_MISMATCH' });
    // Keys are per tenant: globex's same key is a run of its own.
    const theirs = SubmitAcceptedSchema.parse((await submit(keys.other, spec('idempotent'), idem)).body);
    expect(theirs.runId).not.toBe(first.runId);
  });

  it('refuses a bad spec with 400 E_INPUT naming the field, and publishes nothing', async () => {
    const before = await commandStreamLastSeq();
    const cases: [unknown, string][] = [
      [{ name: 'no steps' }, 'steps'],
      [{ name: 'shell', steps: [{ argv: 'rm -rf /' }] }, 'steps[0].argv: argv must be an array of strings, not a shell string'],
      [{ ...SPEC, privileged: true }, 'privileged: unknown field'],
      [{ ...SPEC, caps: { memoryMiB: -1 } }, 'caps.memoryMiB'],
      [[1, 2], '(root)'],
    ];
    for (const [body, field] of cases) {
      const answer = await submit(keys.writer, body);
      expect(answer.status, JSON.stringify(body)).toBe(400);
      expect(answer.body).toMatchObject({ code: 'E_INPUT' });
      expect((answer.body as { message: string }).message).toContain(field);
    }
    expect((await http(base, 'POST', '/v1/runs', { key: keys.writer, rawBody: '{"name":', headers: { 'idempotency-key': 'k' } })).body).toMatchObject({ code: 'E_INPUT' });
    expect((await http(base, 'POST', '/v1/runs', { key: keys.writer, headers: { 'idempotency-key': 'k' } })).body).toMatchObject({ code: 'E_INPUT' });
    expect(await commandStreamLastSeq()).toBe(before);
  });

  it('requires an Idempotency-Key of printable ASCII', async () => {
    const before = await commandStreamLastSeq();
    const missing = await http(base, 'POST', '/v1/runs', { key: keys.writer, body: SPEC });
    expect(missing.status).toBe(400);
    expect(missing.body).toMatchObject({ code: 'E_INPUT', message: expect.stringContaining('Idempotency-Key') as unknown });
    expect((await submit(keys.writer, SPEC, 'x'.repeat(201))).status).toBe(400);
    expect(await commandStreamLastSeq()).toBe(before);
  });

  it('refuses a body over 1 MiB with 413 E_TOO_LARGE before parsing it', async () => {
    const before = await commandStreamLastSeq();
    const big = { ...SPEC, files: [{ path: '/work/big.txt', content: 'x'.repeat(1.5 * 1024 * 1024) }] };
    const answer = await submit(keys.writer, big);
    expect(answer.status).toBe(413);
    expect(answer.body).toMatchObject({ code: 'E_TOO_LARGE' });
    expect(await commandStreamLastSeq()).toBe(before);
  });

  it('needs a valid key: missing, forged, malformed, expired or revoked is 401', async () => {
    const forged = `cairn_${'abcdefgh'}_${'A'.repeat(43)}`;
    const bootstrapLike = `${BOOTSTRAP_KEY.slice(0, -1)}R`;
    for (const key of [null, forged, bootstrapLike, 'not-a-key', keys.expired, keys.revoked]) {
      const answer = await http(base, 'GET', '/v1/runs', { key });
      expect(answer.status, String(key)).toBe(401);
      expect(answer.body).toMatchObject({ code: 'E_UNAUTHORIZED' });
    }
    expect((await http(base, 'GET', '/v1/runs', { key: keys.expired })).body).toMatchObject({ message: 'this API key has expired' });
    expect((await http(base, 'GET', '/v1/runs', { key: keys.revoked })).body).toMatchObject({ message: 'this API key has been revoked' });
    expect((await http(base, 'GET', '/v1/runs', { headers: { authorization: `Basic ${keys.writer}` } })).status).toBe(401);
  });

  it('needs the route scope: a read-only key cannot submit or cancel (403), and workers need admin', async () => {
    const before = await commandStreamLastSeq();
    const denied = await submit(keys.reader, SPEC);
    expect(denied.status).toBe(403);
    expect(denied.body).toMatchObject({ code: 'E_FORBIDDEN', details: { scope: 'runs:write' } });
    expect((await http(base, 'POST', `/v1/runs/${uniqueName('run')}/cancel`, { key: keys.reader })).status).toBe(403);
    expect((await http(base, 'GET', '/v1/workers', { key: keys.writer })).status).toBe(403);
    expect(await commandStreamLastSeq()).toBe(before);
    expect((await http(base, 'GET', '/v1/runs', { key: keys.reader })).status).toBe(200);
  });

  it("hides another tenant's runs: 404 on every read and on cancel", async () => {
    const runId = await newRun();
    for (const path of [`/v1/runs/${runId}`, `/v1/runs/${runId}/events`, `/v1/runs/${runId}/bundle`, `/v1/runs/${runId}/events/stream`]) {
      const answer = await http(base, 'GET', path, { key: keys.other });
      expect(answer.status, path).toBe(404);
      expect(answer.body).toMatchObject({ code: 'E_NOT_FOUND' });
    }
    const cancel = await http(base, 'POST', `/v1/runs/${runId}/cancel`, { key: keys.other });
    expect(cancel.status).toBe(404);
    expect(RunListSchema.parse((await http(base, 'GET', '/v1/runs?limit=200', { key: keys.other })).body).items.map((r) => r.runId)).not.toContain(runId);
    expect((await getRun(runId)).state).toBe('SUBMITTED');
    expect((await http(base, 'GET', '/v1/runs/RUN_UPPER', { key: keys.writer })).body).toMatchObject({ code: 'E_INPUT', message: expect.stringContaining('id') as unknown });
  });

  it('lists runs newest first with an opaque cursor, filtered by state', async () => {
    const paging = (await provisionKey(base, BOOTSTRAP_KEY, { tenant: uniqueName('t').toLowerCase().replace(/[^a-z0-9_-]/g, ''), scopes: ['runs:read', 'runs:write'] })).key;
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push(await newRun(`page ${i}`, paging));
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const query: string = cursor === null ? '?limit=2' : `?limit=2&cursor=${encodeURIComponent(cursor)}`;
      const page = RunListSchema.parse((await http(base, 'GET', `/v1/runs${query}`, { key: paging })).body);
      expect(page.items.length).toBeLessThanOrEqual(2);
      seen.push(...page.items.map((r) => r.runId));
      cursor = page.nextCursor;
      pages += 1;
    } while (cursor !== null && pages < 10);
    expect(pages).toBe(3);
    expect(seen).toEqual([...ids].reverse());
    const all = RunListSchema.parse((await http(base, 'GET', '/v1/runs?state=SUBMITTED', { key: paging })).body);
    expect(all.items).toHaveLength(5);
    expect(RunListSchema.parse((await http(base, 'GET', '/v1/runs?state=SEALED', { key: paging })).body).items).toEqual([]);
    for (const bad of ['?limit=0', '?limit=201', '?state=DONE', '?cursor=garbage', '?colour=red']) {
      const answer = await http(base, 'GET', `/v1/runs${bad}`, { key: paging });
      expect(answer.status, bad).toBe(400);
      expect(answer.body).toMatchObject({ code: 'E_INPUT' });
    }
  });

  it('pages events by seq and streams them over SSE, resuming from Last-Event-ID with nothing lost or doubled', async () => {
    const runId = await newRun('streamed');
    const total = runLifecycleEvents(runId, 2, 3).length;
    await appendLifecycle(runId, 'acme', 1, 6);
    await waitForEventCount(runId, 6);

    const first = await openSse(`${base}/v1/runs/${runId}/events/stream`, keys.writer);
    expect(first.status).toBe(200);
    expect(first.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const received: Receipt[] = [];
    const ids: string[] = [];
    while (received.length < 4) {
      const message = await first.next();
      if (message === null) throw new Error('the stream ended early');
      if (message.event !== 'receipt') continue;
      ids.push(message.id!);
      received.push(JSON.parse(message.data!) as Receipt);
    }
    first.close();
    // The client went away: its stream stops polling.
    const streams = gateway.app.get(RunEventStreams);
    await waitFor('the stream to stop', () => Promise.resolve(streams.openCount === 0));

    await appendLifecycle(runId, 'acme', 6, total);
    const resumed = await openSse(`${base}/v1/runs/${runId}/events/stream?after=1`, keys.writer, { 'last-event-id': ids.at(-1)! });
    for (;;) {
      const message = await resumed.next();
      if (message === null) break;
      if (message.event !== 'receipt') continue;
      ids.push(message.id!);
      received.push(JSON.parse(message.data!) as Receipt);
    }
    expect(received.map((r) => r.seq)).toEqual(Array.from({ length: total }, (_, i) => i + 1));
    expect(ids).toEqual(received.map((r) => `${runId}:${r.seq}`));
    expect(received.at(-1)?.type).toBe('run.sealed');
    expect(verifyChain(received, { requireNonEmpty: true, chainId: runId })).toMatchObject({ ok: true, count: total });

    // Paged reads give the same receipts, exactly as stored.
    const paged: Receipt[] = [];
    let after: number | null = 0;
    while (after !== null) {
      const page = EventPageSchema.parse((await http(base, 'GET', `/v1/runs/${runId}/events?after=${after}&limit=5`, { key: keys.reader })).body);
      paged.push(...(page.items as Receipt[]));
      after = page.nextAfter;
    }
    expect(paged).toEqual(received);

    // A sealed run's stream resumed past its seal ends at once.
    const done = await openSse(`${base}/v1/runs/${runId}/events/stream`, keys.writer, { 'last-event-id': `${runId}:${total}` });
    let message = await done.next(5000);
    while (message !== null && message.event !== 'receipt') message = await done.next(5000);
    expect(message).toBeNull();
  });

  it('sends a heartbeat comment on an idle stream, and refuses a Last-Event-ID of another run', async () => {
    const runId = await newRun('idle');
    const sse = await openSse(`${base}/v1/runs/${runId}/events/stream?after=1`, keys.writer);
    let message = await sse.next(5000);
    while (message !== null && message.comment !== 'heartbeat') message = await sse.next(5000);
    expect(message?.comment).toBe('heartbeat');
    sse.close();
    const wrong = await http(base, 'GET', `/v1/runs/${runId}/events/stream`, { key: keys.writer, headers: { 'last-event-id': 'run_other:3' } });
    expect(wrong.status).toBe(400);
    expect(wrong.body).toMatchObject({ code: 'E_INPUT' });
  });

  it('exports a proof bundle that verifies offline', async () => {
    const runId = await newRun('bundled');
    const total = runLifecycleEvents(runId, 2, 3).length;
    await appendLifecycle(runId, 'acme', 1, total);
    const run = await waitForEventCount(runId, total);
    expect(run).toMatchObject({ state: 'SEALED', sealed: true, verdict: 'SUPPORTS', score: 3, maxScore: 5 });
    const answer = await http(base, 'GET', `/v1/runs/${runId}/bundle`, { key: keys.reader });
    expect(answer.status).toBe(200);
    const bundle = ProofBundleSchema.parse(answer.body);
    expect(bundle).toMatchObject({ format: 'cairn.bundle/v1', runId, verdict: 'SUPPORTS', grade: { score: 3, maxScore: 5, upperBound: 3 }, headHash: run.headHash });
    expect(bundle.artifacts).toMatchObject({ 'steps[0].stdout': 'd'.repeat(64), '/out/report.txt': '7'.repeat(64) });
    expect(verifyChain(bundle.receipts, { requireNonEmpty: true, chainId: runId })).toMatchObject({ ok: true, count: total, headHash: run.headHash });
    // Tampering shows.
    const tampered = bundle.receipts.map((r, i) => (i === 3 ? { ...r, actor: 'mallory' } : r));
    expect(verifyChain(tampered)).toMatchObject({ ok: false, code: 'E_CHAIN_BROKEN', firstBadSeq: 4 });
  });

  it('cancels a live run (202), and refuses a sealed run (409 E_SEALED) and one that ended otherwise (409 E_CONFLICT)', async () => {
    const live = await newRun('to cancel');
    const cancelled = await http(base, 'POST', `/v1/runs/${live}/cancel`, { key: keys.writer, body: { reason: 'no longer needed' } });
    expect(cancelled.status, cancelled.text).toBe(202);
    expect(CancelAcceptedSchema.parse(cancelled.body)).toEqual({ runId: live, state: 'CANCELLED' });
    expect((await waitForEventCount(live, 2)).state).toBe('CANCELLED');
    expect((await http(base, 'POST', `/v1/runs/${live}/cancel`, { key: keys.writer })).status).toBe(202);

    const sealed = await newRun('sealed');
    const total = runLifecycleEvents(sealed, 2, 3).length;
    await appendLifecycle(sealed, 'acme', 1, total);
    await waitForEventCount(sealed, total);
    const refused = await http(base, 'POST', `/v1/runs/${sealed}/cancel`, { key: keys.writer });
    expect(refused.status).toBe(409);
    expect(refused.body).toMatchObject({ code: 'E_SEALED' });

    const failed = await newRun('failed');
    await log.append(failed, { type: 'run.failed', actor: 'scheduler', tenant: 'acme', causation: `${failed}:1`, fields: { error_code: 'E_WORKER_LOST', message: 'the worker went away' } });
    expect((await waitForEventCount(failed, 2)).state).toBe('FAILED');
    const conflict = await http(base, 'POST', `/v1/runs/${failed}/cancel`, { key: keys.writer });
    expect(conflict.status).toBe(409);
    expect(conflict.body).toMatchObject({ code: 'E_CONFLICT' });
    expect((await http(base, 'POST', `/v1/runs/${live}/cancel`, { key: keys.writer, body: { colour: 'red' } })).status).toBe(400);
  });

  it('lists the registered workers to an admin key, what they hold counted from their leases', async () => {
    const registry = await WorkerRegistry.open(nc, { bucket: config.CAIRN_WORKERS_BUCKET });
    const leases = await LeaseStore.open(nc, { bucket: config.CAIRN_LEASES_BUCKET });
    const now = Date.now();
    const held = { runId: 'run_x1', memoryMiB: 512, cpus: 1, diskMiB: 256, pids: 64 };
    await leases.put({
      lease_id: 'lease_x1',
      run_id: 'run_x1',
      worker_id: 'w-e2e',
      attempt: 1,
      granted_at: new Date(now).toISOString(),
      expires_at: new Date(now + 600_000).toISOString(),
      reservation: held,
    });
    await registry.register({
      workerId: 'w-e2e',
      capacity: { slots: 4, memoryMiB: 8192, cpus: 2, diskMiB: 10_240 },
      isolation: ['docker'],
      draining: false,
      healthy: true,
      lastHeartbeatAt: now,
      // run_x2 has no lease: what a worker reports without one holds nothing (ADR 0015).
      inFlight: [held, { runId: 'run_x2', memoryMiB: 1024, cpus: 1, diskMiB: 256 }],
      images: { 'cairn/sandbox:1': `sha256:${'a'.repeat(64)}` },
    });
    const answer = await http(base, 'GET', '/v1/workers', { key: BOOTSTRAP_KEY });
    const asked = Date.now();
    expect(answer.status).toBe(200);
    const listed = WorkerListSchema.parse(answer.body).items;
    // The gateway's own clock: when it first saw this heartbeat (ADR 0033), never the time the worker wrote.
    const seenAt = Date.parse(listed[0]?.lastHeartbeatAt ?? '');
    expect(seenAt).toBeGreaterThanOrEqual(now);
    expect(seenAt).toBeLessThanOrEqual(asked);
    expect(listed).toEqual([
      {
        workerId: 'w-e2e',
        status: 'eligible',
        healthy: true,
        draining: false,
        drain: null,
        slots: 4,
        inFlight: 1,
        runs: 1,
        sandboxes: 0,
        capacity: { slots: 4, memoryMiB: 8192, cpus: 2, diskMiB: 10_240 },
        reserved: { slots: 1, memoryMiB: 512, cpus: 1, diskMiB: 256, pids: 64 },
        lastHeartbeatAt: new Date(seenAt).toISOString(),
        images: { 'cairn/sandbox:1': `sha256:${'a'.repeat(64)}` },
      },
    ]);

    // A drain is the operator's: another tenant's admin key may not; a bad id is E_INPUT, an unknown one E_NOT_FOUND.
    const tenantAdmin = (await provisionKey(base, BOOTSTRAP_KEY, { tenant: 'acme', scopes: ['admin'] })).key;
    expect((await http(base, 'POST', '/v1/workers/w-e2e/drain', { key: tenantAdmin })).body).toMatchObject({ code: 'E_FORBIDDEN' });
    expect((await http(base, 'POST', '/v1/workers/w-e2e/drain', { key: keys.writer })).status).toBe(403);
    expect((await http(base, 'POST', '/v1/workers/bad%20id/drain', { key: BOOTSTRAP_KEY })).body).toMatchObject({ code: 'E_INPUT' });
    expect((await http(base, 'POST', '/v1/workers/w-ghost/drain', { key: BOOTSTRAP_KEY })).body).toMatchObject({ code: 'E_NOT_FOUND' });
    expect((await http(base, 'DELETE', '/v1/workers/w-ghost/drain', { key: BOOTSTRAP_KEY })).body).toMatchObject({ code: 'E_NOT_FOUND' });
    const drained = await http(base, 'POST', '/v1/workers/w-e2e/drain', { key: BOOTSTRAP_KEY });
    expect(drained.status).toBe(200);
    expect(WorkerSchema.parse(drained.body)).toMatchObject({ workerId: 'w-e2e', status: 'draining', draining: true, drain: { by: expect.stringMatching(/^key:/) as unknown }, runs: 1 });
    // The worker's own record says nothing of it (a heartbeat or a restart rewrites it): the listing still shows the drain.
    await registry.heartbeat({ ...(await registry.get('w-e2e'))!, lastHeartbeatAt: Date.now() });
    expect(WorkerListSchema.parse((await http(base, 'GET', '/v1/workers', { key: BOOTSTRAP_KEY })).body).items[0]).toMatchObject({ status: 'draining', draining: true });
    const undrained = await http(base, 'DELETE', '/v1/workers/w-e2e/drain', { key: BOOTSTRAP_KEY });
    expect(undrained.status).toBe(200);
    expect(WorkerSchema.parse(undrained.body)).toMatchObject({ status: 'eligible', draining: false, drain: null });
    await leases.delete('run_x1');
  });

  it('keeps keys out of the database and the logs: only hashes are stored, the bootstrap key works as admin of tenant default', async () => {
    expect((await http(base, 'GET', '/v1/runs', { key: BOOTSTRAP_KEY })).status).toBe(200);
    const rows = await keysDb.query<{ row: string }[]>(`SELECT row_to_json(k)::text AS row FROM api_keys k`);
    expect(rows.length).toBeGreaterThanOrEqual(6);
    const everything = [...rows.map((r) => r.row), ...logLines].join('\n');
    for (const key of [BOOTSTRAP_KEY, ...Object.values(keys)]) {
      expect(everything).not.toContain(key);
      expect(everything).not.toContain(key.slice(15));
    }
    expect(await checkSchemaMatchesEntities(keysDb)).toEqual({ matches: true, differences: [] });
    const [boot] = await keysDb.query<{ tenant: string; scopes: string[] }[]>(`SELECT tenant, scopes FROM api_keys WHERE prefix = 'boot2e2e'`);
    expect(boot).toEqual({ tenant: 'default', scopes: ['admin'] });
  });

  it('bounds open streams (429 E_RATE_LIMITED past the limit) and ends them when it stops', async () => {
    const runId = await newRun('bounded');
    const second = await startGateway({ ...config, CAIRN_GATEWAY_MAX_STREAMS: 1, CAIRN_API_KEY: undefined }, { logger: new JsonLogger('gateway', 'debug', (line) => logLines.push(line)) });
    let stopped = false;
    try {
      const open = await openSse(`${second.url}/v1/runs/${runId}/events/stream`, keys.writer);
      expect(open.status).toBe(200);
      const refused = await http(second.url, 'GET', `/v1/runs/${runId}/events/stream`, { key: keys.writer });
      expect(refused.status).toBe(429);
      expect(refused.body).toMatchObject({ code: 'E_RATE_LIMITED' });
      // The first gateway is another process's worth of state: unaffected.
      expect((await http(base, 'GET', `/v1/runs/${runId}`, { key: keys.writer })).status).toBe(200);
      const started = Date.now();
      await second.close();
      stopped = true;
      expect(Date.now() - started).toBeLessThan(5000);
      let message = await open.next(5000);
      while (message !== null) message = await open.next(5000);
      expect(message).toBeNull();
    } finally {
      if (!stopped) await second.close();
    }
  });

  it('answers unknown routes with the error shape', async () => {
    const answer = await http(base, 'GET', '/v2/nothing', { key: keys.writer });
    expect(answer.status).toBe(404);
    expect(answer.body).toMatchObject({ code: 'E_NOT_FOUND' });
  });
});
