import { generateSecretKey } from '@cairn/secrets';
import type { SecretKeyring } from '@cairn/secrets';
import { CommandBus } from '@cairn/operational';
import { JsonLogger } from '@cairn/service-kit';
import { createTestDatabase, testNatsUrl, uniqueName } from '@cairn/testing';
import type { TestDatabase } from '@cairn/testing';
import { WebhookStore } from '@cairn/webhooks';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ReplayCommandService } from './replay-command.service.js';

/*
 * `webhook_replay` on the real NATS and PostgreSQL: the sender is a CommandBus as the gateway's is,
 * the server the webhooks service's ReplayCommandService on its own command stream and database.
 */

let nc: NatsConnection;
let db: TestDatabase;
let store: WebhookStore;
let bus: CommandBus;
let server: ReplayCommandService | null = null;
const stream = uniqueName('WHREPLAY_CMD').toUpperCase();
const keyring: SecretKeyring = (() => {
  const key = generateSecretKey();
  return { primary: key, keys: [key] };
})();
const logger = new JsonLogger('webhooks', 'fatal');
const tenant = 'acme';
let webhookId = '';
let deliveryId = '';

const newDeliveryId = () => `dlv_${randomBytes(12).toString('hex')}`;

async function sql<T extends pg.QueryResultRow>(text: string, values: unknown[] = []): Promise<T[]> {
  const client = new pg.Client({ connectionString: db.url });
  await client.connect();
  try {
    return (await client.query<T>(text, values)).rows;
  } finally {
    await client.end();
  }
}

const replaysOf = async (id: string) => (await sql<{ id: string }>('SELECT id FROM webhook_deliveries WHERE replay_of = $1 ORDER BY id', [id])).map((r) => r.id);

function command(replayId: string, over: Record<string, string> = {}, waitMs = 5000) {
  return { tenant, requested_by: 'key:k1', webhook_id: webhookId, delivery_id: deliveryId, replay_id: replayId, expires_at: new Date(Date.now() + waitMs).toISOString(), ...over };
}

async function startServer(): Promise<void> {
  server = new ReplayCommandService(bus, store, logger);
  await server.onApplicationBootstrap();
}

beforeAll(async () => {
  nc = await connect({ servers: testNatsUrl() });
  db = await createTestDatabase('cairn_wh_replay');
  store = await WebhookStore.open({ url: db.url });
  bus = await CommandBus.open(nc, { stream, subjectPrefix: uniqueName('whreplay').toLowerCase() });
  const { webhook } = await store.create(keyring, { tenant, url: 'https://93.184.215.14/hook', events: ['*'], description: null });
  webhookId = webhook.id;
  await store.enqueue([{ webhookId, tenant, eventId: 'run_replayed01:3', eventType: 'run.sealed', body: '{"x":1}' }]);
  deliveryId = (await sql<{ id: string }>('SELECT id FROM webhook_deliveries WHERE webhook_id = $1', [webhookId]))[0]!.id;
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

describe('webhook_replay, served by the webhooks service', () => {
  it('given a delivery of the tenant, then it is queued again under the id asked for, once, however often the command comes', async () => {
    await startServer();
    const replayId = newDeliveryId();
    expect(await bus.send('webhook_replay', command(replayId), { msgId: `t1:${replayId}`, timeoutMs: 10_000 })).toEqual({ ok: true, run_id: 'run_replayed01', duplicate: false });
    // The same command again (a redelivery, or a retry under a new message id): nothing new.
    expect(await bus.send('webhook_replay', command(replayId), { msgId: `t1b:${replayId}`, timeoutMs: 10_000 })).toEqual({ ok: true, run_id: 'run_replayed01', duplicate: true });
    expect(await replaysOf(deliveryId)).toEqual([replayId]);
    expect(await store.delivery(tenant, webhookId, replayId)).toMatchObject({ id: replayId, replayOf: deliveryId, eventId: 'run_replayed01:3', status: 'pending', attempts: 0 });
  });

  it('given an unknown delivery, another tenant, or a replay id taken by another delivery, then E_NOT_FOUND and nothing is queued', async () => {
    await startServer();
    const before = await sql<{ n: number }>('SELECT count(*)::int AS n FROM webhook_deliveries');
    const unknown = await bus.send('webhook_replay', command(newDeliveryId(), { delivery_id: newDeliveryId() }), { msgId: uniqueName('t2a'), timeoutMs: 10_000 });
    expect(unknown).toMatchObject({ ok: false, error: { code: 'E_NOT_FOUND' } });
    const otherTenant = await bus.send('webhook_replay', command(newDeliveryId(), { tenant: 'globex' }), { msgId: uniqueName('t2b'), timeoutMs: 10_000 });
    expect(otherTenant).toMatchObject({ ok: false, error: { code: 'E_NOT_FOUND' } });
    const taken = await bus.send('webhook_replay', command(deliveryId), { msgId: uniqueName('t2c'), timeoutMs: 10_000 });
    expect(taken).toMatchObject({ ok: false, error: { code: 'E_NOT_FOUND' } });
    expect(await sql<{ n: number }>('SELECT count(*)::int AS n FROM webhook_deliveries')).toEqual(before);
  });

  it('given a hostile command (a bad id, an extra field), then E_INPUT before anything is sent', async () => {
    const bad = await bus.send('webhook_replay', { ...command(newDeliveryId()), replay_id: "dlv_'; DROP TABLE webhooks; --" }, { msgId: uniqueName('t3'), timeoutMs: 2000 });
    expect(bad).toMatchObject({ ok: false, error: { code: 'E_INPUT' } });
    const extra = await bus.send('webhook_replay', { ...command(newDeliveryId()), body: 'forged' } as never, { msgId: uniqueName('t3b'), timeoutMs: 2000 });
    expect(extra).toMatchObject({ ok: false, error: { code: 'E_INPUT' } });
  });

  it('given the webhooks service down, then the sender gets E_UNAVAILABLE in bounded time, and the command taken later replays nothing', async () => {
    const replayId = newDeliveryId();
    const started = Date.now();
    const reply = await bus.send('webhook_replay', command(replayId, {}, 800), { msgId: `t4:${replayId}`, timeoutMs: 800 });
    expect(reply).toMatchObject({ ok: false, error: { code: 'E_UNAVAILABLE' } });
    expect(Date.now() - started).toBeLessThan(5000);
    // The service comes back and takes the queued command: past its expiry, it is refused unperformed.
    await startServer();
    const end = Date.now() + 15_000;
    const outstanding = async () => {
      const info = await (await jetstreamManager(nc)).consumers.info(stream, 'cairn-webhooks-cmd-webhook-replay');
      return info.num_pending + info.num_ack_pending;
    };
    while ((await outstanding()) > 0 && Date.now() < end) await new Promise((resolve) => setTimeout(resolve, 50));
    expect(await outstanding()).toBe(0);
    expect(await sql<{ n: number }>('SELECT count(*)::int AS n FROM webhook_deliveries WHERE id = $1', [replayId])).toEqual([{ n: 0 }]);
    // A later command through the same server still works: it was answered, not stuck.
    const next = newDeliveryId();
    expect(await bus.send('webhook_replay', command(next), { msgId: `t4b:${next}`, timeoutMs: 10_000 })).toMatchObject({ ok: true, duplicate: false });
    expect(await replaysOf(deliveryId)).not.toContain(replayId);
    expect(await replaysOf(deliveryId)).toContain(next);
  });
});
