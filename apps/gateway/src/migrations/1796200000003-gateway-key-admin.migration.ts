import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Keys and tenants administered through the product (docs/adr/0011). A key row is material until
 * the log says otherwise: the admin routes insert it with `issued_at` null (pending, never accepted)
 * and set it once its `admin.key_created` is on the admin chain (a row inserted otherwise is issued
 * at once, as before). A rotation keeps id and prefix: `next_sha256` holds the new
 * secret's hash until its `admin.key_rotated` is recorded, `previous_sha256` the old one while its
 * grace lasts. `unrecorded` names an act the table holds and the log does not yet (the bootstrap
 * key's creation, a revocation whose receipt failed): the gateway's recorder appends it. Existing
 * keys count as issued and are marked so (their creation, and revocation, recorded at the next
 * start), and their tenants (and `default`) as tenants whose creation is not yet recorded.
 * Committed migrations are never edited.
 */
export class GatewayKeyAdmin1796200000003 implements MigrationInterface {
  readonly name = 'GatewayKeyAdmin1796200000003';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      ALTER TABLE api_keys
        ADD COLUMN issued_at timestamptz DEFAULT now(),
        ADD COLUMN created_by text,
        ADD COLUMN last_four text,
        ADD COLUMN rotations integer NOT NULL DEFAULT 0,
        ADD COLUMN rotated_at timestamptz,
        ADD COLUMN next_sha256 text,
        ADD COLUMN next_last_four text,
        ADD COLUMN previous_sha256 text,
        ADD COLUMN previous_valid_until timestamptz,
        ADD COLUMN revoked_by text,
        ADD COLUMN unrecorded text,
        ADD COLUMN idempotency_sha256 text,
        ADD COLUMN request_sha256 text,
        ADD CONSTRAINT ck_api_keys_next_sha256 CHECK (next_sha256 IS NULL OR next_sha256 ~ '^[0-9a-f]{64}$'),
        ADD CONSTRAINT ck_api_keys_previous_sha256 CHECK (previous_sha256 IS NULL OR previous_sha256 ~ '^[0-9a-f]{64}$'),
        ADD CONSTRAINT ck_api_keys_unrecorded CHECK (unrecorded IS NULL OR unrecorded IN ('created', 'revoked')),
        ADD CONSTRAINT ck_api_keys_rotations CHECK (rotations >= 0),
        ADD CONSTRAINT uq_api_keys_idempotency UNIQUE (tenant, idempotency_sha256)`);
    // Keys that predate the admin chains: issued, and marked for the recorder to put their creation (and revocation) on it.
    await queryRunner.query(`UPDATE api_keys SET issued_at = created_at, unrecorded = CASE WHEN revoked_at IS NULL THEN 'created' ELSE 'revoked' END`);
    await queryRunner.query(`CREATE INDEX ix_api_keys_tenant_created ON api_keys (tenant, created_at)`);
    await queryRunner.query(`
      CREATE TABLE tenants (
        id text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        created_by text,
        recorded_at timestamptz,
        CONSTRAINT pk_tenants PRIMARY KEY (id),
        CONSTRAINT ck_tenants_id CHECK (id ~ '^[a-z0-9][a-z0-9_-]{0,63}$')
      )`);
    await queryRunner.query(`
      INSERT INTO tenants (id, created_at)
      SELECT tenant, min(created_at) FROM api_keys GROUP BY tenant
      UNION ALL SELECT 'default', now() WHERE NOT EXISTS (SELECT 1 FROM api_keys WHERE tenant = 'default')`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE tenants`);
    await queryRunner.query(`DROP INDEX ix_api_keys_tenant_created`);
    await queryRunner.query(`
      ALTER TABLE api_keys
        DROP CONSTRAINT uq_api_keys_idempotency,
        DROP CONSTRAINT ck_api_keys_rotations,
        DROP CONSTRAINT ck_api_keys_unrecorded,
        DROP CONSTRAINT ck_api_keys_previous_sha256,
        DROP CONSTRAINT ck_api_keys_next_sha256,
        DROP COLUMN request_sha256,
        DROP COLUMN idempotency_sha256,
        DROP COLUMN unrecorded,
        DROP COLUMN revoked_by,
        DROP COLUMN previous_valid_until,
        DROP COLUMN previous_sha256,
        DROP COLUMN next_last_four,
        DROP COLUMN next_sha256,
        DROP COLUMN rotated_at,
        DROP COLUMN rotations,
        DROP COLUMN last_four,
        DROP COLUMN created_by,
        DROP COLUMN issued_at`);
  }
}
