import { randomBytes } from 'node:crypto';
import { CairnError, isCairnError, TenantIdSchema } from '@cairn/contracts';
import { openSecret, sealedKeyId, sealSecret } from '@cairn/secrets';
import type { SecretKeyring } from '@cairn/secrets';
import type { DataSource } from 'typeorm';
import { newWebhookSecret } from './webhook-signature.js';

export type DeliveryStatus = 'pending' | 'delivered' | 'dead';

export interface Webhook {
  id: string;
  tenant: string;
  url: string;
  events: string[];
  description: string | null;
  createdAt: Date;
}

export interface DeliveryAttempt {
  attempt: number;
  at: Date;
  durationMs: number;
  statusCode: number | null;
  error: string | null;
}

export interface Delivery {
  id: string;
  webhookId: string;
  eventId: string;
  eventType: string;
  status: DeliveryStatus;
  attempts: number;
  nextAttemptAt: Date | null;
  lastStatus: number | null;
  lastError: string | null;
  replayOf: string | null;
  createdAt: Date;
  deliveredAt: Date | null;
  attemptLog: DeliveryAttempt[];
}

/** A delivery taken for one attempt: the payload, the target and the sealed secret to sign with. */
export interface ClaimedDelivery {
  id: string;
  webhookId: string;
  tenant: string;
  eventId: string;
  eventType: string;
  body: string;
  /** The number of this attempt (1-based). */
  attempt: number;
  url: string;
  secretSealed: Uint8Array;
}

/** One receipt to queue for one webhook. */
export interface NewDelivery {
  webhookId: string;
  tenant: string;
  eventId: string;
  eventType: string;
  body: string;
}

/** A registration as the webhooks service stores it: its id and signing secret (sealed) chosen by the gateway. */
export interface RegisterWebhook {
  id: string;
  tenant: string;
  url: string;
  events: string[];
  description: string | null;
  secretSealed: Uint8Array;
  /** The id of the key `secretSealed` is sealed under. */
  keyId: string;
}

export interface WebhookStoreOptions {
  url: string;
  poolSize?: number;
  applicationName?: string;
}

function checkTenant(tenant: string): string {
  if (!TenantIdSchema.safeParse(tenant).success) throw new CairnError('E_INPUT', `not a tenant id: ${JSON.stringify(tenant.slice(0, 80))}`);
  return tenant;
}

/** What seals a webhook's signing secret to its tenant and id: moved to another row, it fails to open. */
function secretRef(tenant: string, webhookId: string) {
  return { tenant, name: `webhook/${webhookId}` };
}

/** Opens a claimed delivery's signing secret. */
export function openWebhookSecret(keyring: SecretKeyring, tenant: string, webhookId: string, sealed: Uint8Array): string {
  const bytes = openSecret(keyring, secretRef(tenant, webhookId), sealed);
  try {
    return Buffer.from(bytes).toString('utf8');
  } finally {
    bytes.fill(0);
  }
}

interface DeliveryRow {
  id: string;
  webhook_id: string;
  event_id: string;
  event_type: string;
  status: DeliveryStatus;
  attempts: number;
  next_attempt_at: Date;
  last_status: number | null;
  last_error: string | null;
  replay_of: string | null;
  created_at: Date;
  delivered_at: Date | null;
  attempt_log: { attempt: number; at: string; duration_ms: number; status_code: number | null; error: string | null }[] | null;
}

const DELIVERY_COLUMNS = `d.id, d.webhook_id, d.event_id, d.event_type, d.status, d.attempts, d.next_attempt_at, d.last_status, d.last_error, d.replay_of, d.created_at, d.delivered_at,
  (SELECT json_agg(json_build_object('attempt', a.attempt, 'at', a.at, 'duration_ms', a.duration_ms, 'status_code', a.status_code, 'error', a.error) ORDER BY a.attempt)
     FROM webhook_delivery_attempts a WHERE a.delivery_id = d.id) AS attempt_log`;

