import { CairnError } from '@cairn/contracts';
import type pg from 'pg';
import type { DataSource } from 'typeorm';
import { inTransaction, withPgClient } from './pg-client.js';
import { ProjectionFold } from './projection-fold.js';
import { PROJECTION_NOTICE_CHANNEL, projectionNoticePayloads } from './projection-notices.js';
import type { EvidenceEventRow, PoisonRow, RawEvidenceMessage, RunRow } from './projection-fold.js';
import { EVIDENCE_PROJECTION, PROJECTION_LOCK_SQL } from './projection-lock.constants.js';
import { chainIdOfSubject } from './receipt-check.js';
import { RUN_COLUMN_TYPES, RUN_COLUMNS, RUN_SELECT_COLUMNS, runRowFromDb, runValues } from './run-row.mapper.js';
import type { RunDbRow } from './run-row.mapper.js';
import { safeText } from './safe-text.js';
import { SANDBOX_COLUMN_TYPES, SANDBOX_COLUMNS, SANDBOX_SELECT_COLUMNS, sandboxRowFromDb, sandboxValues } from './sandbox-row.mapper.js';
import type { SandboxDbRow, SandboxRow } from './sandbox-row.mapper.js';

export interface ProjectionWriterOptions {
  /** The JetStream stream the projections follow; the position row must name the same one. */
  stream: string;
  subjectPrefix: string;
}

export interface BatchResult {
  /** Receipts written to `evidence_events` (and `runs`, `sandboxes`). */
  projected: number;
  /** Messages written to `poison_events`. */
  poison: number;
  /** Messages at or below the position: already projected (a redelivery). */
  skipped: number;
  /**
   * Stream seqs not applied because an earlier one is missing: the batch must continue the
   * position without a hole. The caller hands them back later (a consumer: nak and redeliver).
   */
  deferred: number[];
  /** The position after the batch: every stream seq at or below it is projected or poison. */
  position: number;
}

/**
 * Applies batches of evidence stream messages to the projections, exactly once: in one
 * transaction it takes the projections' lock, reads the position (`FOR UPDATE`), drops what it
 * already holds, folds the rest in stream order, writes receipts, runs and poison with one
 * multi-row INSERT each, and moves the position. A crash anywhere leaves either all of it or none.
 */
export class ProjectionWriter {
  constructor(
    private readonly dataSource: DataSource,
    private readonly options: ProjectionWriterOptions,
  ) {}

  /** The position now (0 before anything was projected). */
  async position(): Promise<number> {
    const rows = await this.dataSource.query<{ stream: string; last: number }[]>(
      'SELECT stream, last_stream_seq::float8 AS last FROM projection_positions WHERE name = $1',
      [EVIDENCE_PROJECTION],
    );
    return rows[0]?.last ?? 0;
  }

  /**
   * Applies the batch in one transaction and resolves once its commit is on disk: the caller
   * acknowledges what it covers, and a message JetStream counts as acknowledged is never delivered
   * again, so a commit a crash could still take back would leave a hole behind the position
   * (docs/adr/0014-durable-by-default.md). The projections' lock is taken first, with BEGIN, in one round trip.
   */
  applyBatch(messages: readonly RawEvidenceMessage[]): Promise<BatchResult> {
    return withPgClient(this.dataSource, (client) =>
      inTransaction(client, () => this.applyInTransaction(client, messages), { synchronousCommit: true, first: PROJECTION_LOCK_SQL }),
    );
  }

