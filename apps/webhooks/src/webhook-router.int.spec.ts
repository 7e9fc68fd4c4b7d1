import { EvidenceLog } from '@cairn/evidence-log';
import { generateSecretKey } from '@cairn/secrets';
import type { SecretKeyring } from '@cairn/secrets';
import { JsonLogger } from '@cairn/service-kit';
import { createTestDatabase, testNatsUrl, uniqueName, until } from '@cairn/testing';
import type { TestDatabase } from '@cairn/testing';
import { WebhookStore } from '@cairn/webhooks';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { DeliveryDispatcher } from './delivery-dispatcher.js';
import { WebhookFanoutHandler } from './webhook-fanout.handler.js';
import { WebhookRouter } from './webhook-router.js';
import { durableFor, PARKED_TYPE, WEBHOOKS_DURABLE } from './webhook-routes.js';
import type { WebhooksConfig } from './webhooks.config.js';

let nc: NatsConnection;
let db: TestDatabase;
let store: WebhookStore;
let log: EvidenceLog;
let router: WebhookRouter | null = null;
const keyring: SecretKeyring = (() => {
  const key = generateSecretKey();
  return { primary: key, keys: [key] };
})();
const logger = new JsonLogger('webhooks', 'warn', (line) => process.stderr.write(line + '\n'));
// The dispatcher is the port the fan-out wakes; sending is not what these tests are about.
const dispatcher = { wake: () => undefined } as unknown as DeliveryDispatcher;
const tenant = 'default';

beforeAll(async () => {
  nc = await connect({ servers: testNatsUrl() });
  db = await createTestDatabase('cairn_wh_routes');
  store = await WebhookStore.open({ url: db.url });
});

afterAll(async () => {
  await store?.close();
  await db?.drop();
  await nc?.close();
});

beforeEach(async () => {
  log = await EvidenceLog.fromConnection(nc, { servers: testNatsUrl(), stream: uniqueName('WHROUTES').toUpperCase(), subjectPrefix: uniqueName('whroutes').toLowerCase() });
});

afterEach(async () => {
  await router?.beforeApplicationShutdown();
  router = null;
  await (await jetstreamManager(nc)).streams.delete(log.streamName);
  await sql('DELETE FROM webhooks');
});

function startRouter(pollMs = 100): Promise<WebhookRouter> {
  const config = { CAIRN_WEBHOOKS_ROUTES_POLL_MS: pollMs, CAIRN_WEBHOOKS_ACK_WAIT_MS: 30_000 } as WebhooksConfig;
  router = new WebhookRouter(store, new WebhookFanoutHandler(store, logger, dispatcher), nc, log, config, logger);
  return router.onApplicationBootstrap().then(() => router!);
}

async function consumers(): Promise<Map<string, { delivered: number; filters: string[] }>> {
  const found = new Map<string, { delivered: number; filters: string[] }>();
  for await (const info of (await jetstreamManager(nc)).consumers.list(log.streamName)) {
    found.set(info.name, { delivered: info.delivered.stream_seq, filters: info.config.filter_subjects ?? [] });
  }
  return found;
}

async function sql<T extends pg.QueryResultRow>(text: string): Promise<T[]> {
  const client = new pg.Client({ connectionString: db.url });
  await client.connect();
  try {
    return (await client.query<T>(text)).rows;
  } finally {
    await client.end();
  }
}

const queued = () => sql<{ webhook_id: string; event_id: string }>('SELECT webhook_id, event_id FROM webhook_deliveries WHERE replay_of IS NULL ORDER BY event_id');

const run = () => 'run_' + uniqueName('r').toLowerCase();
const submitted = (chain: string) =>
  log.append(chain, { type: 'run.cancelled', actor: 'intake', tenant, causation: null, fields: { cancelled_by: 'intake' } });
const sealed = (chain: string, seq: number) =>
  log.append(chain, { type: 'run.sealed', actor: 'grader', tenant, causation: `${chain}:${seq}`, fields: { final_state: 'CANCELLED', evidence_digest: '0'.repeat(64) } });