function toDelivery(row: DeliveryRow): Delivery {
  return {
    id: row.id,
    webhookId: row.webhook_id,
    eventId: row.event_id,
    eventType: row.event_type,
    status: row.status,
    attempts: row.attempts,
    nextAttemptAt: row.status === 'pending' ? row.next_attempt_at : null,
    lastStatus: row.last_status,
    lastError: row.last_error,
    replayOf: row.replay_of,
    createdAt: row.created_at,
    deliveredAt: row.delivered_at,
    attemptLog: (row.attempt_log ?? []).map((a) => ({ attempt: a.attempt, at: new Date(a.at), durationMs: a.duration_ms, statusCode: a.status_code, error: a.error })),
  };
}

interface WebhookRow {
  id: string;
  tenant: string;
  url: string;
  events: string[];
  description: string | null;
  created_at: Date;
}

function toWebhook(row: WebhookRow): Webhook {
  return { id: row.id, tenant: row.tenant, url: row.url, events: row.events, description: row.description, createdAt: row.created_at };
}

/** The advisory lock class of a webhook's registration and deletion (the migration locks are single keys). */
const WEBHOOK_LOCK_CLASS = 1717;

const newId = (prefix: string) => `${prefix}_${randomBytes(12).toString('hex')}`;

/** A fresh webhook id (`wh_` and 24 hex characters): the gateway picks it, so a command delivered twice registers once. */
export function newWebhookId(): string {
  return newId('wh');
}

/**
 * Makes a webhook's signing secret and seals it for its tenant and id under the keyring's primary
 * key: the gateway's half of a registration. `secret` is shown to the caller once; only `sealed`
 * (with the id of the key it is sealed under) goes to the webhooks service.
 */
export function sealWebhookSecret(keyring: SecretKeyring, tenant: string, webhookId: string): { secret: string; sealed: Uint8Array; keyId: string } {
  const secret = newWebhookSecret();
  const plaintext = Buffer.from(secret, 'utf8');
  try {
    return { secret, sealed: sealSecret(keyring, secretRef(checkTenant(tenant), webhookId), plaintext), keyId: keyring.primary.id };
  } finally {
    plaintext.fill(0);
  }
}

/**
 * Whether `sealed` is webhook `webhookId`'s secret sealed for `tenant` under a key of `keyring`,
 * named `keyId`: what the webhooks service checks before it stores a registration, so a webhook it
 * could never sign for is refused at once. A key this service's key file does not hold is
 * E_UNAVAILABLE (the operator's configuration: the gateway and the webhooks service must share
 * CAIRN_SECRETS_KEY_FILE); a value that is not this webhook's sealed secret is E_INPUT. Null: it opens.
 */
export function checkSealedWebhookSecret(keyring: SecretKeyring, tenant: string, webhookId: string, sealed: Uint8Array, keyId: string): CairnError | null {
  if (sealedKeyId(sealed) !== keyId) return new CairnError('E_INPUT', `the sealed secret of webhook ${webhookId} does not name key ${keyId}`, { id: webhookId });
  try {
    openSecret(keyring, secretRef(tenant, webhookId), sealed).fill(0);
    return null;
  } catch (error) {
    const given = isCairnError(error) ? error.details?.reason : undefined;
    const reason = typeof given === 'string' ? given : 'unopenable';
    if (reason === 'unknown_key') {
      return new CairnError('E_UNAVAILABLE', `the signing secret of webhook ${webhookId} is sealed under key ${keyId}, which the webhooks service's key file does not hold: the gateway and the webhooks service must share CAIRN_SECRETS_KEY_FILE`, {
        id: webhookId,
        keyId,
      });
    }
    return new CairnError('E_INPUT', `the sealed secret of webhook ${webhookId} does not open for its tenant and id (${reason})`, { id: webhookId, reason });
  }
}

/**
 * Webhooks and their delivery log on PostgreSQL (tables by the store's own migrations). The
 * webhooks service owns them: it registers, removes and replays (asked by the gateway's commands,
 * docs/adr/0027), queues receipts and records each attempt; the gateway only reads (lists, looks
 * up, shows the delivery log). A database that does not answer is E_UNAVAILABLE.
 */
export class WebhookStore {
  private constructor(private readonly dataSource: DataSource) {}

