import 'reflect-metadata';
import { realpathSync } from 'node:fs';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';
import { EvidenceLog } from '@cairn/evidence-log';
import { createDataSource, ProjectionFold, rebuildProjections, runMigrations } from '@cairn/persistence';
import { encodeReceipt, FixtureChain, runLifecycleEvents, sandboxSessionEvents } from '@cairn/persistence/testing';
import { createTestDatabase, testNatsUrl, uniqueName } from '@cairn/testing';
import { jetstreamManager } from '@nats-io/jetstream';
import type { PubAck } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import type pg from 'pg';
import { from as copyFrom, to as copyTo } from 'pg-copy-streams';
import type { DataSource } from 'typeorm';

export interface RebuildBenchOptions {
  /** Receipts on the stream (about 1 in 3 chains a sandbox session, the rest runs). */
  events?: number;
  servers?: string;
  /** Rebuilds measured; the median is reported. */
  rounds?: number;
}

export interface RebuildBenchResult {
  events: number;
  chains: number;
  /** Receipts per second of each phase (median over the rounds). */
  readOnly: number;
  readAndFold: number;
  rebuild: number;
  /** CPU time of this process (read, check, fold, encode) per receipt in the rebuild, µs. */
  rebuildCpuMicros: number;
  /** Plain COPY of the very rows the rebuild wrote, into a temporary table with the same indexes / with none. */
  copyIndexed: number;
  copyBare: number;
  /** The same COPY into an ordinary (WAL-logged) table with the same indexes, as the rebuild writes. */
  copyLogged: number;
  /** rebuild / copyIndexed. */
  ratio: number;
  /** The brief's target: at least this many events per second. */
  target: number;
}

const TARGET_EVENTS_PER_SECOND = 100_000;
const PUBLISH_WINDOW = 2048;

/**
 * Rebuild throughput beside its raw baselines, in one run on one stream and one database of
 * its own: reading the stream alone, reading and folding (no database), the full rebuild, and
 * a plain COPY of the same rows into a temporary table with the same indexes, a bare one, and
 * an ordinary table with the same indexes (temporary tables skip the WAL; the rebuild cannot).
 * `node projection-rebuild.bench.js [events] [rounds]`.
 */
export async function runRebuildBench(options: RebuildBenchOptions = {}): Promise<RebuildBenchResult> {
  const events = options.events ?? 50_000;
  const rounds = options.rounds ?? 3;
  const servers = options.servers ?? testNatsUrl();
  const stream = uniqueName('BENCH_REBUILD');
  const subjectPrefix = uniqueName('bench_rebuild');
  const db = await createTestDatabase('cairn_bench_rebuild');
  const nc = await connect({ servers: servers.split(',') });
  const jsm = await jetstreamManager(nc);
  let dataSource: DataSource | null = null;
  try {
    const log = await EvidenceLog.fromConnection(nc, { servers, stream, subjectPrefix });
    const chains = await fillStream(nc, subjectPrefix, events);
    dataSource = createDataSource(db.url, { poolSize: 2, applicationName: 'cairn-bench' });
    await dataSource.initialize();
    await runMigrations(dataSource);

    const readOnly: number[] = [];
    const readAndFold: number[] = [];
    const rebuild: number[] = [];
    const rebuildCpu: number[] = [];
    const copyIndexed: number[] = [];
    const copyBare: number[] = [];
    const copyLogged: number[] = [];
    for (let round = 0; round < rounds; round++) {
      readOnly.push(await rate(events, async () => {
        for await (const _ of log.readAll()) {
          // only reading
        }
      }));
      readAndFold.push(await rate(events, async () => {
        const fold = new ProjectionFold(subjectPrefix);
        for await (const message of log.readAll()) fold.apply(message);
      }));
      const cpu = process.cpuUsage();
      const result = await rebuildProjections({ dataSource, log });
      const used = process.cpuUsage(cpu);
      if (result.events !== events) throw new Error(`the rebuild projected ${result.events} of ${events} receipts`);
      rebuild.push((events / result.durationMs) * 1000);
      rebuildCpu.push((used.user + used.system) / events);
      const rows = await copyOut(dataSource, 'evidence_events');
      copyIndexed.push(await copyBaseline(dataSource, rows, events, 'TEMP', 'INCLUDING ALL'));
      copyBare.push(await copyBaseline(dataSource, rows, events, 'TEMP', ''));
      copyLogged.push(await copyBaseline(dataSource, rows, events, '', 'INCLUDING ALL'));
    }
    const result = {
      events,
      chains,
      readOnly: median(readOnly),
      readAndFold: median(readAndFold),
      rebuild: median(rebuild),
      rebuildCpuMicros: median(rebuildCpu),
      copyIndexed: median(copyIndexed),
      copyBare: median(copyBare),
      copyLogged: median(copyLogged),
      ratio: 0,
      target: TARGET_EVENTS_PER_SECOND,
    };
    result.ratio = result.rebuild / result.copyIndexed;
    return result;
  } finally {
    await dataSource?.destroy();
    await jsm.streams.delete(stream).catch(() => false);
    await nc.close();
    await db.drop();
  }
}

