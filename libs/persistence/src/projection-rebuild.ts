import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type pg from 'pg';
import { from as copyFrom } from 'pg-copy-streams';
import type { DataSource } from 'typeorm';
import { CopyBinaryEncoder } from './copy-binary.encoder.js';
import { copyBoolean, copyBytea, copyLine, copyNumber, copyText } from './copy-text.encoder.js';
import { createDataSource, runMigrations } from './data-source.js';
import { inTransaction, withPgClient } from './pg-client.js';
import { ProjectionFold } from './projection-fold.js';
import type { EvidenceEventRow, PoisonRow, RawEvidenceMessage, RunRow } from './projection-fold.js';
import { EVIDENCE_PROJECTION, PROJECTION_LOCK_SQL } from './projection-lock.constants.js';
import { RUN_COLUMNS, runValues } from './run-row.mapper.js';
import { safeText } from './safe-text.js';
import { SANDBOX_COLUMNS, sandboxValues } from './sandbox-row.mapper.js';
import type { SandboxRow, SandboxValue } from './sandbox-row.mapper.js';

/** What a rebuild reads: `EvidenceLog` from `@cairn/evidence-log` is one. */
export interface ProjectionSource {
  readonly streamName: string;
  readonly subjectPrefix: string;
  /** The stream's last sequence now (0 when empty). */
  lastStreamSeq(): Promise<number>;
  /** Every message under the prefix in stream order, up to `toStreamSeq`. */
  readAll(options?: { fromStreamSeq?: number; toStreamSeq?: number }): AsyncIterable<RawEvidenceMessage>;
}

export interface RebuildProgress {
  streamSeq: number;
  lastStreamSeq: number;
  events: number;
  poison: number;
}

export type RebuildOptions = ({ dataSource: DataSource; url?: never } | { url: string; dataSource?: never }) & {
  log: ProjectionSource;
  /** Called every `progressEvery` messages (default 10 000) while the stream is read. */
  onProgress?: (progress: RebuildProgress) => void;
  progressEvery?: number;
};

export interface RebuildResult {
  /** Rows now in `evidence_events`. */
  events: number;
  /** Rows now in `poison_events`. */
  poison: number;
  /** Rows now in `runs`. */
  runs: number;
  /** Rows now in `sandboxes`. */
  sandboxes: number;
  /** The position the projections now stand at: the stream's last sequence when the rebuild began. */
  lastStreamSeq: number;
  durationMs: number;
}

const EVENT_COLUMNS = ['stream_seq', 'chain_id', 'seq', 'type', 'tenant', 'actor', 'ts', 'causation', 'prev_hash', 'hash', 'receipt'];
const POISON_COLUMNS = 'stream_seq, subject, chain_id, reason, detail, raw, raw_length';
/** Rows per chunk handed to COPY: large enough to keep the socket busy, small enough to stream. */
const LINES_PER_CHUNK = 512;

/**
 * Drops every projection and replays the whole stream into it, in one transaction: the lock
 * that live writers take, `SET LOCAL cairn.projection_rebuild = 'on'` (the only way past the
 * TRUNCATE guard of `evidence_events`), TRUNCATE, the stream read from its first message up to
 * its last sequence at the start, folded by the same `ProjectionFold` the live writer uses and
 * bulk-loaded with COPY while it is read, then the position. Live writers wait on the lock
 * meanwhile and continue after the position afterwards; a failure rolls everything back and
 * leaves the old tables. With `url` it connects (and migrates) itself.
 *
 * Built for throughput (tools/src/bench/projection-rebuild.bench.ts): receipts go in by binary
 * COPY as the stream's own bytes, into `evidence_events` stripped of its indexes, which are built
 * again once it is loaded.
 */
export async function rebuildProjections(options: RebuildOptions): Promise<RebuildResult> {
  if (options.dataSource !== undefined) return rebuildWith(options.dataSource, options);
  // COPY of a whole stream is one long statement: bounded to connect, not per statement.
  const dataSource = createDataSource(options.url, { poolSize: 2, applicationName: 'cairn-rebuild', bounds: { statementTimeoutMs: 0 } });
  await dataSource.initialize();
  try {
    await runMigrations(dataSource);
    return await rebuildWith(dataSource, options);
  } finally {
    await dataSource.destroy();
  }
}