  /** Connects, brings the tables up to date (under the store's migration lock) and returns the store. */
  static async open(options: WebhookStoreOptions): Promise<WebhookStore> {
    const { createWebhookStoreDataSource, runWebhookStoreMigrations } = await import('./webhook-store-data-source.js');
    const dataSource = createWebhookStoreDataSource(options.url, {
      poolSize: Math.max(2, options.poolSize ?? 2),
      ...(options.applicationName === undefined ? {} : { applicationName: options.applicationName }),
    });
    try {
      await dataSource.initialize();
    } catch (error) {
      throw new CairnError('E_UNAVAILABLE', `cannot connect to PostgreSQL for the webhook store: ${error instanceof Error ? error.message : String(error)}`);
    }
    try {
      await runWebhookStoreMigrations(dataSource);
    } catch (error) {
      await dataSource.destroy().catch(() => undefined);
      throw new CairnError('E_UNAVAILABLE', `cannot migrate the webhook store: ${error instanceof Error ? error.message : String(error)}`);
    }
    return new WebhookStore(dataSource);
  }

  async close(): Promise<void> {
    if (this.dataSource.isInitialized) await this.dataSource.destroy();
  }

  /**
   * Registers a webhook with a fresh signing secret, stored sealed; the secret is returned this once.
   * In one process (tests, tools): the gateway seals with `sealWebhookSecret` and the webhooks service
   * registers with `register`, by command.
   */
  async create(keyring: SecretKeyring, input: { tenant: string; url: string; events: string[]; description: string | null }): Promise<{ webhook: Webhook; secret: string }> {
    const id = newWebhookId();
    const { secret, sealed, keyId } = sealWebhookSecret(keyring, checkTenant(input.tenant), id);
    const { webhook } = await this.register({ ...input, id, secretSealed: sealed, keyId });
    if (webhook === null) throw new CairnError('E_INTERNAL', 'registering a webhook returned no row');
    return { webhook, secret };
  }

  /**
   * Registers webhook `input.id` with its already sealed signing secret: the webhooks service's
   * answer to a `webhook_register` command. Idempotent by id: asked again (a command delivered twice)
   * it inserts nothing and answers `duplicate` with the row as it is, or with null when the webhook
   * was deleted since (a redelivery never brings it back). The same id with another tenant, URL or
   * filter is E_CONFLICT.
   */
  async register(input: RegisterWebhook): Promise<{ webhook: Webhook | null; duplicate: boolean }> {
    const tenant = checkTenant(input.tenant);
    return this.underWebhookLock(input.id, async (query) => {
      const [inserted] = await query<WebhookRow>(
        `INSERT INTO webhooks (id, tenant, url, events, description, secret_sealed, key_id)
         SELECT $1, $2, $3, $4, $5, $6, $7 WHERE NOT EXISTS (SELECT 1 FROM webhook_deletions WHERE id = $1)
         ON CONFLICT (id) DO NOTHING
         RETURNING id, tenant, url, events, description, created_at`,
        [input.id, tenant, input.url, input.events, input.description, Buffer.from(input.secretSealed), input.keyId],
      );
      if (inserted !== undefined) return { webhook: toWebhook(inserted), duplicate: false };
      const [held] = await query<WebhookRow>('SELECT id, tenant, url, events, description, created_at FROM webhooks WHERE id = $1', [input.id]);
      if (held !== undefined) {
        const same = held.tenant === tenant && held.url === input.url && held.description === input.description && held.events.join('\n') === input.events.join('\n');
        if (!same) throw new CairnError('E_CONFLICT', `webhook id ${input.id} is registered with another tenant, URL or filter`, { id: input.id });
        return { webhook: toWebhook(held), duplicate: true };
      }
      const [gone] = await query<{ tenant: string }>('SELECT tenant FROM webhook_deletions WHERE id = $1', [input.id]);
      if (gone === undefined || gone.tenant !== tenant) throw new CairnError('E_CONFLICT', `webhook id ${input.id} was another tenant's`, { id: input.id });
      return { webhook: null, duplicate: true };
    });
  }

