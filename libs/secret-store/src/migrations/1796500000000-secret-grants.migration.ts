import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Secrets are governed (docs/secrets.md, "Who may use a secret"): each records the key that last
 * set it, and `secret_grants` holds who else may use it — one key (`key:<id>`) or every key of the
 * tenant holding a scope (`scope:<scope>`). A grant goes with its secret. Rows stored before this
 * migration have no setter and no grant: only the tenant's admin keys may use them until granted.
 */
export class SecretGrants1796500000000 implements MigrationInterface {
  readonly name = 'SecretGrants1796500000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE secrets ADD COLUMN set_by text NULL`);
    await queryRunner.query(`
      CREATE TABLE secret_grants (
        tenant text NOT NULL,
        name text NOT NULL,
        grantee text NOT NULL,
        granted_by text NOT NULL,
        granted_at timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT pk_secret_grants PRIMARY KEY (tenant, name, grantee),
        CONSTRAINT fk_secret_grants_secret FOREIGN KEY (tenant, name) REFERENCES secrets (tenant, name) ON DELETE CASCADE,
        CONSTRAINT ck_secret_grants_grantee CHECK (grantee ~ '^(key:[A-Za-z0-9_-]{1,64}|scope:[a-z]+(:[a-z]+)?)$')
      )`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE secret_grants`);
    await queryRunner.query(`ALTER TABLE secrets DROP COLUMN set_by`);
  }
}
