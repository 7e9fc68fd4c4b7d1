import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Whether the run's current attempt has been placed (ADR 0035): a `run.scheduled` after the last
 * `run.retried`, or at all on a chain with none. The lifecycle refuses a `run.retried` of an
 * attempt never placed (a run approval held before any placement). Rows projected before this are
 * filled in from the receipts already projected, exactly as the fold sets it (every receipt it
 * applies, a fault too); a rebuild from the stream gives the same values (I-10). The default
 * (false) is only for a row inserted by hand: the writer always sets it.
 */
export class RunPlaced1796700000000 implements MigrationInterface {
  readonly name = 'RunPlaced1796700000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE runs ADD COLUMN placed boolean NOT NULL DEFAULT false`);
    await queryRunner.query(`
      UPDATE runs r SET placed = true
      FROM (
        SELECT chain_id,
               max(seq) FILTER (WHERE type = 'run.scheduled') AS scheduled,
               max(seq) FILTER (WHERE type = 'run.retried') AS retried
        FROM evidence_events
        WHERE type IN ('run.scheduled', 'run.retried')
        GROUP BY chain_id
      ) p
      WHERE p.chain_id = r.run_id AND p.scheduled IS NOT NULL AND (p.retried IS NULL OR p.scheduled > p.retried)`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE runs DROP COLUMN placed`);
  }
}
