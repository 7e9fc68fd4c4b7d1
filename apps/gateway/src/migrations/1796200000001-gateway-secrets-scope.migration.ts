import type { MigrationInterface, QueryRunner } from 'typeorm';

/** API keys may carry `secrets:write` (the secret store's routes). A new migration: committed ones are never edited. */
export class GatewaySecretsScope1796200000001 implements MigrationInterface {
  readonly name = 'GatewaySecretsScope1796200000001';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE api_keys DROP CONSTRAINT ck_api_keys_scopes`);
    await queryRunner.query(
      `ALTER TABLE api_keys ADD CONSTRAINT ck_api_keys_scopes CHECK (cardinality(scopes) > 0 AND scopes <@ ARRAY['runs:read', 'runs:write', 'approve', 'secrets:write', 'admin']::text[])`,
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE api_keys DROP CONSTRAINT ck_api_keys_scopes`);
    await queryRunner.query(
      `ALTER TABLE api_keys ADD CONSTRAINT ck_api_keys_scopes CHECK (cardinality(scopes) > 0 AND scopes <@ ARRAY['runs:read', 'runs:write', 'approve', 'admin']::text[])`,
    );
  }
}