  async list(tenant: string): Promise<Webhook[]> {
    const rows = await this.query<WebhookRow>('SELECT id, tenant, url, events, description, created_at FROM webhooks WHERE tenant = $1 ORDER BY created_at, id', [
      checkTenant(tenant),
    ]);
    return rows.map(toWebhook);
  }

  /** A webhook of the tenant, or null (another tenant's is null too). */
  async get(tenant: string, id: string): Promise<Webhook | null> {
    const rows = await this.query<WebhookRow>('SELECT id, tenant, url, events, description, created_at FROM webhooks WHERE tenant = $1 AND id = $2', [
      checkTenant(tenant),
      id,
    ]);
    return rows[0] === undefined ? null : toWebhook(rows[0]);
  }

  /** Removes a webhook and its delivery log; false when the tenant has none of that id (now). */
  async delete(tenant: string, id: string): Promise<boolean> {
    return (await this.remove(tenant, id)) === 'deleted';
  }

  /**
   * Removes a webhook and its delivery log, and remembers its id: the webhooks service's answer to a
   * `webhook_delete` command. `duplicate` when this tenant's webhook of that id was removed before
   * (a command delivered twice), `not_found` when the tenant never had one.
   */
  async remove(tenant: string, id: string): Promise<'deleted' | 'duplicate' | 'not_found'> {
    checkTenant(tenant);
    return this.underWebhookLock(id, async (query) => {
      // In a CTE: TypeORM answers a bare DELETE with [rows, count], a SELECT with its rows.
      const gone = await query<{ id: string }>(
        `WITH gone AS (DELETE FROM webhooks WHERE tenant = $1 AND id = $2 RETURNING id, tenant),
              kept AS (INSERT INTO webhook_deletions (id, tenant) SELECT id, tenant FROM gone ON CONFLICT (id) DO NOTHING RETURNING id)
         SELECT id FROM gone`,
        [tenant, id],
      );
      if (gone.length === 1) return 'deleted';
      const before = await query<{ id: string }>('SELECT id FROM webhook_deletions WHERE tenant = $1 AND id = $2', [tenant, id]);
      return before.length === 1 ? 'duplicate' : 'not_found';
    });
  }

  /** The webhooks of a tenant with their filters and registration times (the reactor's question). */
  async hooksOf(tenant: string): Promise<{ id: string; events: string[]; createdAt: Date }[]> {
    const rows = await this.query<{ id: string; events: string[]; created_at: Date }>('SELECT id, events, created_at FROM webhooks WHERE tenant = $1', [tenant]);
    return rows.map((row) => ({ id: row.id, events: row.events, createdAt: row.created_at }));
  }

  /**
   * Every distinct filter in force, across tenants, with the registration of its first webhook:
   * what the webhooks service routes its consumer by. A handful of rows however many webhooks.
   */
  async filterGroups(): Promise<{ events: string[]; firstCreatedAt: Date }[]> {
    const rows = await this.query<{ events: string[]; first_at: Date }>('SELECT events, min(created_at) AS first_at FROM webhooks GROUP BY events', []);
    return rows.map((row) => ({ events: row.events, firstCreatedAt: row.first_at }));
  }

  /** Queues first deliveries; one already queued for the same (webhook, event) is left as it is. Returns how many are new. */
  async enqueue(deliveries: readonly NewDelivery[]): Promise<number> {
    if (deliveries.length === 0) return 0;
    const rows = await this.query<{ id: string }>(
      `INSERT INTO webhook_deliveries (id, webhook_id, tenant, event_id, event_type, body)
       SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[])
       ON CONFLICT (webhook_id, event_id) WHERE replay_of IS NULL DO NOTHING
       RETURNING id`,
      [
        deliveries.map(() => newId('dlv')),
        deliveries.map((d) => d.webhookId),
        deliveries.map((d) => d.tenant),
        deliveries.map((d) => d.eventId),
        deliveries.map((d) => d.eventType),
        deliveries.map((d) => d.body),
      ],
    );
    return rows.length;
  }

