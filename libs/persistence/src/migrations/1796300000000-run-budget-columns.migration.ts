import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * What policy needs to count budgets from the runs projection: the run's job, the CPUs it was
 * granted, and when its sandbox came and went (receipt `ts`, like every other column). Rows
 * projected before this are filled in from the receipts already projected; a rebuild from the
 * stream gives the same values (I-10).
 */
export class RunBudgetColumns1796300000000 implements MigrationInterface {
  readonly name = 'RunBudgetColumns1796300000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      ALTER TABLE runs
        ADD COLUMN job text,
        ADD COLUMN cpus double precision,
        ADD COLUMN started_at timestamptz,
        ADD COLUMN ended_at timestamptz`);
    await queryRunner.query(`CREATE INDEX ix_runs_tenant_job ON runs (tenant, job)`);
    await queryRunner.query(`
      UPDATE runs r SET job = e.receipt::jsonb -> 'spec' ->> 'job'
      FROM evidence_events e
      WHERE e.chain_id = r.run_id AND e.seq = 1 AND e.type = 'run.submitted'`);
    await queryRunner.query(`
      UPDATE runs r SET cpus = (e.receipt::jsonb -> 'caps' ->> 'cpus')::double precision
      FROM evidence_events e
      WHERE e.chain_id = r.run_id AND e.type = 'policy.decided' AND (e.receipt::jsonb -> 'caps' ->> 'cpus') IS NOT NULL`);
    await queryRunner.query(`
      UPDATE runs r SET started_at = s.ts
      FROM (SELECT chain_id, min(ts) AS ts FROM evidence_events WHERE type = 'sandbox.created' GROUP BY chain_id) s
      WHERE s.chain_id = r.run_id`);
    await queryRunner.query(`
      UPDATE runs r SET ended_at = d.ts
      FROM (SELECT chain_id, max(ts) AS ts FROM evidence_events WHERE type = 'sandbox.destroyed' GROUP BY chain_id) d
      WHERE d.chain_id = r.run_id`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX ix_runs_tenant_job`);
    await queryRunner.query(`ALTER TABLE runs DROP COLUMN ended_at, DROP COLUMN started_at, DROP COLUMN cpus, DROP COLUMN job`);
  }
}
