import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The sandboxes projection: one row per interactive sandbox session (`sbx_…` chain), folded from
 * the chain's receipts like `runs`. Empty when created: sessions projected before it are filled in
 * by `cairn projections rebuild`, which replays the stream (I-10).
 */
export class SandboxesProjection1796400000000 implements MigrationInterface {
  readonly name = 'SandboxesProjection1796400000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE sandboxes (
        sandbox_id text NOT NULL,
        tenant text NOT NULL,
        state text NOT NULL,
        image text,
        image_id text,
        caps jsonb,
        network jsonb NOT NULL,
        worker_id text,
        created_at timestamptz NOT NULL,
        ready_at timestamptz,
        expires_at timestamptz,
        idle_seconds integer,
        last_activity_at timestamptz NOT NULL,
        operations integer NOT NULL,
        destroy_reason text,
        error_code text,
        updated_at timestamptz NOT NULL,
        head_seq integer NOT NULL,
        head_hash text NOT NULL,
        sealed boolean NOT NULL,
        last_stream_seq bigint NOT NULL,
        CONSTRAINT pk_sandboxes PRIMARY KEY (sandbox_id)
      )`);
    await queryRunner.query(`CREATE INDEX ix_sandboxes_tenant_created ON sandboxes (tenant, created_at, sandbox_id)`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE sandboxes`);
  }
}