  private async applyInTransaction(client: pg.PoolClient, messages: readonly RawEvidenceMessage[]): Promise<BatchResult> {
    const position = await this.lockPosition(client);

    // In stream order, each seq once: a consumer may hand over redeliveries out of order.
    const ordered = [...new Map(messages.map((m) => [m.streamSeq, m])).values()].sort((a, b) => a.streamSeq - b.streamSeq);
    let skipped = 0;
    let next = position + 1;
    const contiguous: RawEvidenceMessage[] = [];
    const deferred: number[] = [];
    for (const message of ordered) {
      if (message.streamSeq <= position) skipped += 1;
      else if (message.streamSeq === next && deferred.length === 0) {
        contiguous.push(message);
        next += 1;
      } else deferred.push(message.streamSeq);
    }
    if (contiguous.length === 0) return { projected: 0, poison: 0, skipped, deferred, position };

    const fold = new ProjectionFold(this.options.subjectPrefix);
    await this.seed(client, fold, contiguous);
    const events: EvidenceEventRow[] = [];
    const poison: PoisonRow[] = [];
    const runs = new Map<string, RunRow>();
    const sandboxes = new Map<string, SandboxRow>();
    for (const message of contiguous) {
      const outcome = fold.apply(message);
      if (outcome.kind === 'poison') poison.push(outcome.poison);
      else {
        events.push(outcome.event);
        if (outcome.run !== null) runs.set(outcome.run.view.runId, outcome.run);
        if (outcome.sandbox !== null) sandboxes.set(outcome.sandbox.view.id, outcome.sandbox);
      }
    }
    await insertEvents(client, events);
    await insertPoison(client, poison);
    await upsertRuns(client, [...runs.values()]);
    await upsertSandboxes(client, [...sandboxes.values()]);
    const last = next - 1;
    await client.query('UPDATE projection_positions SET last_stream_seq = $2, updated_at = now() WHERE name = $1', [
      EVIDENCE_PROJECTION,
      last,
    ]);
    // Delivered on commit: readers waiting for these chains (the gateway) read once, not poll.
    const heads = new Map<string, number>();
    for (const event of events) heads.set(event.chainId, Math.max(event.seq, heads.get(event.chainId) ?? 0));
    const payloads = projectionNoticePayloads(heads);
    if (payloads.length > 0) await client.query('SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p', [PROJECTION_NOTICE_CHANNEL, payloads]);
    return { projected: events.length, poison: poison.length, skipped, deferred, position: last };
  }

  /** Locks the position row (created on first use) and checks it follows our stream. */
  private async lockPosition(client: pg.PoolClient): Promise<number> {
    const select = () =>
      client.query<{ stream: string; last: number }>('SELECT stream, last_stream_seq::float8 AS last FROM projection_positions WHERE name = $1 FOR UPDATE', [
        EVIDENCE_PROJECTION,
      ]);
    let { rows } = await select();
    if (rows.length === 0) {
      await client.query('INSERT INTO projection_positions (name, stream, last_stream_seq) VALUES ($1, $2, 0) ON CONFLICT (name) DO NOTHING', [
        EVIDENCE_PROJECTION,
        this.options.stream,
      ]);
      ({ rows } = await select());
    }
    const row = rows[0];
    if (row === undefined) throw new CairnError('E_INTERNAL', 'the projection position row vanished inside its transaction');
    if (row.stream !== this.options.stream) {
      throw new CairnError('E_CONFLICT', `these projections follow stream ${row.stream}, not ${this.options.stream}: rebuild them from the stream to switch`, {
        projected: row.stream,
        stream: this.options.stream,
      });
    }
    return row.last;
  }

  /** Loads the heads (every chain) and views (runs, sandboxes) of the chains the batch touches. */
  private async seed(client: pg.PoolClient, fold: ProjectionFold, messages: readonly RawEvidenceMessage[]): Promise<void> {
    const named = messages.map((m) => chainIdOfSubject(m.subject, this.options.subjectPrefix)).filter((id): id is string => id !== null);
    const chainIds = [...new Set(named)];
    if (chainIds.length === 0) return;
    const heads = await client.query<{ chain_id: string; seq: number; hash: string; tenant: string }>(
      `SELECT c.chain_id, e.seq, e.hash, e.tenant
         FROM unnest($1::text[]) AS c(chain_id)
         CROSS JOIN LATERAL (
           SELECT seq, hash, tenant FROM evidence_events WHERE chain_id = c.chain_id ORDER BY seq DESC LIMIT 1
         ) AS e`,
      [chainIds],
    );
    for (const head of heads.rows) fold.seedHead(head.chain_id, { seq: head.seq, hash: head.hash, tenant: head.tenant });
    const runIds = chainIds.filter((id) => id.startsWith('run_'));
    if (runIds.length > 0) {
      const runs = await client.query<RunDbRow>(`SELECT ${RUN_SELECT_COLUMNS} FROM runs WHERE run_id = ANY($1::text[])`, [runIds]);
      for (const row of runs.rows) fold.seedRun(runRowFromDb(row));
    }
    const sandboxIds = chainIds.filter((id) => id.startsWith('sbx_'));
    if (sandboxIds.length > 0) {
      const sandboxes = await client.query<SandboxDbRow>(`SELECT ${SANDBOX_SELECT_COLUMNS} FROM sandboxes WHERE sandbox_id = ANY($1::text[])`, [sandboxIds]);
      for (const row of sandboxes.rows) fold.seedSandbox(sandboxRowFromDb(row));
    }
  }
}

