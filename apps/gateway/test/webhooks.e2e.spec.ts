import 'reflect-metadata';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '@cairn/config';
import { bucketStreamName } from '@cairn/operational';
import { migrate } from '@cairn/persistence';
import { formatSecretKeyring, generateSecretKey } from '@cairn/secrets';
import { JsonLogger } from '@cairn/service-kit';
import { createTestDatabase, provisionKey, testNatsUrl, uniqueName } from '@cairn/testing';
import type { TestDatabase } from '@cairn/testing';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GatewayConfigSchema } from '../src/gateway.config.js';
import type { GatewayConfig } from '../src/gateway.config.js';
import { startGateway } from '../src/start-gateway.js';
import type { RunningGateway } from '../src/start-gateway.js';
import { startIntakeFor, startWebhooksFor, untilServing } from './gateway.harness.js';
import type { ServiceProcess } from './gateway.harness.js';

/*
 * The webhook routes on an in-process gateway and a webhooks service process (built: `npm run
 * build`), which registers and deletes by command (docs/adr/0027): register (the secret shown once,
 * stored sealed, sent on NATS only sealed), list, delete, the delivery log and replay, per tenant
 * (another tenant's webhook is 404), the admin scope, and URLs refused against SSRF with E_INPUT
 * before any connection — the operator's CAIRN_WEBHOOKS_ALLOW_PRIVATE is unset. Nothing is ever
 * sent: no receipt matches a registered filter, and the webhooks service is stopped before the one
 * delivery a test queues (and never started again).
 */

const BOOTSTRAP_KEY = `cairn_webhookg_${'W'.repeat(43)}`;
/** A public address literal: accepted, never resolved, never contacted (no webhooks service runs). */
const PUBLIC_URL = 'https://93.184.215.14/cairn-hook';

let db: TestDatabase;
let dir: string;
let keyFile = '';
let config: GatewayConfig;
let gateway: RunningGateway;
let intake: ServiceProcess;
let webhooks: ServiceProcess | null = null;
/** What the stopped webhooks services printed, to search for a secret. */
const webhooksOutput: string[] = [];
const logLines: string[] = [];
const keys = { acme: '', globex: '', runsOnly: '' };

interface Answer {
  status: number;
  text: string;
  body: Record<string, unknown> | null;
}

async function call(method: string, path: string, options: { key?: string; json?: unknown } = {}): Promise<Answer> {
  const headers: Record<string, string> = { authorization: `Bearer ${options.key ?? keys.acme}` };
  if (options.json !== undefined) headers['content-type'] = 'application/json';
  const response = await fetch(`${gateway.url}${path}`, { method, headers, ...(options.json === undefined ? {} : { body: JSON.stringify(options.json) }) });
  const text = await response.text();
  let body: Record<string, unknown> | null = null;
  try {
    body = JSON.parse(text) as Record<string, unknown>;
  } catch {
    body = null;
  }
  return { status: response.status, text, body };
}

async function count(sql: string): Promise<number> {
  const client = new pg.Client({ connectionString: db.url });
  await client.connect();
  try {
    return Number((await client.query<{ n: string }>(sql)).rows[0]?.n ?? -1);
  } finally {
    await client.end();
  }
}

