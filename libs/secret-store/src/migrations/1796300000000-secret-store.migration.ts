import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The secret store: one row per (tenant, name) holding the value sealed with AES-256-GCM under the
 * operator's key (`@cairn/secrets`), never the value itself. Not evidence and not a projection: it
 * is never rebuilt from the log, and nothing of it is appended there. Hand-written and never
 * edited once committed; a change is a new migration.
 */
export class SecretStore1796300000000 implements MigrationInterface {
  readonly name = 'SecretStore1796300000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE secrets (
        tenant text NOT NULL,
        name text NOT NULL,
        sealed bytea NOT NULL,
        key_id text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT pk_secrets PRIMARY KEY (tenant, name),
        CONSTRAINT ck_secrets_name CHECK (name ~ '^[A-Z_][A-Z0-9_]{0,63}$'),
        CONSTRAINT ck_secrets_key_id CHECK (key_id ~ '^[0-9a-f]{16}$')
      )`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE secrets`);
  }
}