async function insertEvents(client: pg.PoolClient, events: readonly EvidenceEventRow[]): Promise<void> {
  if (events.length === 0) return;
  await client.query(
    `INSERT INTO evidence_events (stream_seq, chain_id, seq, type, tenant, actor, ts, causation, prev_hash, hash, receipt)
     SELECT s, c, q, t, tn, a, ts::timestamptz, ca, p, h, r::json
       FROM unnest($1::int8[], $2::text[], $3::int4[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[], $11::text[])
         AS u(s, c, q, t, tn, a, ts, ca, p, h, r)`,
    [
      events.map((e) => e.streamSeq),
      events.map((e) => e.chainId),
      events.map((e) => e.seq),
      events.map((e) => e.type),
      events.map((e) => e.tenant),
      events.map((e) => e.actor),
      events.map((e) => e.ts),
      events.map((e) => e.causation),
      events.map((e) => e.prevHash),
      events.map((e) => e.hash),
      events.map((e) => e.receiptJson),
    ],
  );
}

async function insertPoison(client: pg.PoolClient, poison: readonly PoisonRow[]): Promise<void> {
  if (poison.length === 0) return;
  await client.query(
    `INSERT INTO poison_events (stream_seq, subject, chain_id, reason, detail, raw, raw_length)
     SELECT * FROM unnest($1::int8[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bytea[], $7::int4[])`,
    [
      poison.map((p) => p.streamSeq),
      poison.map((p) => safeText(p.subject)),
      poison.map((p) => p.chainId),
      poison.map((p) => p.reason),
      poison.map((p) => safeText(p.detail)),
      poison.map((p) => Buffer.from(p.raw.buffer, p.raw.byteOffset, p.raw.byteLength)),
      poison.map((p) => p.rawLength),
    ],
  );
}

async function upsertRuns(client: pg.PoolClient, runs: readonly RunRow[]): Promise<void> {
  if (runs.length === 0) return;
  const values = runs.map(runValues);
  const columns = RUN_COLUMNS.map((_, i) => values.map((row) => row[i] ?? null));
  const unnest = RUN_COLUMNS.map((column, i) => `$${i + 1}::${RUN_COLUMN_TYPES[column]}[]`).join(', ');
  const updates = RUN_COLUMNS.filter((c) => c !== 'run_id')
    .map((c) => `${c} = excluded.${c}`)
    .join(', ');
  await client.query(
    `INSERT INTO runs (${RUN_COLUMNS.join(', ')}) SELECT * FROM unnest(${unnest}) ON CONFLICT (run_id) DO UPDATE SET ${updates}`,
    columns,
  );
}

async function upsertSandboxes(client: pg.PoolClient, sandboxes: readonly SandboxRow[]): Promise<void> {
  if (sandboxes.length === 0) return;
  const values = sandboxes.map(sandboxValues);
  const columns = SANDBOX_COLUMNS.map((_, i) => values.map((row) => row[i] ?? null));
  const unnest = SANDBOX_COLUMNS.map((column, i) => `$${i + 1}::${SANDBOX_COLUMN_TYPES[column]}[]`).join(', ');
  const updates = SANDBOX_COLUMNS.filter((c) => c !== 'sandbox_id')
    .map((c) => `${c} = excluded.${c}`)
    .join(', ');
  await client.query(
    `INSERT INTO sandboxes (${SANDBOX_COLUMNS.join(', ')}) SELECT * FROM unnest(${unnest}) ON CONFLICT (sandbox_id) DO UPDATE SET ${updates}`,
    columns,
  );
}
