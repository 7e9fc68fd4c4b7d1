import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Intake's idempotency keys: one row per (tenant, key), naming the run that key created and the
 * hash of the body it was created with. Kept beyond JetStream's dedupe window (PRODUCT.md).
 * Hand-written and never edited once committed; a change is a new migration.
 */
export class IntakeIdempotency1796100000000 implements MigrationInterface {
  readonly name = 'IntakeIdempotency1796100000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE intake_idempotency (
        tenant text NOT NULL,
        key_sha256 text NOT NULL,
        body_sha256 text NOT NULL,
        run_id text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT pk_intake_idempotency PRIMARY KEY (tenant, key_sha256)
      )`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE intake_idempotency`);
  }
}
