import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The evidence projections: receipts, runs, poison messages and projection positions.
 * Hand-written and never edited once committed; a change is a new migration.
 */
export class EvidenceProjections1796004095823 implements MigrationInterface {
  readonly name = 'EvidenceProjections1796004095823';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE evidence_events (
        stream_seq bigint NOT NULL,
        chain_id text NOT NULL,
        seq integer NOT NULL,
        type text NOT NULL,
        tenant text NOT NULL,
        actor text NOT NULL,
        ts timestamptz NOT NULL,
        causation text,
        prev_hash text NOT NULL,
        hash text NOT NULL,
        receipt jsonb NOT NULL,
        CONSTRAINT pk_evidence_events PRIMARY KEY (stream_seq),
        CONSTRAINT uq_evidence_events_chain_seq UNIQUE (chain_id, seq)
      )`);

    // Append-only: UPDATE and DELETE always raise; TRUNCATE raises unless a projection rebuild
    // set cairn.projection_rebuild = 'on' for its own transaction (SET LOCAL). Statement-level,
    // so even a statement that matches no row is refused.
    await queryRunner.query(`
      CREATE FUNCTION cairn_evidence_events_append_only() RETURNS trigger
      LANGUAGE plpgsql AS $$
      BEGIN
        IF TG_OP = 'TRUNCATE' AND coalesce(current_setting('cairn.projection_rebuild', true), '') = 'on' THEN
          RETURN NULL;
        END IF;
        RAISE EXCEPTION 'evidence_events is append-only: % refused', TG_OP
          USING ERRCODE = 'restrict_violation',
                HINT = 'only a projection rebuild may TRUNCATE it, inside its own transaction';
      END
      $$`);
    await queryRunner.query(`
      CREATE TRIGGER evidence_events_append_only
      BEFORE UPDATE OR DELETE ON evidence_events
      FOR EACH STATEMENT EXECUTE FUNCTION cairn_evidence_events_append_only()`);
    await queryRunner.query(`
      CREATE TRIGGER evidence_events_truncate_guard
      BEFORE TRUNCATE ON evidence_events
      FOR EACH STATEMENT EXECUTE FUNCTION cairn_evidence_events_append_only()`);

    await queryRunner.query(`
      CREATE TABLE runs (
        run_id text NOT NULL,
        tenant text NOT NULL,
        name text,
        state text NOT NULL,
        error_code text,
        verdict text,
        score double precision,
        max_score double precision,
        upper_bound double precision,
        created_at timestamptz NOT NULL,
        updated_at timestamptz NOT NULL,
        last_seq integer NOT NULL,
        head_hash text NOT NULL,
        event_count integer NOT NULL,
        sealed boolean NOT NULL,
        last_stream_seq bigint NOT NULL,
        CONSTRAINT pk_runs PRIMARY KEY (run_id)
      )`);
    await queryRunner.query(`CREATE INDEX ix_runs_tenant_created ON runs (tenant, created_at, run_id)`);

    await queryRunner.query(`
      CREATE TABLE poison_events (
        stream_seq bigint NOT NULL,
        subject text NOT NULL,
        chain_id text,
        reason text NOT NULL,
        detail text NOT NULL,
        raw bytea NOT NULL,
        raw_length integer NOT NULL,
        recorded_at timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT pk_poison_events PRIMARY KEY (stream_seq)
      )`);

    await queryRunner.query(`
      CREATE TABLE projection_positions (
        name text NOT NULL,
        stream text NOT NULL,
        last_stream_seq bigint NOT NULL,
        updated_at timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT pk_projection_positions PRIMARY KEY (name)
      )`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE projection_positions`);
    await queryRunner.query(`DROP TABLE poison_events`);
    await queryRunner.query(`DROP TABLE runs`);
    // Dropping the table drops its triggers; the function goes after them.
    await queryRunner.query(`DROP TABLE evidence_events`);
    await queryRunner.query(`DROP FUNCTION cairn_evidence_events_append_only()`);
  }
}
