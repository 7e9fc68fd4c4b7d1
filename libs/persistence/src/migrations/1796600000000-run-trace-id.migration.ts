import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The run's trace id (ADR 0031): read from the `traceparent` header of its `run.submitted` message,
 * never from a receipt body, so `cairn status` and the dashboard can name the trace an operator looks
 * for. Null for a run submitted untraced. `evidence_events` keeps bodies only, so rows projected
 * before this cannot be filled in from the database: they stay null until `cairn projections
 * rebuild` replays the stream, whose messages kept their headers (I-10).
 */
export class RunTraceId1796600000000 implements MigrationInterface {
  readonly name = 'RunTraceId1796600000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE runs ADD COLUMN trace_id text`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE runs DROP COLUMN trace_id`);
  }
}
