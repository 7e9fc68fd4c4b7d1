import { generateSecretKey } from '@cairn/secrets';
import type { SecretKeyring } from '@cairn/secrets';
import { CommandBus } from '@cairn/operational';
import { JsonLogger } from '@cairn/service-kit';
import { createTestDatabase, testNatsUrl, uniqueName } from '@cairn/testing';
import type { TestDatabase } from '@cairn/testing';
import { newWebhookId, openWebhookSecret, sealWebhookSecret, WebhookStore } from '@cairn/webhooks';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { DELETE_DURABLE, REGISTER_DURABLE, WebhookCommandService } from './webhook-command.service.js';

/*
 * `webhook_register` and `webhook_delete` on the real NATS and PostgreSQL: the sender is a
 * CommandBus as the gateway's is, the server the webhooks service's WebhookCommandService on its
 * own command stream and database. The secret is sealed on the sender's side, as the gateway does.
 */

let nc: NatsConnection;
let db: TestDatabase;
let store: WebhookStore;
let bus: CommandBus;
let server: WebhookCommandService | null = null;
const stream = uniqueName('WHCMD').toUpperCase();
const keyring: SecretKeyring = (() => {
  const key = generateSecretKey();
  return { primary: key, keys: [key] };
})();
const logLines: string[] = [];
const logger = new JsonLogger('webhooks', 'debug', (line) => void logLines.push(line));
const tenant = 'acme';
const URL_A = 'https://93.184.215.14/hook';

async function sql<T extends pg.QueryResultRow>(text: string, values: unknown[] = []): Promise<T[]> {
  const client = new pg.Client({ connectionString: db.url });
  await client.connect();
  try {
    return (await client.query<T>(text, values)).rows;
  } finally {
    await client.end();
  }
}

const rowsOf = async (id: string) => sql<{ id: string; tenant: string; url: string; events: string[]; description: string | null; key_id: string }>(
  'SELECT id, tenant, url, events, description, key_id FROM webhooks WHERE id = $1',
  [id],
);

/** A registration as the gateway sends it: the secret made and sealed here, only the sealed value in the command. */
function registration(over: Record<string, unknown> = {}, waitMs = 5000, ring: SecretKeyring = keyring) {
  const webhookId = typeof over.webhook_id === 'string' ? over.webhook_id : newWebhookId();
  const { secret, sealed, keyId } = sealWebhookSecret(ring, tenant, webhookId);
  const command = {
    tenant,
    requested_by: 'key:k1',
    webhook_id: webhookId,
    url: URL_A,
    events: ['run.*'],
    description: 'ops',
    secret_sealed: Buffer.from(sealed).toString('base64'),
    key_id: keyId,
    expires_at: new Date(Date.now() + waitMs).toISOString(),
    ...over,
  };
  return { webhookId, secret, command };
}

const deletion = (webhookId: string, over: Record<string, string> = {}, waitMs = 5000) => ({ tenant, requested_by: 'key:k1', webhook_id: webhookId, expires_at: new Date(Date.now() + waitMs).toISOString(), ...over });

async function startServer(): Promise<void> {
  server = new WebhookCommandService(bus, store, keyring, logger);
  await server.onApplicationBootstrap();
}

async function drained(durable: string): Promise<void> {
  const jsm = await jetstreamManager(nc);
  const end = Date.now() + 15_000;
  const outstanding = async () => {
    const info = await jsm.consumers.info(stream, durable);
    return info.num_pending + info.num_ack_pending;
  };
  while ((await outstanding()) > 0 && Date.now() < end) await new Promise((resolve) => setTimeout(resolve, 50));
  expect(await outstanding()).toBe(0);
}

beforeAll(async () => {
  nc = await connect({ servers: testNatsUrl() });
  db = await createTestDatabase('cairn_wh_cmd');
  store = await WebhookStore.open({ url: db.url });
  bus = await CommandBus.open(nc, { stream, subjectPrefix: uniqueName('whcmd').toLowerCase() });
});

afterEach(async () => {
  await server?.onModuleDestroy();
  server = null;
});

afterAll(async () => {
  await (await jetstreamManager(nc)).streams.delete(stream).catch(() => false);
  await store?.close();
  await db?.drop();
  await nc?.close();
});