  /**
   * Takes up to `limit` due deliveries for one attempt each, leased for `leaseMs`: a process that
   * dies holding one leaves it due again when the lease runs out (at least once).
   */
  async claimDue(limit: number, leaseMs: number): Promise<ClaimedDelivery[]> {
    const rows = await this.query<{
      id: string;
      webhook_id: string;
      tenant: string;
      event_id: string;
      event_type: string;
      body: string;
      attempts: number;
      url: string;
      secret_sealed: Buffer;
    }>(
      `WITH claimed AS (
         UPDATE webhook_deliveries d SET lease_until = now() + ($2::integer * interval '1 millisecond')
         WHERE d.id IN (
           SELECT id FROM webhook_deliveries
           WHERE status = 'pending' AND next_attempt_at <= now() AND (lease_until IS NULL OR lease_until < now())
           ORDER BY next_attempt_at, created_at LIMIT $1 FOR UPDATE SKIP LOCKED)
         RETURNING d.id, d.webhook_id, d.tenant, d.event_id, d.event_type, d.body, d.attempts)
       SELECT c.*, w.url, w.secret_sealed FROM claimed c JOIN webhooks w ON w.id = c.webhook_id`,
      [limit, leaseMs],
    );
    return rows.map((row) => ({
      id: row.id,
      webhookId: row.webhook_id,
      tenant: row.tenant,
      eventId: row.event_id,
      eventType: row.event_type,
      body: row.body,
      attempt: row.attempts + 1,
      url: row.url,
      secretSealed: new Uint8Array(row.secret_sealed),
    }));
  }

  /**
   * Records attempt `attempt` of a claimed delivery and what follows it: delivered, dead, or due
   * again after `retryInMs`. An attempt already recorded (two holders after a lease ran out) is
   * recorded once; the delivery moves only from the attempt count it was claimed at.
   */
  async recordAttempt(
    delivery: Pick<ClaimedDelivery, 'id' | 'attempt'>,
    outcome: { statusCode: number | null; error: string | null; durationMs: number; next: { status: 'delivered' } | { status: 'dead' } | { status: 'pending'; retryInMs: number } },
  ): Promise<boolean> {
    return this.dataSource.transaction(async (manager) => {
      const inserted = await manager.query<unknown[]>(
        `INSERT INTO webhook_delivery_attempts (delivery_id, attempt, duration_ms, status_code, error) VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT DO NOTHING RETURNING attempt`,
        [delivery.id, delivery.attempt, Math.max(0, Math.round(outcome.durationMs)), outcome.statusCode, outcome.error],
      );
      if (inserted.length === 0) return false;
      const retryInMs = outcome.next.status === 'pending' ? outcome.next.retryInMs : 0;
      await manager.query(
        `UPDATE webhook_deliveries SET attempts = $2, status = $3, last_status = $4, last_error = $5, lease_until = NULL,
           next_attempt_at = now() + ($6::integer * interval '1 millisecond'),
           delivered_at = CASE WHEN $3 = 'delivered' THEN now() ELSE delivered_at END
         WHERE id = $1 AND attempts = $2 - 1`,
        [delivery.id, delivery.attempt, outcome.next.status, outcome.statusCode, outcome.error, retryInMs],
      );
      return true;
    }).catch((error: unknown) => {
      throw unavailable(error);
    });
  }

  /** A webhook's delivery log, newest first (with every attempt); null when the tenant has no such webhook. */
  async deliveries(tenant: string, webhookId: string, options: { limit: number; status?: DeliveryStatus }): Promise<Delivery[] | null> {
    if ((await this.get(tenant, webhookId)) === null) return null;
    const params: unknown[] = [webhookId, options.limit];
    if (options.status !== undefined) params.push(options.status);
    const rows = await this.query<DeliveryRow>(
      `SELECT ${DELIVERY_COLUMNS} FROM webhook_deliveries d WHERE d.webhook_id = $1 ${options.status === undefined ? '' : 'AND d.status = $3'}
       ORDER BY d.created_at DESC, d.id DESC LIMIT $2`,
      params,
    );
    return rows.map(toDelivery);
  }