function rebuildWith(dataSource: DataSource, options: RebuildOptions): Promise<RebuildResult> {
  const started = performance.now();
  return withPgClient(dataSource, (client) =>
    inTransaction(client, async () => {
      await client.query(PROJECTION_LOCK_SQL);
      await client.query(`SET LOCAL cairn.projection_rebuild = 'on'`);
      // Read after the lock: whatever a live batch committed before us is on the stream by now.
      const lastStreamSeq = await options.log.lastStreamSeq();
      await client.query('TRUNCATE evidence_events, runs, sandboxes, poison_events, projection_positions');

      const indexes = await dropIndexes(client, 'evidence_events');
      const loaded = await loadFold(client, options, lastStreamSeq, PROJECTION_TABLES, {
        // FREEZE: the tables were truncated in this transaction, so rows can be written frozen.
        freeze: true,
        // Built here, the unique ones still refuse duplicates: the load fails and rolls back.
        afterEvents: async () => {
          for (const create of indexes) await client.query(create);
        },
      });
      await client.query('INSERT INTO projection_positions (name, stream, last_stream_seq) VALUES ($1, $2, $3)', [
        EVIDENCE_PROJECTION,
        options.log.streamName,
        lastStreamSeq,
      ]);
      return { ...loaded, lastStreamSeq, durationMs: performance.now() - started };
    }),
  );
}

/** The tables a fold is loaded into: the projections themselves, or a check's own copies of them. */
export interface FoldTargets {
  readonly events: string;
  readonly poison: string;
  readonly runs: string;
  readonly sandboxes: string;
}

export const PROJECTION_TABLES: FoldTargets = { events: 'evidence_events', poison: 'poison_events', runs: 'runs', sandboxes: 'sandboxes' };

export interface FoldCounts {
  events: number;
  poison: number;
  runs: number;
  sandboxes: number;
}

/**
 * Reads the stream from its first message up to `lastStreamSeq`, folds it with the same
 * `ProjectionFold` the live writer uses and loads the rows into `targets` by COPY while it is
 * read: receipts by binary COPY as the stream's own bytes, then poison, runs and sandboxes.
 * The rebuild loads the projections; `checkProjections` loads copies of its own to compare.
 */
export async function loadFold(
  client: pg.PoolClient,
  options: Pick<RebuildOptions, 'log' | 'onProgress' | 'progressEvery'>,
  lastStreamSeq: number,
  targets: FoldTargets,
  load: { freeze: boolean; afterEvents?: () => Promise<void> },
): Promise<FoldCounts> {
  const fold = new ProjectionFold(options.log.subjectPrefix);
  const poison: PoisonRow[] = [];
  const counts = { events: 0 };
  const binary = load.freeze ? '(FORMAT binary, FREEZE)' : '(FORMAT binary)';
  const text = load.freeze ? ' FREEZE' : '';
  await copyInto(client, `COPY ${targets.events} (${EVENT_COLUMNS.join(', ')}) FROM STDIN ${binary}`, eventChunks(options, fold, lastStreamSeq, poison, counts));
  await load.afterEvents?.();
  await copyInto(client, `COPY ${targets.poison} (${POISON_COLUMNS}) FROM STDIN${text}`, chunked(poison.map(poisonLine)));
  await copyInto(client, `COPY ${targets.runs} (${RUN_COLUMNS.join(', ')}) FROM STDIN${text}`, chunked(mapIterable(fold.allRuns(), runLine)));
  await copyInto(client, `COPY ${targets.sandboxes} (${SANDBOX_COLUMNS.join(', ')}) FROM STDIN${text}`, chunked(mapIterable(fold.allSandboxes(), sandboxLine)));
  return { events: counts.events, poison: poison.length, runs: fold.runCount, sandboxes: fold.sandboxCount };
}

/**
 * Drops the table's primary-key and unique constraints and its other indexes, and returns the
 * DDL that brings them back: an index built once over the loaded rows costs the server less
 * than one kept up row by row. Read from the catalog, so what later migrations add comes back too.
 */