describe('webhook_register, served by the webhooks service', () => {
  it('given a registration, then the webhook is stored under the id asked for with the sealed secret, which opens to the secret the sender made; the plaintext is nowhere', async () => {
    await startServer();
    const { webhookId, secret, command } = registration();
    expect(await bus.send('webhook_register', command, { msgId: `webhook-register:${webhookId}`, timeoutMs: 10_000 })).toEqual({ ok: true, run_id: webhookId, duplicate: false });
    expect(await rowsOf(webhookId)).toEqual([{ id: webhookId, tenant, url: URL_A, events: ['run.*'], description: 'ops', key_id: keyring.primary.id }]);
    const [stored] = await sql<{ secret_sealed: Buffer }>('SELECT secret_sealed FROM webhooks WHERE id = $1', [webhookId]);
    expect(openWebhookSecret(keyring, tenant, webhookId, new Uint8Array(stored!.secret_sealed))).toBe(secret);
    expect(JSON.stringify(command)).not.toContain(secret);
    expect(logLines.join('\n')).not.toContain(secret);
    expect(await store.get(tenant, webhookId)).toMatchObject({ id: webhookId, url: URL_A, events: ['run.*'], description: 'ops' });
  });

  it('given the same registration twice (a redelivery, or a retry under a new message id), then it is stored once and the second answer is duplicate', async () => {
    await startServer();
    const { webhookId, command } = registration({ description: null });
    expect(await bus.send('webhook_register', command, { msgId: `webhook-register:${webhookId}`, timeoutMs: 10_000 })).toEqual({ ok: true, run_id: webhookId, duplicate: false });
    // The same message id again: JetStream stores it once, so the bus asks again under a fresh id, and the server answers duplicate.
    expect(await bus.send('webhook_register', command, { msgId: `webhook-register:${webhookId}`, timeoutMs: 10_000 })).toEqual({ ok: true, run_id: webhookId, duplicate: true });
    expect(await bus.send('webhook_register', command, { msgId: uniqueName('again'), timeoutMs: 10_000 })).toEqual({ ok: true, run_id: webhookId, duplicate: true });
    expect(await rowsOf(webhookId)).toHaveLength(1);
    // The same id with another URL, or for another tenant, is a conflict, not a duplicate: nothing changes.
    const other = await bus.send('webhook_register', { ...command, url: 'https://93.184.215.15/other' }, { msgId: uniqueName('conflict'), timeoutMs: 10_000 });
    expect(other).toMatchObject({ ok: false, error: { code: 'E_CONFLICT' } });
    expect((await rowsOf(webhookId))[0]).toMatchObject({ url: URL_A, tenant });
  });

  it('given the webhooks service down, then the sender gets E_UNAVAILABLE in bounded time, and the command taken later (stale) registers nothing', async () => {
    const { webhookId, command } = registration({}, 800);
    const started = Date.now();
    const reply = await bus.send('webhook_register', command, { msgId: `webhook-register:${webhookId}`, timeoutMs: 800 });
    expect(reply).toMatchObject({ ok: false, error: { code: 'E_UNAVAILABLE' } });
    expect(Date.now() - started).toBeLessThan(5000);
    await startServer();
    await drained(REGISTER_DURABLE);
    expect(await rowsOf(webhookId)).toEqual([]);
    expect(logLines.some((line) => line.includes('webhook_register refused') && line.includes(webhookId))).toBe(true);
    // The server still answers the next one: the stale command was answered, not stuck.
    const next = registration();
    expect(await bus.send('webhook_register', next.command, { msgId: `webhook-register:${next.webhookId}`, timeoutMs: 10_000 })).toMatchObject({ ok: true, duplicate: false });
  });

  it('given a secret it cannot use (sealed for another webhook, under another key file, or not sealed at all), then it is refused and nothing is stored', async () => {
    await startServer();
    const stranger = registration();
    const misfiled = registration({ secret_sealed: stranger.command.secret_sealed });
    expect(await bus.send('webhook_register', misfiled.command, { msgId: uniqueName('misfiled'), timeoutMs: 10_000 })).toMatchObject({ ok: false, error: { code: 'E_INPUT' } });
    const otherKey = generateSecretKey();
    const foreign = registration({}, 20_000, { primary: otherKey, keys: [otherKey] });
    // Another key file is an operator's misconfiguration: E_UNAVAILABLE (retried a few times, then answered).
    expect(await bus.send('webhook_register', foreign.command, { msgId: uniqueName('foreign'), timeoutMs: 15_000 })).toMatchObject({ ok: false, error: { code: 'E_UNAVAILABLE', details: { keyId: otherKey.id } } });
    const plain = registration({ secret_sealed: Buffer.from('whsec_plaintext-is-not-sealed').toString('base64') });
    expect(await bus.send('webhook_register', plain.command, { msgId: uniqueName('plain'), timeoutMs: 10_000 })).toMatchObject({ ok: false, error: { code: 'E_INPUT' } });
    for (const { webhookId } of [misfiled, foreign, plain]) expect(await rowsOf(webhookId)).toEqual([]);
    // Hostile shapes never reach the server: the plaintext in the command, an extra field, a bad id.
    expect(await bus.send('webhook_register', { ...registration().command, secret: 'whsec_x' } as never, { msgId: uniqueName('extra'), timeoutMs: 2000 })).toMatchObject({ ok: false, error: { code: 'E_INPUT' } });
    expect(await bus.send('webhook_register', registration({ webhook_id: "wh_'; DROP TABLE webhooks; --" }).command, { msgId: uniqueName('bad'), timeoutMs: 2000 })).toMatchObject({ ok: false, error: { code: 'E_INPUT' } });
  });
});

