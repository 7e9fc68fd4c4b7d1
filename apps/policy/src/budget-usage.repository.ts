import { CairnError, RunStateSchema } from '@cairn/contracts';
import { createDataSource } from '@cairn/persistence';
import type { RunUsageRecord } from '@cairn/policy';
import { SERVICE_CONFIG } from '@cairn/service-kit';
import { Inject, Injectable } from '@nestjs/common';
import type { OnModuleDestroy } from '@nestjs/common';
import type { DataSource } from 'typeorm';
import type { PolicyServiceConfig } from './policy.config.js';

const ISO = `'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'`;
const POLL_MS = 50;
const DAY_MS = 86_400_000;

interface UsageRow {
  run_id: string;
  job: string | null;
  state: string;
  cpus: number | null;
  started_at: string | null;
  ended_at: string | null;
  updated_at: string;
}

/**
 * The usage budgets are counted from: the tenant's runs in the runs projection that were submitted
 * before the run being decided, in stream order. Waiting until the projection holds that run's own
 * `run.submitted` means every earlier run is there too (the projector moves its position over
 * consecutive stream seqs only, docs/adr/0002), so two runs decided at once never both miss each
 * other: the later one always counts the earlier, whatever order policy decides them in. Runs of
 * the job, runs in flight and runs with sandbox time in the last 24 hours are read; nothing is
 * written. The connection is opened on first use, so a policy without budgets never needs one.
 */
@Injectable()
export class BudgetUsageRepository implements OnModuleDestroy {
  private dataSource: Promise<DataSource> | null = null;

  constructor(@Inject(SERVICE_CONFIG) private readonly config: PolicyServiceConfig) {}

  async onModuleDestroy(): Promise<void> {
    const pending = this.dataSource;
    this.dataSource = null;
    const ds = await pending?.catch(() => null);
    if (ds?.isInitialized === true) await ds.destroy();
  }

  /** The tenant's runs submitted before `runId` that count for a run of `job` decided at `nowMs`. */
  async earlierRuns(runId: string, tenant: string, job: string | undefined, nowMs: number): Promise<RunUsageRecord[]> {
    const ds = await this.connection();
    const position = await this.submittedStreamSeq(ds, runId);
    const rows = await query<UsageRow>(
      ds,
      `SELECT r.run_id, r.job, r.state, r.cpus,
              to_char(r.started_at AT TIME ZONE 'UTC', ${ISO}) AS started_at,
              to_char(r.ended_at AT TIME ZONE 'UTC', ${ISO}) AS ended_at,
              to_char(r.updated_at AT TIME ZONE 'UTC', ${ISO}) AS updated_at
         FROM runs r
         JOIN evidence_events e ON e.chain_id = r.run_id AND e.seq = 1
        WHERE r.tenant = $1
          AND e.stream_seq < $2
          AND (r.job = $3
               OR r.state IN ('SUBMITTED', 'AWAITING_APPROVAL', 'SCHEDULED', 'RUNNING')
               OR (r.started_at IS NOT NULL AND coalesce(r.ended_at, r.updated_at) >= $4))`,
      [tenant, position, job ?? null, new Date(nowMs - DAY_MS).toISOString()],
    );
    return rows.map((row) => ({
      runId: row.run_id,
      job: row.job,
      // A state the lifecycle does not know fails the decision (fail closed), it is not guessed.
      state: RunStateSchema.parse(row.state),
      cpus: row.cpus,
      startedAt: row.started_at,
      endedAt: row.ended_at,
      updatedAt: row.updated_at,
    }));
  }

  /** The stream seq of the run's `run.submitted`, once the projection has it; E_UNAVAILABLE past the wait. */
  private async submittedStreamSeq(ds: DataSource, runId: string): Promise<number> {
    const deadline = Date.now() + this.config.CAIRN_POLICY_USAGE_WAIT_MS;
    for (;;) {
      const [row] = await query<{ seq: number }>(ds, 'SELECT stream_seq::float8 AS seq FROM evidence_events WHERE chain_id = $1 AND seq = 1', [runId]);
      if (row !== undefined) return row.seq;
      if (Date.now() >= deadline) {
        throw new CairnError('E_UNAVAILABLE', `the runs projection has not reached ${runId} yet, so its budgets cannot be counted; is the projector running?`, { runId });
      }
      await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    }
  }

  private connection(): Promise<DataSource> {
    this.dataSource ??= createDataSource(this.config.CAIRN_DATABASE_URL, { poolSize: 2, applicationName: 'cairn-policy' })
      .initialize()
      .catch((error: unknown) => {
        this.dataSource = null;
        throw new CairnError('E_UNAVAILABLE', `the runs projection cannot be reached: ${error instanceof Error ? error.message : String(error)}`);
      });
    return this.dataSource;
  }
}

async function query<T>(ds: DataSource, sql: string, parameters: unknown[]): Promise<T[]> {
  try {
    return await ds.query<T[]>(sql, parameters);
  } catch (error) {
    throw new CairnError('E_UNAVAILABLE', `the runs projection cannot be read: ${error instanceof Error ? error.message : String(error)}`);
  }
}
