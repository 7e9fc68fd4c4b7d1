import type { MigrationInterface, QueryRunner } from 'typeorm';

/** API keys may carry `secrets:use` (a run or sandbox they start may use a secret granted to them). Committed migrations are never edited. */
export class GatewaySecretsUseScope1796200000002 implements MigrationInterface {
  readonly name = 'GatewaySecretsUseScope1796200000002';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE api_keys DROP CONSTRAINT ck_api_keys_scopes`);
    await queryRunner.query(
      `ALTER TABLE api_keys ADD CONSTRAINT ck_api_keys_scopes CHECK (cardinality(scopes) > 0 AND scopes <@ ARRAY['runs:read', 'runs:write', 'approve', 'secrets:write', 'secrets:use', 'admin']::text[])`,
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE api_keys DROP CONSTRAINT ck_api_keys_scopes`);
    await queryRunner.query(
      `ALTER TABLE api_keys ADD CONSTRAINT ck_api_keys_scopes CHECK (cardinality(scopes) > 0 AND scopes <@ ARRAY['runs:read', 'runs:write', 'approve', 'secrets:write', 'admin']::text[])`,
    );
  }
}
