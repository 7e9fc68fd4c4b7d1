import { CairnError, RunStateSchema } from '@cairn/contracts';
import { createDataSource } from '@cairn/persistence';
import type { RunUsageRecord } from '@cairn/policy';
import { SERVICE_CONFIG } from '@cairn/service-kit';
import { Inject, Injectable } from '@nestjs/common';
import type { OnModuleDestroy } from '@nestjs/common';
import type { DataSource } from 'typeorm';
import type { PolicyServiceConfig } from './policy.config.js';
import { sandboxUsageRecord } from './sandbox-usage.js';
import type { SandboxUsageRow } from './sandbox-usage.js';

const ISO = `'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'`;
/** The longest wait between two looks at the projection's progress. */
const POLL_MS = 50;
const DAY_MS = 86_400_000;

interface UsageRow {
  run_id: string;
  job: string | null;
  state: string;
  cpus: number | null;
  memory_mib: number | null;
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
 * the job, runs in flight and runs with sandbox time in the last 24 hours are read — and, from the
 * sandboxes projection, the tenant's interactive sandbox sessions, which hold a slot and CPUs as a
 * running run does (counted like one: `sandboxUsageRecord`). Nothing is written. The connection is
 * opened on first use, so a policy without budgets never needs one.
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

  /**
   * The tenant's runs and sandbox sessions submitted (requested) before `runId` — a run's or a
   * sandbox's chain — that count for a run of `job` decided at `nowMs`.
   */
  async earlierRuns(runId: string, tenant: string, job: string | undefined, nowMs: number): Promise<RunUsageRecord[]> {
    const ds = await this.connection();
    const position = await this.submittedStreamSeq(ds, runId);
    const rows = await query<UsageRow>(
      ds,
      `SELECT r.run_id, r.job, r.state, r.cpus,
              -- What a worker reserves for a run in flight (its granted memory plus tmpfs), for the memory quota.
              CASE WHEN r.state IN ('SUBMITTED', 'AWAITING_APPROVAL', 'SCHEDULED', 'RUNNING') THEN (
                SELECT ((d.receipt::jsonb -> 'caps' ->> 'memory_mib')::float8 + (d.receipt::jsonb -> 'caps' ->> 'disk_mib')::float8)
                  FROM evidence_events d WHERE d.chain_id = r.run_id AND d.type = 'policy.decided' LIMIT 1
              ) END AS memory_mib,
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
    // Interactive sandboxes hold a worker slot and CPUs like running runs: they count in the
    // tenant's runs in flight and CPU-seconds too (docs/sandboxes.md, "Limits").
    const sandboxes = await query<SandboxUsageRow>(
      ds,
      `SELECT s.sandbox_id, s.state, (s.caps->>'cpus')::float8 AS cpus,
              ((s.caps->>'memory_mib')::float8 + (s.caps->>'disk_mib')::float8) AS memory_mib,
              to_char(s.ready_at AT TIME ZONE 'UTC', ${ISO}) AS ready_at,
              to_char(s.updated_at AT TIME ZONE 'UTC', ${ISO}) AS updated_at
         FROM sandboxes s
         JOIN evidence_events e ON e.chain_id = s.sandbox_id AND e.seq = 1
        WHERE s.tenant = $1
          AND e.stream_seq < $2
          AND (s.state IN ('PENDING', 'READY')
               OR (s.ready_at IS NOT NULL AND s.updated_at >= $3))`,
      [tenant, position, new Date(nowMs - DAY_MS).toISOString()],
    );
    return [
      ...rows.map((row) => ({
        runId: row.run_id,
        job: row.job,
        // A state the lifecycle does not know fails the decision (fail closed), it is not guessed.
        state: RunStateSchema.parse(row.state),
        cpus: row.cpus,
        memoryMiB: row.memory_mib,
        startedAt: row.started_at,
        endedAt: row.ended_at,
        updatedAt: row.updated_at,
      })),
      ...sandboxes.map(sandboxUsageRecord),
    ];
  }

  /** The stream seq of the chain's first receipt (`run.submitted`, `sandbox.requested`), once the projection has it; E_UNAVAILABLE past the wait. */
  private async submittedStreamSeq(ds: DataSource, runId: string): Promise<number> {
    const deadline = Date.now() + this.config.CAIRN_POLICY_USAGE_WAIT_MS;
    for (let attempt = 0; ; attempt++) {
      const [row] = await query<{ seq: number }>(ds, 'SELECT stream_seq::float8 AS seq FROM evidence_events WHERE chain_id = $1 AND seq = 1', [runId]);
      if (row !== undefined) return row.seq;
      if (Date.now() >= deadline) {
        throw new CairnError('E_UNAVAILABLE', `the runs projection has not reached ${runId} yet, so its budgets cannot be counted; is the projector running?`, { runId });
      }
      // The projector is usually a few ms behind: look again soon, then less often.
      await new Promise((resolve) => setTimeout(resolve, Math.min(POLL_MS, 5 * 2 ** attempt)));
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
