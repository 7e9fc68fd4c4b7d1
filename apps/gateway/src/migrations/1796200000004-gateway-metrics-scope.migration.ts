import type { MigrationInterface, QueryRunner } from 'typeorm';

/** API keys may carry `metrics:read` (scrapes `/metrics`, nothing else). Committed migrations are never edited. */
export class GatewayMetricsScope1796200000004 implements MigrationInterface {
  readonly name = 'GatewayMetricsScope1796200000004';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE api_keys DROP CONSTRAINT ck_api_keys_scopes`);
    await queryRunner.query(
      `ALTER TABLE api_keys ADD CONSTRAINT ck_api_keys_scopes CHECK (cardinality(scopes) > 0 AND scopes <@ ARRAY['runs:read', 'runs:write', 'approve', 'secrets:write', 'secrets:use', 'metrics:read', 'admin']::text[])`,
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE api_keys DROP CONSTRAINT ck_api_keys_scopes`);
    await queryRunner.query(
      `ALTER TABLE api_keys ADD CONSTRAINT ck_api_keys_scopes CHECK (cardinality(scopes) > 0 AND scopes <@ ARRAY['runs:read', 'runs:write', 'approve', 'secrets:write', 'secrets:use', 'admin']::text[])`,
    );
  }
}
