import { CairnError } from '@cairn/contracts';
import type pg from 'pg';
import type { DataSource } from 'typeorm';
import { createDataSource } from './data-source.js';
import { withPgClient } from './pg-client.js';
import { EVIDENCE_PROJECTION } from './projection-lock.constants.js';
import { loadFold } from './projection-rebuild.js';
import type { FoldTargets, ProjectionSource, RebuildProgress } from './projection-rebuild.js';

/** A projection table the check compares, and the column that names a row of it. */
const COMPARED = [
  { table: 'evidence_events', key: 'stream_seq', ignore: [] },
  { table: 'runs', key: 'run_id', ignore: [] },
  { table: 'sandboxes', key: 'sandbox_id', ignore: [] },
  // The wall-clock time a poison row was written differs between a live write and a fold by nature.
  { table: 'poison_events', key: 'stream_seq', ignore: ['recorded_at'] },
] as const;

export type CheckedTable = (typeof COMPARED)[number]['table'];

/** One row where the projections and the log's own fold disagree. */
export interface ProjectionDrift {
  readonly table: CheckedTable;
  /** The row's key: a run or sandbox id, or an `evidence_events` / `poison_events` stream sequence. */
  readonly key: string;
  /** `edited`: both hold the row, with other values; `missing`: only the log's fold has it; `extra`: only the projections. */
  readonly kind: 'edited' | 'missing' | 'extra';
  /** The columns whose values differ, in name order (every column for a missing or extra row). */
  readonly columns: readonly string[];
  /** Those columns as the projections hold them, and as the log folds them (null: no such row). */
  readonly live: Readonly<Record<string, unknown>> | null;
  readonly log: Readonly<Record<string, unknown>> | null;
}

export type CheckOptions = ({ dataSource: DataSource; url?: never } | { url: string; dataSource?: never }) & {
  log: ProjectionSource;
  /** At most this many drifting rows are returned per table (default 100); `driftCount` counts them all. */
  limit?: number;
  onProgress?: (progress: RebuildProgress) => void;
  progressEvery?: number;
};

export interface CheckResult {
  /** The position the projections stand at, up to which the log was folded and compared. */
  readonly lastStreamSeq: number;
  /** What the log's fold holds up to that position. */
  readonly events: number;
  readonly poison: number;
  readonly runs: number;
  readonly sandboxes: number;
  readonly drift: readonly ProjectionDrift[];
  /** Every drifting row, including those past `limit`. */
  readonly driftCount: number;
  readonly durationMs: number;
}

const TARGETS: FoldTargets = { events: 'cairn_check_evidence_events', poison: 'cairn_check_poison_events', runs: 'cairn_check_runs', sandboxes: 'cairn_check_sandboxes' };
const TARGET_OF: Readonly<Record<CheckedTable, string>> = {
  evidence_events: TARGETS.events,
  runs: TARGETS.runs,
  sandboxes: TARGETS.sandboxes,
  poison_events: TARGETS.poison,
};

/**
 * Compares the projections with what the log folds to, without changing either: a row edited,
 * deleted or added in PostgreSQL is found and named, column by column. The projections are never
 * trusted over the log; `rebuildProjections` replaces them.
 *
 * One REPEATABLE READ transaction: its first statement reads the projections' position, so every
 * later read sees the rows as of that position while live writers go on. The stream is folded up
 * to it by the rebuild's own fold into temporary copies of the tables (dropped with the
 * transaction, which is rolled back), and each table is compared with its copy in SQL.
 */
export async function checkProjections(options: CheckOptions): Promise<CheckResult> {
  if (options.dataSource !== undefined) return checkWith(options.dataSource, options);
  // The fold is COPYed in as one long statement: bounded to connect, not per statement.
  const dataSource = createDataSource(options.url, { poolSize: 1, applicationName: 'cairn-projections-check', bounds: { statementTimeoutMs: 0 } });
  await dataSource.initialize();
  try {
    return await checkWith(dataSource, options);
  } finally {
    await dataSource.destroy();
  }
}