beforeAll(async () => {
  delete process.env.CAIRN_WEBHOOKS_ALLOW_PRIVATE;
  db = await createTestDatabase('gateway_webhooks');
  await migrate(db.url);
  dir = await mkdtemp(join(tmpdir(), 'cairn-gateway-webhooks-'));
  keyFile = join(dir, 'secrets.key');
  await writeFile(keyFile, formatSecretKeyring([generateSecretKey()]), { mode: 0o600 });
  config = loadConfig(GatewayConfigSchema, {
    CAIRN_NATS_URL: testNatsUrl(),
    CAIRN_DATABASE_URL: db.url,
    CAIRN_EVIDENCE_STREAM: uniqueName('WG_EVIDENCE').toUpperCase(),
    CAIRN_EVIDENCE_SUBJECT_PREFIX: uniqueName('wg_ev').toLowerCase(),
    CAIRN_COMMAND_STREAM: uniqueName('WG_COMMANDS').toUpperCase(),
    CAIRN_COMMAND_SUBJECT_PREFIX: uniqueName('wg_cmd').toLowerCase(),
    CAIRN_WORKERS_BUCKET: uniqueName('wg_workers'),
    CAIRN_GATEWAY_PORT: '0',
    CAIRN_API_KEY: BOOTSTRAP_KEY,
    CAIRN_SECRETS_KEY_FILE: keyFile,
    // A command waits this long for the webhooks service (when it is stopped) before answering E_UNAVAILABLE.
    CAIRN_GATEWAY_COMMAND_TIMEOUT_MS: '4000',
  });
  gateway = await startGateway(config, { logger: new JsonLogger('gateway', 'debug', (line) => void logLines.push(line)) });
  // Test keys are made as the product makes them: through POST /v1/keys, recorded by intake.
  intake = startIntakeFor(config);
  // Each key below is a command that waits 4 s for its answer: not long enough for a loaded host to boot intake.
  await untilServing(intake);
  keys.acme = (await provisionKey(gateway.url, BOOTSTRAP_KEY, { tenant: 'acme', scopes: ['admin'] })).key;
  keys.globex = (await provisionKey(gateway.url, BOOTSTRAP_KEY, { tenant: 'globex', scopes: ['admin'] })).key;
  keys.runsOnly = (await provisionKey(gateway.url, BOOTSTRAP_KEY, { tenant: 'acme', scopes: ['runs:read', 'runs:write'] })).key;
  webhooks = await startWebhooksFor({ ...config, CAIRN_SECRETS_KEY_FILE: keyFile });
}, 60_000);

async function stopWebhooks(): Promise<void> {
  await webhooks?.stop();
  if (webhooks !== null) webhooksOutput.push(webhooks.output());
  webhooks = null;
}

/** Commands of `durable` not yet answered. */
async function outstanding(durable: string): Promise<number> {
  const nc = await connect({ servers: testNatsUrl() });
  try {
    const info = await (await jetstreamManager(nc)).consumers.info(config.CAIRN_COMMAND_STREAM, durable);
    return info.num_pending + info.num_ack_pending;
  } finally {
    await nc.close();
  }
}

afterAll(async () => {
  await stopWebhooks();
  await gateway?.close();
  await intake?.stop();
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
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
});