  /**
   * Queues the same payload again as the new delivery `replayId` (`replayOf` the one named): the
   * webhooks service's answer to a `webhook_replay` command. Idempotent by `replayId`: asked again
   * (a command delivered twice), it queues nothing and returns the replay as `duplicate`. Null when
   * there is no such delivery of the tenant's webhook (or `replayId` is taken by another one).
   */
  async replay(tenant: string, webhookId: string, deliveryId: string, replayId: string = newId('dlv')): Promise<{ delivery: Delivery; duplicate: boolean } | null> {
    const rows = await this.query<{ id: string }>(
      `INSERT INTO webhook_deliveries (id, webhook_id, tenant, event_id, event_type, body, replay_of)
       SELECT $4, d.webhook_id, d.tenant, d.event_id, d.event_type, d.body, d.id
       FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id
       WHERE w.tenant = $1 AND d.webhook_id = $2 AND d.id = $3
       ON CONFLICT (id) DO NOTHING
       RETURNING id`,
      [checkTenant(tenant), webhookId, deliveryId, replayId],
    );
    const [row] = await this.query<DeliveryRow & { tenant: string }>(
      `SELECT ${DELIVERY_COLUMNS}, d.tenant FROM webhook_deliveries d WHERE d.id = $1 AND d.webhook_id = $2 AND d.replay_of = $3`,
      [replayId, webhookId, deliveryId],
    );
    if (row === undefined || row.tenant !== tenant) return null;
    return { delivery: toDelivery(row), duplicate: rows[0] === undefined };
  }

  /** One delivery of the tenant's webhook, or null. Reads only. */
  async delivery(tenant: string, webhookId: string, deliveryId: string): Promise<Delivery | null> {
    const [row] = await this.query<DeliveryRow>(
      `SELECT ${DELIVERY_COLUMNS} FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id WHERE w.tenant = $1 AND d.webhook_id = $2 AND d.id = $3`,
      [checkTenant(tenant), webhookId, deliveryId],
    );
    return row === undefined ? null : toDelivery(row);
  }

  /**
   * Every tenant's deliveries by status and the attempts that failed (no answer, or not 2xx), for
   * `/metrics`: two aggregates, bounded by `statement_timeout` (ms) so a slow table cannot hold a scrape.
   */
  async deliveryCounts(timeoutMs: number): Promise<{ byStatus: Record<DeliveryStatus, number>; failedAttempts: number }> {
    return this.dataSource
      .transaction(async (manager) => {
        await manager.query(`SET LOCAL statement_timeout = ${Math.max(1, Math.floor(timeoutMs))}`);
        const rows = await manager.query<{ status: DeliveryStatus; n: number }[]>(`SELECT status, count(*)::int AS n FROM webhook_deliveries GROUP BY status`);
        const [failed] = await manager.query<{ n: number }[]>(
          `SELECT count(*)::int AS n FROM webhook_delivery_attempts WHERE status_code IS NULL OR status_code < 200 OR status_code > 299`,
        );
        const byStatus: Record<DeliveryStatus, number> = { pending: 0, delivered: 0, dead: 0 };
        for (const row of rows) byStatus[row.status] = row.n;
        return { byStatus, failedAttempts: failed?.n ?? 0 };
      })
      .catch((error: unknown) => {
        throw unavailable(error);
      });
  }

  /** Runs `work` in one transaction holding a lock on webhook `id`: its registration and its deletion never interleave. */
  private async underWebhookLock<T>(id: string, work: (query: <R>(sql: string, params: unknown[]) => Promise<R[]>) => Promise<T>): Promise<T> {
    return this.dataSource
      .transaction(async (manager) => {
        await manager.query('SELECT pg_advisory_xact_lock($1::integer, hashtext($2))', [WEBHOOK_LOCK_CLASS, id]);
        return work(<R>(sql: string, params: unknown[]) => manager.query<R[]>(sql, params));
      })
      .catch((error: unknown) => {
        throw unavailable(error);
      });
  }

  private async query<T>(sql: string, params: unknown[]): Promise<T[]> {
    try {
      return await this.dataSource.query<T[]>(sql, params);
    } catch (error) {
      throw unavailable(error);
    }
  }
}

function unavailable(error: unknown): unknown {
  if (isCairnError(error)) return error;
  return new CairnError('E_UNAVAILABLE', `the webhook store did not answer: ${error instanceof Error ? error.message : String(error)}`);
}
