import { CairnError, ErrorCodeSchema, RunStateSchema, TraceIdSchema, VerdictSchema } from '@cairn/contracts';
import type { EventPage, Receipt, Run, RunList, RunState } from '@cairn/contracts';
import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { decodeRunCursor, encodeRunCursor } from './run-cursor.codec.js';

interface RunDbRow {
  run_id: string;
  tenant: string;
  name: string | null;
  state: string;
  error_code: string | null;
  verdict: string | null;
  score: number | null;
  max_score: number | null;
  upper_bound: number | null;
  created_at: string;
  updated_at: string;
  event_count: number;
  head_hash: string;
  sealed: boolean;
  trace_id: string | null;
}

/** A receipt row: its seq and type for the stream's bookkeeping, and the receipt as stored. */
export interface ReceiptRow {
  seq: number;
  type: string;
  receipt: Receipt;
}

const ISO = `'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'`;
// Times rendered exactly as receipts write them (the projection's times are receipt `ts`).
const RUN_COLUMNS = `run_id, tenant, name, state, error_code, verdict, score, max_score, upper_bound,
  to_char(created_at AT TIME ZONE 'UTC', ${ISO}) AS created_at,
  to_char(updated_at AT TIME ZONE 'UTC', ${ISO}) AS updated_at,
  event_count, head_hash, sealed, trace_id`;

/** PostgreSQL's "undefined table": the projections have not been migrated into this database. */
const UNDEFINED_TABLE = '42P01';

/** A read of the projections; a database that cannot answer is E_UNAVAILABLE, saying why. */
export async function queryProjections<T>(dataSource: DataSource, sql: string, parameters: unknown[]): Promise<T[]> {
  try {
    return await dataSource.query<T[]>(sql, parameters);
  } catch (error) {
    const code = typeof error === 'object' && error !== null && 'code' in error ? error.code : undefined;
    if (code === UNDEFINED_TABLE) throw new CairnError('E_UNAVAILABLE', 'the projections are not migrated in this database yet (start the projector)');
    throw new CairnError('E_UNAVAILABLE', `the projections cannot be read: ${error instanceof Error ? error.message : String(error)}`);
  }
}

function toRun(row: RunDbRow): Run {
  return {
    runId: row.run_id,
    tenant: row.tenant,
    name: row.name,
    state: RunStateSchema.parse(row.state),
    errorCode: row.error_code === null ? null : ErrorCodeSchema.parse(row.error_code),
    verdict: row.verdict === null ? null : VerdictSchema.parse(row.verdict),
    score: row.score,
    maxScore: row.max_score,
    upperBound: row.upper_bound,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    eventCount: row.event_count,
    headHash: row.head_hash,
    sealed: row.sealed,
    // Absent, not null, for a run submitted untraced: the field names a trace only when there is one.
    ...(row.trace_id === null ? {} : { traceId: TraceIdSchema.parse(row.trace_id) }),
  };
}

/**
 * Reads of the projections the projector writes (`runs`, `evidence_events`): plain SQL, read
 * only, every read of a run scoped to the caller's tenant. The gateway writes nothing here.
 */
@Injectable()
export class RunReadsRepository {
  constructor(private readonly dataSource: DataSource) {}

  private query<T>(sql: string, parameters: unknown[]): Promise<T[]> {
    return queryProjections<T>(this.dataSource, sql, parameters);
  }

  /** The run, or null when it is unknown or another tenant's (the caller answers 404 for both). */
  async findRun(tenant: string, runId: string): Promise<Run | null> {
    const [row] = await this.query<RunDbRow>(`SELECT ${RUN_COLUMNS} FROM runs WHERE run_id = $1 AND tenant = $2`, [runId, tenant]);
    return row === undefined ? null : toRun(row);
  }

  async getRun(tenant: string, runId: string): Promise<Run> {
    const run = await this.findRun(tenant, runId);
    if (run === null) throw new CairnError('E_NOT_FOUND', `no run ${runId}`, { runId });
    return run;
  }