/** Publishes sealed receipts of interleaved run and sandbox chains, pipelined. */
async function fillStream(nc: Awaited<ReturnType<typeof connect>>, subjectPrefix: string, events: number): Promise<number> {
  const js = (await jetstreamManager(nc)).jetstream();
  const pending: Promise<PubAck>[] = [];
  let published = 0;
  let chains = 0;
  // 64 chains open at a time, one receipt each in turn, as concurrent runs interleave on the stream.
  const open: { chain: FixtureChain; events: ReturnType<typeof runLifecycleEvents>; next: number }[] = [];
  while (published < events) {
    while (open.length < 64) {
      chains += 1;
      const sandbox = chains % 3 === 0;
      const id = uniqueName(sandbox ? 'sbx' : 'run');
      open.push({ chain: new FixtureChain(id), events: sandbox ? sandboxSessionEvents(id) : runLifecycleEvents(id, 3, chains % 6), next: 0 });
    }
    for (let i = open.length - 1; i >= 0 && published < events; i--) {
      const item = open[i]!;
      const event = item.events[item.next++]!;
      pending.push(js.publish(`${subjectPrefix}.${item.chain.chainId}.${event.type}`, encodeReceipt(item.chain.next(event))));
      published += 1;
      if (item.next === item.events.length) open.splice(i, 1);
      if (pending.length >= PUBLISH_WINDOW) await Promise.all(pending.splice(0));
    }
  }
  await Promise.all(pending);
  return chains;
}

async function rate(count: number, work: () => Promise<void>): Promise<number> {
  const started = performance.now();
  await work();
  return (count / (performance.now() - started)) * 1000;
}

/** One pooled client inside a transaction of its own (rolled back: nothing here is kept). */
async function withClient<T>(dataSource: DataSource, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const runner = dataSource.createQueryRunner();
  try {
    const client = (await runner.connect()) as pg.PoolClient;
    await client.query('BEGIN');
    try {
      return await work(client);
    } finally {
      await client.query('ROLLBACK');
    }
  } finally {
    await runner.release();
  }
}

/** The table's rows in COPY text, as the rebuild wrote them. */
function copyOut(dataSource: DataSource, table: string): Promise<Buffer[]> {
  return withClient(dataSource, async (client) => {
    const chunks: Buffer[] = [];
    await pipeline(
      client.query(copyTo(`COPY ${table} TO STDOUT`)),
      new Writable({
        write(chunk: Buffer, _encoding, done) {
          chunks.push(chunk);
          done();
        },
      }),
    );
    return chunks;
  });
}

/** COPY of the same rows into a scratch copy of evidence_events, in its own (rolled back) transaction. */
function copyBaseline(dataSource: DataSource, rows: Buffer[], count: number, kind: 'TEMP' | '', like: string): Promise<number> {
  return withClient(dataSource, async (client) => {
    await client.query(`CREATE ${kind} TABLE bench_copy (LIKE evidence_events ${like})`);
    return rate(count, () => pipeline(Readable.from(rows), client.query(copyFrom('COPY bench_copy FROM STDIN'))));
  });
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? 0;
}

export function formatRebuildBench(r: RebuildBenchResult): string {
  const fmt = (n: number) => `${Math.round(n).toLocaleString('en-US')}/s`.padStart(12);
  return [
    `projection rebuild: ${r.events} receipts over ${r.chains} chains (median of rounds)`,
    `  read stream only          ${fmt(r.readOnly)}`,
    `  read + fold (no database) ${fmt(r.readAndFold)}`,
    `  rebuild (one transaction) ${fmt(r.rebuild)}   target ≥ ${r.target.toLocaleString('en-US')}/s: ${r.rebuild >= r.target ? 'met' : 'MISSED'}; ${r.rebuildCpuMicros.toFixed(1)} µs CPU/receipt in Node`,
    `  COPY same rows, same idx  ${fmt(r.copyIndexed)}   rebuild / COPY ratio ${r.ratio.toFixed(2)}`,
    `  COPY same rows, no index  ${fmt(r.copyBare)}`,
    `  COPY same rows, same idx, WAL-logged table (as the rebuild writes) ${fmt(r.copyLogged)}   rebuild / it ${(r.rebuild / r.copyLogged).toFixed(2)}`,
  ].join('\n');
}

function isEntryModule(): boolean {
  const entry = process.argv[1];
  if (entry === undefined) return false;
  try {
    return realpathSync(entry) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
}

if (isEntryModule()) {
  const events = Number(process.argv[2] ?? 50_000);
  const rounds = Number(process.argv[3] ?? 3);
  runRebuildBench({ events, rounds })
    .then((result) => process.stdout.write(`${formatRebuildBench(result)}\n`))
    .catch((error: unknown) => {
      process.stderr.write(`projection rebuild bench failed: ${error instanceof Error ? error.message : String(error)}\n`);
      process.exitCode = 1;
    });
}
