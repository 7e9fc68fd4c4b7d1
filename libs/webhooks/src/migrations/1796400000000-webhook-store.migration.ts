import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Webhooks and their delivery log. Operational state, not evidence (PRODUCT.md, "State that is
 * not evidence"): nothing here is appended to the log or rebuilt from it. A signing secret is
 * stored sealed (AES-256-GCM under the operator's key file, like the secret store), because it
 * must be opened to sign. Hand-written and never edited once committed.
 */
export class WebhookStore1796400000000 implements MigrationInterface {
  readonly name = 'WebhookStore1796400000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE webhooks (
        id text NOT NULL,
        tenant text NOT NULL,
        url text NOT NULL,
        events text[] NOT NULL,
        description text NULL,
        secret_sealed bytea NOT NULL,
        key_id text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT pk_webhooks PRIMARY KEY (id),
        CONSTRAINT ck_webhooks_id CHECK (id ~ '^wh_[0-9a-f]{24}$'),
        CONSTRAINT ck_webhooks_events CHECK (cardinality(events) BETWEEN 1 AND 32),
        CONSTRAINT ck_webhooks_key_id CHECK (key_id ~ '^[0-9a-f]{16}$')
      )`);
    await queryRunner.query(`CREATE INDEX ix_webhooks_tenant ON webhooks (tenant, created_at)`);
    await queryRunner.query(`
      CREATE TABLE webhook_deliveries (
        id text NOT NULL,
        webhook_id text NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
        tenant text NOT NULL,
        event_id text NOT NULL,
        event_type text NOT NULL,
        body text NOT NULL,
        status text NOT NULL DEFAULT 'pending',
        attempts integer NOT NULL DEFAULT 0,
        next_attempt_at timestamptz NOT NULL DEFAULT now(),
        lease_until timestamptz NULL,
        last_status integer NULL,
        last_error text NULL,
        replay_of text NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        delivered_at timestamptz NULL,
        CONSTRAINT pk_webhook_deliveries PRIMARY KEY (id),
        CONSTRAINT ck_webhook_deliveries_id CHECK (id ~ '^dlv_[0-9a-f]{24}$'),
        CONSTRAINT ck_webhook_deliveries_status CHECK (status IN ('pending', 'delivered', 'dead')),
        CONSTRAINT ck_webhook_deliveries_attempts CHECK (attempts >= 0)
      )`);
    // One first delivery per (webhook, event): a receipt the reactor sees twice is queued once.
    await queryRunner.query(`CREATE UNIQUE INDEX ux_webhook_deliveries_event ON webhook_deliveries (webhook_id, event_id) WHERE replay_of IS NULL`);
    await queryRunner.query(`CREATE INDEX ix_webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending'`);
    await queryRunner.query(`CREATE INDEX ix_webhook_deliveries_log ON webhook_deliveries (webhook_id, created_at DESC)`);
    await queryRunner.query(`
      CREATE TABLE webhook_delivery_attempts (
        delivery_id text NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
        attempt integer NOT NULL,
        at timestamptz NOT NULL DEFAULT now(),
        duration_ms integer NOT NULL,
        status_code integer NULL,
        error text NULL,
        CONSTRAINT pk_webhook_delivery_attempts PRIMARY KEY (delivery_id, attempt)
      )`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE webhook_delivery_attempts`);
    await queryRunner.query(`DROP TABLE webhook_deliveries`);
    await queryRunner.query(`DROP TABLE webhooks`);
  }
}