  /** Newest first, by (created_at, run_id) — the order of the `ix_runs_tenant_created` index. */
  async listRuns(
    tenant: string,
    options: { limit: number; cursor?: string | undefined; state?: RunState | undefined; createdAfter?: string | undefined; createdBefore?: string | undefined },
  ): Promise<RunList> {
    const parameters: unknown[] = [tenant];
    const where = ['tenant = $1'];
    if (options.state !== undefined) {
      parameters.push(options.state);
      where.push(`state = $${parameters.length}`);
    }
    // A time window on created_at (inclusive from, exclusive to): still served by ix_runs_tenant_created.
    if (options.createdAfter !== undefined) {
      parameters.push(options.createdAfter);
      where.push(`created_at >= $${parameters.length}::timestamptz`);
    }
    if (options.createdBefore !== undefined) {
      parameters.push(options.createdBefore);
      where.push(`created_at < $${parameters.length}::timestamptz`);
    }
    if (options.cursor !== undefined) {
      const cursor = decodeRunCursor(options.cursor);
      parameters.push(cursor.createdAt, cursor.runId);
      where.push(`(created_at, run_id) < ($${parameters.length - 1}::timestamptz, $${parameters.length})`);
    }
    parameters.push(options.limit + 1);
    const rows = await this.query<RunDbRow>(
      `SELECT ${RUN_COLUMNS} FROM runs WHERE ${where.join(' AND ')} ORDER BY created_at DESC, run_id DESC LIMIT $${parameters.length}`,
      parameters,
    );
    const items = rows.slice(0, options.limit).map(toRun);
    const last = items.at(-1);
    const more = rows.length > options.limit;
    return { items, nextCursor: more && last !== undefined ? encodeRunCursor({ createdAt: last.createdAt, runId: last.runId }) : null };
  }

  /*
   * Receipt reads by chain id: a run's chain and a sandbox's alike (`run_…`, `sbx_…`). The caller
   * checks first that the chain is the caller's tenant's (getRun, or the sandbox's read).
   */

  /** Up to `limit` receipts of the chain after `after`, in chain order, exactly as stored. */
  receiptsAfter(chainId: string, after: number, limit: number): Promise<ReceiptRow[]> {
    return this.query<ReceiptRow>('SELECT seq, type, receipt FROM evidence_events WHERE chain_id = $1 AND seq > $2 ORDER BY seq LIMIT $3', [
      chainId,
      after,
      limit,
    ]);
  }

  /** One page of the chain's receipts after `after`, and where the next page starts (null: none projected yet). */
  async eventPage(chainId: string, after: number, limit: number): Promise<EventPage> {
    const rows = await this.receiptsAfter(chainId, after, limit + 1);
    const items = rows.slice(0, limit).map((row) => row.receipt);
    return { items, nextAfter: rows.length > limit ? (items.at(-1)?.seq ?? null) : null };
  }

  /** The chain's receipts of these types, in chain order, exactly as stored. */
  async receiptsOfTypes(chainId: string, types: readonly string[]): Promise<Receipt[]> {
    const rows = await this.query<{ receipt: Receipt }>('SELECT receipt FROM evidence_events WHERE chain_id = $1 AND type = ANY($2::text[]) ORDER BY seq', [chainId, [...types]]);
    return rows.map((row) => row.receipt);
  }

  /** Every receipt of the chain, in chain order. */
  async allReceipts(chainId: string): Promise<Receipt[]> {
    const rows = await this.query<{ receipt: Receipt }>('SELECT receipt FROM evidence_events WHERE chain_id = $1 ORDER BY seq', [chainId]);
    return rows.map((row) => row.receipt);
  }

  /** The seq of the chain's `run.sealed` (a sandbox's chain ends with one too), or null while it is not sealed. */
  async sealSeq(chainId: string): Promise<number | null> {
    const [row] = await this.query<{ seq: number }>(`SELECT seq FROM evidence_events WHERE chain_id = $1 AND type = 'run.sealed' ORDER BY seq LIMIT 1`, [chainId]);
    return row?.seq ?? null;
  }

  /**
   * The policy version named by the newest decision on one of the tenant's runs (newest run first,
   * through ix_runs_tenant_created; each run's receipts through its (chain_id, seq) key), or null.
   */
  async lastPolicyDecision(tenant: string): Promise<{ version: string; runId: string; at: string } | null> {
    const [row] = await this.query<{ version: string; run_id: string; at: string }>(
      `SELECT e.receipt->>'policy_version' AS version, e.chain_id AS run_id, to_char(e.ts AT TIME ZONE 'UTC', ${ISO}) AS at
         FROM runs r JOIN evidence_events e ON e.chain_id = r.run_id AND e.type = 'policy.decided'
        WHERE r.tenant = $1 ORDER BY r.created_at DESC, r.run_id DESC, e.seq DESC LIMIT 1`,
      [tenant],
    );
    return row === undefined ? null : { version: row.version, runId: row.run_id, at: row.at };
  }

  /** Waits (polling, at most `timeoutMs`) until the run is projected; true when it is. */
  async waitForRun(runId: string, timeoutMs: number, intervalMs = 25): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const rows = await this.query<{ one: number }>('SELECT 1 AS one FROM runs WHERE run_id = $1', [runId]);
      if (rows.length > 0) return true;
      if (Date.now() + intervalMs > deadline) return false;
      await new Promise((resolve) => setTimeout(resolve, intervalMs));
    }
  }
}