describe('POST / GET / DELETE /v1/webhooks', () => {
  it('registers a webhook, shows its signing secret once and stores it sealed', async () => {
    const created = await call('POST', '/v1/webhooks', { json: { url: PUBLIC_URL, events: ['run.*', 'alert.*', 'run.*'], description: 'ops' } });
    expect(created.status, created.text).toBe(201);
    expect(created.body).toMatchObject({ url: PUBLIC_URL, events: ['alert.*', 'run.*'], description: 'ops' });
    const secret = String(created.body!.secret);
    expect(secret).toMatch(/^whsec_[A-Za-z0-9_-]{43}$/);
    expect(String(created.body!.id)).toMatch(/^wh_[0-9a-f]{24}$/);

    const listed = await call('GET', '/v1/webhooks');
    expect(listed.status).toBe(200);
    expect(listed.body!.items).toEqual([{ id: created.body!.id, url: PUBLIC_URL, events: ['alert.*', 'run.*'], description: 'ops', createdAt: created.body!.createdAt }]);
    expect(listed.text).not.toContain(secret);
    // Sealed at rest: the value is in no column, and nowhere in the gateway's log.
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      const dump = (await client.query<{ row: string }>(`SELECT t::text AS row FROM webhooks t`)).rows.map((r) => r.row).join('\n');
      expect(dump).not.toContain(secret);
      expect(dump).not.toContain(Buffer.from(secret).toString('hex'));
    } finally {
      await client.end();
    }
    expect(logLines.join('\n')).not.toContain(secret);
    // The webhooks service stored it: the gateway sent only the sealed value, so it never saw the secret either.
    expect(webhooks!.output()).toContain(String(created.body!.id));
    expect(webhooks!.output()).not.toContain(secret);
  });

  it('refuses SSRF targets with E_INPUT before any connection, and creates nothing', async () => {
    const before = await count('SELECT count(*) AS n FROM webhooks');
    for (const [url, cls] of [
      ['http://127.0.0.1:9/hook', 'loopback'],
      ['http://[::1]:9/hook', 'loopback'],
      ['http://localhost:9/hook', 'loopback'],
      ['http://169.254.169.254/latest/meta-data/', 'metadata'],
      ['http://[::ffff:a9fe:a9fe]/', 'metadata'],
      ['http://10.1.2.3/hook', 'private'],
      ['http://192.168.0.10/hook', 'private'],
      ['http://169.254.10.10/hook', 'link-local'],
      ['http://0.0.0.0:9/', 'unspecified'],
    ] as const) {
      const refused = await call('POST', '/v1/webhooks', { json: { url, events: ['*'] } });
      expect(refused.status, `${url}: ${refused.text}`).toBe(400);
      expect(refused.body, url).toMatchObject({ code: 'E_INPUT', details: { field: 'url', class: cls } });
    }
    for (const url of ['ftp://93.184.215.14/', 'file:///etc/passwd', 'https://user:pw@93.184.215.14/', 'not a url', `${PUBLIC_URL}#frag`]) {
      const refused = await call('POST', '/v1/webhooks', { json: { url, events: ['*'] } });
      expect(refused.status, url).toBe(400);
      expect(refused.body, url).toMatchObject({ code: 'E_INPUT' });
    }
    expect(await count('SELECT count(*) AS n FROM webhooks')).toBe(before);
  });

  it('refuses bad filters and bodies with E_INPUT naming the field', async () => {
    const cases: [unknown, string][] = [
      [{ url: PUBLIC_URL, events: [] }, 'events'],
      [{ url: PUBLIC_URL, events: ['runs.*'] }, 'events[0]'],
      [{ url: PUBLIC_URL, events: ['run.*', 'RUN'] }, 'events[1]'],
      [{ url: PUBLIC_URL }, 'events'],
      [{ events: ['*'] }, 'url'],
      [{ url: PUBLIC_URL, events: ['*'], secret: 'mine' }, 'secret'],
    ];
    for (const [json, field] of cases) {
      const refused = await call('POST', '/v1/webhooks', { json });
      expect(refused.status, JSON.stringify(json)).toBe(400);
      expect(refused.body!.code).toBe('E_INPUT');
      expect(refused.text, JSON.stringify(json)).toContain(field);
    }
  });

  it('keeps tenants apart: another tenant sees nothing and gets 404 for every route on the webhook', async () => {
    const mine = await call('POST', '/v1/webhooks', { json: { url: PUBLIC_URL, events: ['run.sealed'] } });
    const id = String(mine.body!.id);
    expect((await call('GET', '/v1/webhooks', { key: keys.globex })).body).toEqual({ items: [] });
    expect((await call('GET', `/v1/webhooks/${id}/deliveries`, { key: keys.globex })).body).toMatchObject({ code: 'E_NOT_FOUND' });
    expect((await call('POST', `/v1/webhooks/${id}/deliveries/dlv_${'0'.repeat(24)}/replay`, { key: keys.globex })).status).toBe(404);
    expect((await call('DELETE', `/v1/webhooks/${id}`, { key: keys.globex })).status).toBe(404);
    // Still there for its owner, with an empty delivery log (nothing sends in this test).
    expect((await call('GET', `/v1/webhooks/${id}/deliveries`)).body).toEqual({ items: [] });
    expect((await call('POST', `/v1/webhooks/${id}/deliveries/dlv_${'0'.repeat(24)}/replay`)).body).toMatchObject({ code: 'E_NOT_FOUND' });
    expect(await call('DELETE', `/v1/webhooks/${id}`)).toMatchObject({ status: 200, body: { id, deleted: true } });
    expect((await call('DELETE', `/v1/webhooks/${id}`)).status).toBe(404);
    expect((await call('GET', `/v1/webhooks/${id}/deliveries`)).status).toBe(404);
  });

  it('asks the webhooks service to register and delete by command: with the service down, 503 E_UNAVAILABLE in bounded time, and the commands taken later do nothing', async () => {
    const kept = await call('POST', '/v1/webhooks', { json: { url: PUBLIC_URL, events: ['run.sealed'], description: 'kept' } });
    expect(kept.status, kept.text).toBe(201);
    const before = await count('SELECT count(*) AS n FROM webhooks');
    await stopWebhooks();
    let started = Date.now();
    const refused = await call('POST', '/v1/webhooks', { json: { url: PUBLIC_URL, events: ['run.*'], description: 'while down' } });
    expect(refused.status, refused.text).toBe(503);
    expect(refused.body).toMatchObject({ code: 'E_UNAVAILABLE' });
    expect(refused.text).not.toContain('whsec_');
    expect(Date.now() - started).toBeLessThan(15_000);
    started = Date.now();
    const undeleted = await call('DELETE', `/v1/webhooks/${String(kept.body!.id)}`);
    expect(undeleted.status, undeleted.text).toBe(503);
    expect(undeleted.body).toMatchObject({ code: 'E_UNAVAILABLE' });
    expect(Date.now() - started).toBeLessThan(15_000);
    // An unknown webhook is still 404 without asking anyone.
    expect((await call('DELETE', `/v1/webhooks/wh_${'0'.repeat(24)}`)).status).toBe(404);
    expect(await count('SELECT count(*) AS n FROM webhooks')).toBe(before);
    // The service comes back and takes both queued commands: past their expiry, they are refused unperformed.
    webhooks = await startWebhooksFor({ ...config, CAIRN_SECRETS_KEY_FILE: keyFile });
    const end = Date.now() + 15_000;
    while ((await outstanding('cairn-webhooks-cmd-webhook-register')) + (await outstanding('cairn-webhooks-cmd-webhook-delete')) > 0 && Date.now() < end) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(await outstanding('cairn-webhooks-cmd-webhook-register')).toBe(0);
    expect(await outstanding('cairn-webhooks-cmd-webhook-delete')).toBe(0);
    expect(await count('SELECT count(*) AS n FROM webhooks')).toBe(before);
    expect(await count(`SELECT count(*) AS n FROM webhooks WHERE description = 'while down'`)).toBe(0);
    expect((await call('GET', '/v1/webhooks')).body!.items).toEqual(expect.arrayContaining([expect.objectContaining({ id: kept.body!.id, description: 'kept' })]));
    // And it serves the next ones at once.
    const again = await call('DELETE', `/v1/webhooks/${String(kept.body!.id)}`);
    expect(again).toMatchObject({ status: 200, body: { id: kept.body!.id, deleted: true } });
  });

  it('asks the webhooks service for a replay by command: with the service down, 503 E_UNAVAILABLE in bounded time, and nothing queued', async () => {
    const created = await call('POST', '/v1/webhooks', { json: { url: PUBLIC_URL, events: ['run.sealed'] } });
    expect(created.status, created.text).toBe(201);
    const id = String(created.body!.id);
    // Stopped before the delivery below is queued, and never started again: nothing is ever sent to PUBLIC_URL.
    await stopWebhooks();
    // A delivery as the webhooks service queues it (the gateway never writes this table).
    const deliveryId = `dlv_${'5'.repeat(24)}`;
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      await client.query(`INSERT INTO webhook_deliveries (id, webhook_id, tenant, event_id, event_type, body) VALUES ($1, $2, 'acme', 'run_replayme:4', 'run.sealed', '{}')`, [deliveryId, id]);
      const started = Date.now();
      const replay = await call('POST', `/v1/webhooks/${id}/deliveries/${deliveryId}/replay`);
      expect(replay.status, replay.text).toBe(503);
      expect(replay.body).toMatchObject({ code: 'E_UNAVAILABLE' });
      expect(Date.now() - started).toBeLessThan(15_000);
      expect((await client.query('SELECT count(*)::int AS n FROM webhook_deliveries WHERE replay_of = $1', [deliveryId])).rows).toEqual([{ n: 0 }]);
      // Nothing was ever sent from this test: no attempt is recorded.
      expect((await client.query('SELECT count(*)::int AS n FROM webhook_delivery_attempts')).rows).toEqual([{ n: 0 }]);
      // Another tenant's replay of it is 404 without asking anyone, as before.
      expect((await call('POST', `/v1/webhooks/${id}/deliveries/${deliveryId}/replay`, { key: keys.globex })).body).toMatchObject({ code: 'E_NOT_FOUND' });
    } finally {
      await client.end();
    }
  });

  it('needs the admin scope, and refuses malformed ids and queries', async () => {
    expect((await call('GET', '/v1/webhooks', { key: keys.runsOnly })).body).toMatchObject({ code: 'E_FORBIDDEN' });
    expect((await call('POST', '/v1/webhooks', { key: keys.runsOnly, json: { url: PUBLIC_URL, events: ['*'] } })).status).toBe(403);
    expect((await call('DELETE', '/v1/webhooks/nope')).body).toMatchObject({ code: 'E_INPUT' });
    const listed = await call('GET', '/v1/webhooks');
    const id = String((listed.body!.items as { id: string }[])[0]!.id);
    expect((await call('GET', `/v1/webhooks/${id}/deliveries?status=lost`)).body).toMatchObject({ code: 'E_INPUT' });
    expect((await call('GET', `/v1/webhooks/${id}/deliveries?limit=0`)).body).toMatchObject({ code: 'E_INPUT' });
  });
});
