import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The gateway's API keys: one row per key, found by its public prefix, holding only the SHA-256
 * of the whole key. Hand-written and never edited once committed; a change is a new migration.
 */
export class GatewayApiKeys1796200000000 implements MigrationInterface {
  readonly name = 'GatewayApiKeys1796200000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE api_keys (
        id text NOT NULL,
        prefix text NOT NULL,
        key_sha256 text NOT NULL,
        tenant text NOT NULL,
        scopes text[] NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        expires_at timestamptz,
        revoked_at timestamptz,
        CONSTRAINT pk_api_keys PRIMARY KEY (id),
        CONSTRAINT uq_api_keys_prefix UNIQUE (prefix),
        CONSTRAINT ck_api_keys_sha256 CHECK (key_sha256 ~ '^[0-9a-f]{64}$'),
        CONSTRAINT ck_api_keys_scopes CHECK (cardinality(scopes) > 0 AND scopes <@ ARRAY['runs:read', 'runs:write', 'approve', 'admin']::text[])
      )`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE api_keys`);
  }
}
