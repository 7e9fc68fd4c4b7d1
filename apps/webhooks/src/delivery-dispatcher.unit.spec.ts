import { generateSecretKey } from '@cairn/secrets';
import { JsonLogger } from '@cairn/service-kit';
import type { ClaimedDelivery, WebhookStore } from '@cairn/webhooks';
import { afterEach, describe, expect, it } from 'vitest';
import { DeliveryDispatcher } from './delivery-dispatcher.js';
import { WebhooksConfigSchema } from './webhooks.config.js';
import type { WebhooksConfig } from './webhooks.config.js';

/*
 * When the dispatcher looks for due deliveries, against a store that records each look (the port:
 * PostgreSQL's side is the e2e tests'). The poll is a minute here, so every look these tests wait
 * for can only come from a wake.
 */

type Attempt = Parameters<WebhookStore['recordAttempt']>[1];

class FakeStore {
  readonly looks: number[] = [];
  readonly attempts: Attempt[] = [];
  /** What the next looks claim, in order; then nothing. */
  readonly due: ClaimedDelivery[][] = [];
  /** Holds a look open until released. */
  hold: Promise<void> | null = null;
  private waiters: { count: number; resolve: () => void }[] = [];

  async claimDue(): Promise<ClaimedDelivery[]> {
    this.looks.push(Date.now());
    for (const waiter of this.waiters.filter((w) => this.looks.length >= w.count)) waiter.resolve();
    if (this.hold !== null) await this.hold;
    return this.due.shift() ?? [];
  }

  recordAttempt(_delivery: ClaimedDelivery, attempt: Attempt): Promise<boolean> {
    this.attempts.push(attempt);
    return Promise.resolve(true);
  }

  close(): Promise<void> {
    return Promise.resolve();
  }

  /** Resolves once `count` looks have been made. */
  looked(count: number): Promise<void> {
    if (this.looks.length >= count) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ count, resolve }));
  }
}

const config = (): WebhooksConfig =>
  WebhooksConfigSchema.parse({
    CAIRN_NATS_URL: 'nats://127.0.0.1:4222',
    CAIRN_DATABASE_URL: 'postgres://unused@127.0.0.1:5432/unused',
    CAIRN_SECRETS_KEY_FILE: '/nonexistent/secrets.key',
    CAIRN_WEBHOOKS_POLL_MS: '60000',
    CAIRN_WEBHOOKS_RETRY_BASE_MS: '20',
    CAIRN_WEBHOOKS_RETRY_MAX_MS: '40',
    CAIRN_WEBHOOKS_MAX_ATTEMPTS: '3',
  });

function delivery(attempt: number): ClaimedDelivery {
  return {
    id: 'dlv_test',
    webhookId: 'wh_test',
    tenant: 'acme',
    eventId: 'run_x:1',
    eventType: 'run.submitted',
    body: '{}',
    attempt,
    url: 'http://127.0.0.1:9/hook',
    // Not sealed under the keyring: the attempt fails before any connection.
    secretSealed: new Uint8Array(40),
  };
}

let dispatcher: DeliveryDispatcher | null = null;

function start(store: FakeStore): DeliveryDispatcher {
  const key = generateSecretKey();
  dispatcher = new DeliveryDispatcher(store as unknown as WebhookStore, { primary: key, keys: [key] }, config(), new JsonLogger('webhooks', 'fatal', () => undefined));
  dispatcher.onApplicationBootstrap();
  return dispatcher;
}

afterEach(async () => {
  await dispatcher?.onApplicationShutdown();
  dispatcher = null;
});

describe('the delivery dispatcher', () => {
  it('looks at start, then at once when woken, not at the next poll', async () => {
    const store = new FakeStore();
    const running = start(store);
    await store.looked(1);
    // The first look has ended: the dispatcher waits for its next poll.
    await new Promise((resolve) => setTimeout(resolve, 20));
    running.wake();
    await store.looked(2);
    expect(store.looks).toHaveLength(2);
  });

  it('looks again after a look under way when woken during it', async () => {
    const store = new FakeStore();
    let release = () => undefined as void;
    store.hold = new Promise<void>((resolve) => (release = resolve));
    const running = start(store);
    await store.looked(1);
    // Deliveries queued while the first look is still reading: it may not have seen them.
    running.wake();
    store.hold = null;
    release();
    await store.looked(2);
    expect(store.looks).toHaveLength(2);
  });

  it('comes back for its own retry when it is due, and records each attempt', async () => {
    const store = new FakeStore();
    store.due.push([delivery(1)]);
    start(store);
    // Look 1 claims the delivery; its attempt fails and is due again in 20 ms (±20 %): look 2.
    await store.looked(2);
    expect(store.attempts).toHaveLength(1);
    expect(store.attempts[0]).toMatchObject({ statusCode: null, next: { status: 'pending' } });
    expect(store.attempts[0]!.error).toMatch(/signing secret cannot be opened/);
  });
});