async function dropIndexes(client: pg.PoolClient, table: string): Promise<string[]> {
  const { rows } = await client.query<{ drop: string; create: string }>(
    `SELECT format('ALTER TABLE %I DROP CONSTRAINT %I', $1::text, c.conname) AS drop,
            format('ALTER TABLE %I ADD CONSTRAINT %I %s', $1::text, c.conname, pg_get_constraintdef(c.oid)) AS create
       FROM pg_constraint c
      WHERE c.conrelid = $1::regclass AND c.contype IN ('p', 'u')
     UNION ALL
     SELECT format('DROP INDEX %s', i.indexrelid::regclass), pg_get_indexdef(i.indexrelid)
       FROM pg_index i
      WHERE i.indrelid = $1::regclass AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid)`,
    [table],
  );
  for (const { drop } of rows) await client.query(drop);
  return rows.map((row) => row.create);
}

/** Folds the stream into binary COPY data for `evidence_events`; poison is kept aside for its own COPY. */
async function* eventChunks(
  options: Pick<RebuildOptions, 'log' | 'onProgress' | 'progressEvery'>,
  fold: ProjectionFold,
  lastStreamSeq: number,
  poison: PoisonRow[],
  counts: { events: number },
): AsyncGenerator<Buffer> {
  const copy = new CopyBinaryEncoder();
  const every = options.progressEvery ?? 10_000;
  let seen = 0;
  const messages = lastStreamSeq === 0 ? [] : options.log.readAll({ toStreamSeq: lastStreamSeq });
  for await (const message of messages) {
    const outcome = fold.apply(message);
    if (outcome.kind === 'event') {
      encodeEvent(copy, outcome.event, message.data);
      counts.events += 1;
      if (copy.hasFullChunks) yield* copy.takeFullChunks();
    } else poison.push(outcome.poison);
    if (options.onProgress !== undefined && ++seen % every === 0) {
      options.onProgress({ streamSeq: message.streamSeq, lastStreamSeq, events: counts.events, poison: poison.length });
    }
  }
  yield* copy.end();
}

/** One `evidence_events` row in `EVENT_COLUMNS` order; the receipt as the bytes on the stream. */
function encodeEvent(copy: CopyBinaryEncoder, e: EvidenceEventRow, data: Uint8Array): void {
  copy.row(EVENT_COLUMNS.length);
  copy.int8(e.streamSeq);
  copy.text(e.chainId);
  copy.int4(e.seq);
  copy.text(e.type);
  copy.text(e.tenant);
  copy.text(e.actor);
  copy.timestamptz(e.ts);
  if (e.causation === null) copy.null();
  else copy.text(e.causation);
  copy.text(e.prevHash);
  copy.text(e.hash);
  copy.utf8(receiptBytes(data));
}

/** The bytes of the text the check parsed: the UTF-8 decoder drops a leading byte order mark. */
function receiptBytes(data: Uint8Array): Uint8Array {
  return data[0] === 0xef && data[1] === 0xbb && data[2] === 0xbf ? data.subarray(3) : data;
}

function poisonLine(p: PoisonRow): string {
  return copyLine([
    String(p.streamSeq),
    copyText(safeText(p.subject)),
    copyText(p.chainId),
    copyText(p.reason),
    copyText(safeText(p.detail)),
    copyBytea(p.raw),
    String(p.rawLength),
  ]);
}

function copyValue(value: SandboxValue): string {
  if (typeof value === 'boolean') return copyBoolean(value);
  if (typeof value === 'number') return copyNumber(value);
  return copyText(value);
}

function runLine(run: RunRow): string {
  return copyLine(runValues(run).map(copyValue));
}

/** jsonb columns go as their JSON text, which COPY parses like any other input. */
function sandboxLine(sandbox: SandboxRow): string {
  return copyLine(sandboxValues(sandbox).map(copyValue));
}

function* mapIterable<T, U>(items: Iterable<T>, map: (item: T) => U): Generator<U> {
  for (const item of items) yield map(item);
}

function* chunked(lines: Iterable<string>): Generator<string> {
  let chunk = '';
  let n = 0;
  for (const line of lines) {
    chunk += line;
    if (++n === LINES_PER_CHUNK) {
      yield chunk;
      chunk = '';
      n = 0;
    }
  }
  if (chunk !== '') yield chunk;
}

async function copyInto(client: pg.PoolClient, sql: string, chunks: AsyncIterable<string | Buffer> | Iterable<string>): Promise<void> {
  await pipeline(Readable.from(chunks, { objectMode: false }), client.query(copyFrom(sql)));
}
