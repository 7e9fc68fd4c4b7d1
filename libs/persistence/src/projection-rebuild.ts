import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type pg from 'pg';
import { from as copyFrom } from 'pg-copy-streams';
import type { DataSource } from 'typeorm';
import { COPY_NULL, copyBoolean, copyBytea, copyLine, copyNumber, copyText } from './copy-text.encoder.js';
import { createDataSource, runMigrations } from './data-source.js';
import { inTransaction, withPgClient } from './pg-client.js';
import { ProjectionFold } from './projection-fold.js';
import type { EvidenceEventRow, PoisonRow, RawEvidenceMessage, RunRow } from './projection-fold.js';
import { EVIDENCE_PROJECTION, PROJECTION_LOCK_SQL } from './projection-lock.constants.js';
import { RUN_COLUMNS, runValues } from './run-row.mapper.js';
import { safeText } from './safe-text.js';

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
  /** The position the projections now stand at: the stream's last sequence when the rebuild began. */
  lastStreamSeq: number;
  durationMs: number;
}

const EVENT_COLUMNS = 'stream_seq, chain_id, seq, type, tenant, actor, ts, causation, prev_hash, hash, receipt';
const POISON_COLUMNS = 'stream_seq, subject, chain_id, reason, detail, raw, raw_length';
/** Rows per chunk handed to COPY: large enough to keep the socket busy, small enough to stream. */
const LINES_PER_CHUNK = 512;

/**
 * Drops every projection and replays the whole stream into it, in one transaction: the lock
 * that live writers take, `SET LOCAL cairn.projection_rebuild = 'on'` (the only way past the
 * TRUNCATE guard of `evidence_events`), TRUNCATE, the stream read from its first message up to
 * its last sequence at the start, folded by the same `ProjectionFold` the live writer uses and
 * bulk-loaded with COPY, then the position. Live writers wait on the lock meanwhile and continue
 * after the position afterwards; a failure rolls everything back and leaves the old tables.
 * With `url` it connects (and migrates) itself.
 */
export async function rebuildProjections(options: RebuildOptions): Promise<RebuildResult> {
  if (options.dataSource !== undefined) return rebuildWith(options.dataSource, options);
  const dataSource = createDataSource(options.url, { poolSize: 2, applicationName: 'cairn-rebuild' });
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
      await client.query('TRUNCATE evidence_events, runs, poison_events, projection_positions');

      const fold = new ProjectionFold(options.log.subjectPrefix);
      const poison: PoisonRow[] = [];
      const counts = { events: 0 };
      const lines = eventLines(options, fold, lastStreamSeq, poison, counts);
      // FREEZE: the tables were truncated in this transaction, so rows can be written frozen.
      await copyInto(client, `COPY evidence_events (${EVENT_COLUMNS}) FROM STDIN FREEZE`, lines);
      await copyInto(client, `COPY poison_events (${POISON_COLUMNS}) FROM STDIN FREEZE`, chunked(poison.map(poisonLine)));
      await copyInto(client, `COPY runs (${RUN_COLUMNS.join(', ')}) FROM STDIN FREEZE`, chunked(mapIterable(fold.allRuns(), runLine)));
      await client.query('INSERT INTO projection_positions (name, stream, last_stream_seq) VALUES ($1, $2, $3)', [
        EVIDENCE_PROJECTION,
        options.log.streamName,
        lastStreamSeq,
      ]);
      return { events: counts.events, poison: poison.length, runs: fold.runCount, lastStreamSeq, durationMs: performance.now() - started };
    }),
  );
}

/** Folds the stream into COPY text for `evidence_events`; poison is kept aside for its own COPY. */
async function* eventLines(
  options: RebuildOptions,
  fold: ProjectionFold,
  lastStreamSeq: number,
  poison: PoisonRow[],
  counts: { events: number },
): AsyncGenerator<string> {
  if (lastStreamSeq === 0) return;
  const every = options.progressEvery ?? 10_000;
  let chunk = '';
  let inChunk = 0;
  let seen = 0;
  for await (const message of options.log.readAll({ toStreamSeq: lastStreamSeq })) {
    const outcome = fold.apply(message);
    if (outcome.kind === 'event') {
      chunk += eventLine(outcome.event);
      counts.events += 1;
      if (++inChunk === LINES_PER_CHUNK) {
        yield chunk;
        chunk = '';
        inChunk = 0;
      }
    } else poison.push(outcome.poison);
    if (options.onProgress !== undefined && ++seen % every === 0) {
      options.onProgress({ streamSeq: message.streamSeq, lastStreamSeq, events: counts.events, poison: poison.length });
    }
  }
  if (chunk !== '') yield chunk;
}

/**
 * Only the receipt text can hold a character COPY escapes: every other column passed the
 * contract's patterns (ids, tokens, hex, timestamps), which admit no backslash, tab or newline.
 */
function eventLine(e: EvidenceEventRow): string {
  const causation = e.causation ?? COPY_NULL;
  return `${e.streamSeq}\t${e.chainId}\t${e.seq}\t${e.type}\t${e.tenant}\t${e.actor}\t${e.ts}\t${causation}\t${e.prevHash}\t${e.hash}\t${copyText(e.receiptJson)}\n`;
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

function runLine(run: RunRow): string {
  return copyLine(
    runValues(run).map((value) => {
      if (typeof value === 'boolean') return copyBoolean(value);
      if (typeof value === 'number') return copyNumber(value);
      return copyText(value);
    }),
  );
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

async function copyInto(client: pg.PoolClient, sql: string, chunks: AsyncIterable<string> | Iterable<string>): Promise<void> {
  await pipeline(Readable.from(chunks, { objectMode: false }), client.query(copyFrom(sql)));
}