describe('webhook_delete, served by the webhooks service', () => {
  it('given a webhook of the tenant, then it is removed with its delivery log; the same delete again is duplicate', async () => {
    await startServer();
    const { webhookId, command } = registration();
    expect(await bus.send('webhook_register', command, { msgId: `webhook-register:${webhookId}`, timeoutMs: 10_000 })).toMatchObject({ ok: true });
    await store.enqueue([{ webhookId, tenant, eventId: 'run_deleted01:3', eventType: 'run.sealed', body: '{}' }]);
    expect(await bus.send('webhook_delete', deletion(webhookId), { msgId: `webhook-delete:${webhookId}`, timeoutMs: 10_000 })).toEqual({ ok: true, run_id: webhookId, duplicate: false });
    expect(await rowsOf(webhookId)).toEqual([]);
    expect(await sql('SELECT id FROM webhook_deliveries WHERE webhook_id = $1', [webhookId])).toEqual([]);
    // Delivered twice (same message id, then a fresh one): the second and third answers are duplicate, not E_NOT_FOUND.
    expect(await bus.send('webhook_delete', deletion(webhookId), { msgId: `webhook-delete:${webhookId}`, timeoutMs: 10_000 })).toEqual({ ok: true, run_id: webhookId, duplicate: true });
    expect(await bus.send('webhook_delete', deletion(webhookId), { msgId: uniqueName('again'), timeoutMs: 10_000 })).toEqual({ ok: true, run_id: webhookId, duplicate: true });
    // The registration delivered again after the delete does not bring the webhook back.
    expect(await bus.send('webhook_register', command, { msgId: uniqueName('late-redelivery'), timeoutMs: 10_000 })).toEqual({ ok: true, run_id: webhookId, duplicate: true });
    expect(await rowsOf(webhookId)).toEqual([]);
  });

  it('given a webhook the tenant never had (unknown, or another tenant\'s), then E_NOT_FOUND and nothing is removed', async () => {
    await startServer();
    expect(await bus.send('webhook_delete', deletion(newWebhookId()), { msgId: uniqueName('unknown'), timeoutMs: 10_000 })).toMatchObject({ ok: false, error: { code: 'E_NOT_FOUND' } });
    const { webhookId, command } = registration();
    expect(await bus.send('webhook_register', command, { msgId: `webhook-register:${webhookId}`, timeoutMs: 10_000 })).toMatchObject({ ok: true });
    expect(await bus.send('webhook_delete', deletion(webhookId, { tenant: 'globex' }), { msgId: uniqueName('other'), timeoutMs: 10_000 })).toMatchObject({ ok: false, error: { code: 'E_NOT_FOUND' } });
    expect(await rowsOf(webhookId)).toHaveLength(1);
    // Nor does the other tenant's failed try count as a deletion of theirs later.
    expect(await bus.send('webhook_delete', deletion(webhookId, { tenant: 'globex' }), { msgId: uniqueName('other2'), timeoutMs: 10_000 })).toMatchObject({ ok: false, error: { code: 'E_NOT_FOUND' } });
  });

  it('given the webhooks service down, then the sender gets E_UNAVAILABLE, and the delete taken later (stale) removes nothing', async () => {
    await startServer();
    const { webhookId, command } = registration();
    expect(await bus.send('webhook_register', command, { msgId: `webhook-register:${webhookId}`, timeoutMs: 10_000 })).toMatchObject({ ok: true });
    await server?.onModuleDestroy();
    server = null;
    expect(await bus.send('webhook_delete', deletion(webhookId, {}, 800), { msgId: `webhook-delete:${webhookId}`, timeoutMs: 800 })).toMatchObject({ ok: false, error: { code: 'E_UNAVAILABLE' } });
    await startServer();
    await drained(DELETE_DURABLE);
    expect(await rowsOf(webhookId)).toHaveLength(1);
  });
});