function checkWith(dataSource: DataSource, options: CheckOptions): Promise<CheckResult> {
  const started = performance.now();
  const limit = options.limit ?? 100;
  return withPgClient(dataSource, async (client) => {
    await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
    try {
      const position = await client.query<{ stream: string; last: number }>('SELECT stream, last_stream_seq::float8 AS last FROM projection_positions WHERE name = $1', [EVIDENCE_PROJECTION]);
      const at = position.rows[0];
      if (at !== undefined && at.stream !== options.log.streamName) {
        throw new CairnError('E_CONFLICT', `the projections are of stream ${at.stream}, not ${options.log.streamName}: check them against their own stream`, {
          projected: at.stream,
          stream: options.log.streamName,
        });
      }
      const lastStreamSeq = at?.last ?? 0;
      for (const { table } of COMPARED) {
        await client.query(`CREATE TEMPORARY TABLE ${TARGET_OF[table]} (LIKE ${table} INCLUDING DEFAULTS) ON COMMIT DROP`);
      }
      const counts = await loadFold(client, options, lastStreamSeq, TARGETS, { freeze: false });
      const drift: ProjectionDrift[] = [];
      let driftCount = 0;
      for (const compared of COMPARED) {
        const found = await driftOf(client, compared, limit);
        drift.push(...found.rows);
        driftCount += found.count;
      }
      return { lastStreamSeq, ...counts, drift, driftCount, durationMs: performance.now() - started };
    } finally {
      await client.query('ROLLBACK').catch(() => undefined);
    }
  });
}

async function driftOf(client: pg.PoolClient, compared: (typeof COMPARED)[number], limit: number): Promise<{ rows: ProjectionDrift[]; count: number }> {
  const { table, key, ignore } = compared;
  const strip = ignore.map((column) => ` - '${column}'`).join('');
  // A FULL JOIN on the key: a row on one side only is missing or extra; on both, compared whole.
  const from = `FROM ${table} l FULL JOIN ${TARGET_OF[table]} f ON l.${key} = f.${key}
    WHERE l.${key} IS NULL OR f.${key} IS NULL OR (to_jsonb(l)${strip}) IS DISTINCT FROM (to_jsonb(f)${strip})`;
  const count = await client.query<{ n: number }>(`SELECT count(*)::float8 AS n ${from}`);
  const n = count.rows[0]?.n ?? 0;
  if (n === 0) return { rows: [], count: 0 };
  const { rows } = await client.query<{ key: string; live: Record<string, unknown> | null; log: Record<string, unknown> | null }>(
    `SELECT coalesce(l.${key}, f.${key})::text AS key,
            CASE WHEN l.${key} IS NULL THEN NULL ELSE to_jsonb(l)${strip} END AS live,
            CASE WHEN f.${key} IS NULL THEN NULL ELSE to_jsonb(f)${strip} END AS log
       ${from} ORDER BY coalesce(l.${key}, f.${key}) LIMIT $1`,
    [limit],
  );
  return { rows: rows.map((row) => driftRow(table, row)), count: n };
}

function driftRow(table: CheckedTable, row: { key: string; live: Record<string, unknown> | null; log: Record<string, unknown> | null }): ProjectionDrift {
  if (row.live === null) return { table, key: row.key, kind: 'missing', columns: Object.keys(row.log ?? {}).sort(), live: null, log: row.log };
  if (row.log === null) return { table, key: row.key, kind: 'extra', columns: Object.keys(row.live).sort(), live: row.live, log: null };
  const columns = [...new Set([...Object.keys(row.live), ...Object.keys(row.log)])].filter((column) => JSON.stringify(row.live?.[column]) !== JSON.stringify(row.log?.[column]))
    .sort();
  const pick = (values: Record<string, unknown>) => Object.fromEntries(columns.map((column) => [column, values[column] ?? null]));
  return { table, key: row.key, kind: 'edited', columns, live: pick(row.live), log: pick(row.log) };
}