describe('WebhookRouter on the real JetStream and PostgreSQL', () => {
  it('with no webhook parks: the service pulls, and no receipt is delivered to it', async () => {
    await startRouter();
    expect(router!.durable).toBe(durableFor([PARKED_TYPE]));
    const chain = run();
    await submitted(chain);
    await sealed(chain, 1);
    await new Promise((r) => setTimeout(r, 300));
    const found = await consumers();
    expect([...found.keys()]).toEqual([durableFor([PARKED_TYPE])]);
    expect(found.get(durableFor([PARKED_TYPE]))!.delivered).toBe(0);
    expect(await queued()).toEqual([]);
  });

  it('a webhook registered while it is parked gets every receipt recorded after it, once, even those before the router noticed it', async () => {
    // A long poll: the receipts below are all appended before the router looks again.
    await startRouter(1500);
    const before = run();
    await submitted(before);
    await sealed(before, 1);
    await new Promise((r) => setTimeout(r, 20));
    const { webhook } = await store.create(keyring, { tenant, url: 'https://example.invalid/hook', events: ['run.sealed'], description: null });
    const chains = [run(), run(), run()];
    for (const chain of chains) {
      await submitted(chain);
      await sealed(chain, 1);
    }
    await until('the router moved to run.sealed', () => router!.durable === durableFor(['run.sealed']), 10_000);
    await until('three deliveries queued', async () => (await queued()).length >= 3, 10_000);
    await new Promise((r) => setTimeout(r, 300));
    const rows = await queued();
    // Only the seals after the registration; not the one before it, not the cancellations (another type).
    expect(rows.map((r) => r.event_id).sort()).toEqual(chains.map((c) => `${c}:2`).sort());
    expect(rows.every((r) => r.webhook_id === webhook.id)).toBe(true);
    const found = await consumers();
    // The parked durable is gone; the new one takes run.sealed alone.
    expect([...found.keys()]).toEqual([durableFor(['run.sealed'])]);
    expect(found.get(durableFor(['run.sealed']))!.filters).toEqual([`${log.subjectPrefix}.*.run.sealed`]);
  });

  it('widening and narrowing the types moves to another durable from where the last one was, without a second first delivery', async () => {
    const { webhook: seals } = await store.create(keyring, { tenant, url: 'https://example.invalid/seals', events: ['run.sealed'], description: null });
    await startRouter(100);
    expect(router!.durable).toBe(durableFor(['run.sealed']));
    const first = run();
    await submitted(first);
    await sealed(first, 1);
    await until('the first seal queued', async () => (await queued()).length === 1, 10_000);

    const { webhook: all } = await store.create(keyring, { tenant, url: 'https://example.invalid/all', events: ['*'], description: null });
    const second = run();
    await submitted(second);
    await sealed(second, 1);
    await until('the router moved to every type', () => router!.durable !== durableFor(['run.sealed']), 10_000);
    await until('the second run queued for both', async () => (await queued()).length === 4, 10_000);

    const key = (r: { webhook_id: string; event_id: string }) => `${r.webhook_id === seals.id ? 'seals' : 'all'} ${r.event_id}`;
    expect((await queued()).map(key).sort()).toEqual([`seals ${first}:2`, `seals ${second}:2`, `all ${second}:1`, `all ${second}:2`].sort());

    // Its deliveries go with the webhook.
    await store.delete(tenant, all.id);
    await until('the router moved back to run.sealed', () => router!.durable === durableFor(['run.sealed']), 10_000);
    const third = run();
    await submitted(third);
    await sealed(third, 1);
    await until('the third seal queued', async () => (await queued()).length === 3, 10_000);
    await new Promise((r) => setTimeout(r, 300));
    expect((await queued()).map(key).sort()).toEqual([`seals ${first}:2`, `seals ${second}:2`, `seals ${third}:2`].sort());
    expect([...(await consumers()).keys()]).toEqual([durableFor(['run.sealed'])]);
  });

  it('takes over the one-durable consumer of an earlier release from where it had got to', async () => {
    const jsm = await jetstreamManager(nc);
    const done = run();
    await submitted(done);
    await jsm.consumers.add(log.streamName, { durable_name: WEBHOOKS_DURABLE, ack_policy: 'explicit', filter_subject: `${log.subjectPrefix}.>` } as never);
    const { webhook } = await store.create(keyring, { tenant, url: 'https://example.invalid/old', events: ['run.sealed'], description: null });
    const pending = run();
    await submitted(pending);
    await sealed(pending, 1);
    await startRouter();
    await until('the pending seal queued', async () => (await queued()).length === 1, 10_000);
    expect((await queued()).map((r) => r.event_id)).toEqual([`${pending}:2`]);
    expect([...(await consumers()).keys()]).toEqual([durableFor(['run.sealed'])]);
    expect((await queued())[0]!.webhook_id).toBe(webhook.id);
  });
});
