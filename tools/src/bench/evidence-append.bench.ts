import { randomBytes } from 'node:crypto';
import { realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { EvidenceLogConfigSchema, loadConfig } from '@cairn/config';
import type { ReceiptEnvelope } from '@cairn/contracts';
import { sha256Hex, verifyChain } from '@cairn/evidence';
import { EvidenceLog, GENESIS_HEAD, JetStreamAckPublisher, prepareAppend, sealOnto } from '@cairn/evidence-log';
import type { AppendInput } from '@cairn/evidence-log';
import { jetstreamManager } from '@nats-io/jetstream';
import type { JetStreamClient } from '@nats-io/jetstream';
import { connect, headers } from '@nats-io/transport-node';

/** One measured rate beside the raw baseline measured in the same run. */
export interface BenchResult {
  name: string;
  perSecond: number;
  baselineName: string;
  baselinePerSecond: number;
  /** perSecond / baselinePerSecond. */
  ratio: number;
  /** The ratio this figure should reach, where there is one. */
  target?: number;
  /**
   * This process's CPU time per operation (user + system, µs), measured and baseline: steadier
   * than rates on a shared machine, though it leaves out the server's share.
   */
  cpuMicros?: { measured: number; baseline: number };
}

interface Rate {
  perSecond: number;
  cpuMicros: number;
}

export interface AppendBenchOptions {
  servers?: string;
  /** Time per measured phase; phases alternate with their baselines (ABBA). */
  phaseMs?: number;
  /** Receipts in the chain that verifyChain checks. */
  verifyReceipts?: number;
}

const CHAINS_IN_FLIGHT = 64;

/** A typical step receipt's fields: argv, exit code, output hashes, artifacts (built once). */
const STEP_FIELDS = {
  stage: 'test',
  tool: 'pytest',
  argv: ['python3', '-m', 'pytest', '-q', 'tests/'],
  exit_code: 0,
  stdout_sha256: sha256Hex('stdout'),
  stderr_sha256: sha256Hex('stderr'),
  artifact_hashes: { '/out/report.xml': sha256Hex('report') },
  duration_ms: 1234,
  limits_hit: [],
};

function stepEvent(chainId: string, index: number): AppendInput {
  return { type: 'step.completed', actor: 'runtime', tenant: 'bench', causation: `${chainId}:1`, key: String(index), fields: STEP_FIELDS };
}

/** Runs `workers` loops, each awaiting `op` in turn, for `ms`: completed ops per second, CPU per op. */
async function rate(workers: number, ms: number, op: (worker: number, i: number) => Promise<unknown>): Promise<Rate> {
  const cpu = process.cpuUsage();
  const start = performance.now();
  const deadline = start + ms;
  let done = 0;
  await Promise.all(
    Array.from({ length: workers }, async (_, worker) => {
      for (let i = 0; performance.now() < deadline; i++) {
        await op(worker, i);
        done += 1;
      }
    }),
  );
  const elapsed = performance.now() - start;
  const used = process.cpuUsage(cpu);
  return { perSecond: (done * 1000) / elapsed, cpuMicros: (used.user + used.system) / Math.max(done, 1) };
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[mid] ?? 0) : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
}

/**
 * Baseline and measured phases in ABBA order, `rounds` times; medians of each side. On a shared,
 * noisy machine neither side gets the quiet or the busy moments to itself.
 */
async function abba(rounds: number, baseline: () => Promise<Rate>, measured: () => Promise<Rate>): Promise<[Rate, Rate]> {
  const b: Rate[] = [];
  const m: Rate[] = [];
  for (let round = 0; round < rounds; round++) {
    b.push(await baseline());
    m.push(await measured());
    m.push(await measured());
    b.push(await baseline());
  }
  const summary = (rates: Rate[]): Rate => ({
    perSecond: median(rates.map((r) => r.perSecond)),
    cpuMicros: median(rates.map((r) => r.cpuMicros)),
  });
  return [summary(b), summary(m)];
}

function cpuRate(ms: number, batch: () => number): Rate {
  const start = performance.now();
  let done = 0;
  while (performance.now() - start < ms) done += batch();
  const elapsed = performance.now() - start;
  return { perSecond: (done * 1000) / elapsed, cpuMicros: (elapsed * 1000) / Math.max(done, 1) };
}

function result(name: string, measured: Rate, baselineName: string, baseline: Rate, extra: { target?: number; cpu?: boolean } = {}): BenchResult {
  const r: BenchResult = {
    name,
    perSecond: measured.perSecond,
    baselineName,
    baselinePerSecond: baseline.perSecond,
    ratio: measured.perSecond / baseline.perSecond,
  };
  if (extra.target !== undefined) r.target = extra.target;
  if (extra.cpu === true) r.cpuMicros = { measured: measured.cpuMicros, baseline: baseline.cpuMicros };
  return r;
}

export async function runAppendBench(options: AppendBenchOptions = {}): Promise<BenchResult[]> {
  const servers = options.servers ?? loadConfig(EvidenceLogConfigSchema).CAIRN_NATS_URL;
  const phaseMs = options.phaseMs ?? 300;
  const suffix = `${Date.now().toString(36)}_${randomBytes(4).toString('hex')}`;
  const stream = `BENCH_EVIDENCE_${suffix}`;
  const prefix = `bench_${suffix}`;
  const nc = await connect({ servers: servers.split(','), name: 'cairn-bench' });
  const jsm = await jetstreamManager(nc);
  let log: EvidenceLog | undefined;
  try {
    log = await EvidenceLog.fromConnection(nc, { servers, stream, subjectPrefix: prefix });
    const appender = log;
    const js: JetStreamClient = jsm.jetstream();
    // Raw payloads as large as the receipts the log stores.
    const sample = sealOnto(prepareAppend('run_bench', stepEvent('run_bench', 1)), GENESIS_HEAD).canonical;
    const raw = randomBytes(Buffer.byteLength(sample));
    const rawPublish = (worker: number) => js.publish(`${prefix}.raw_${worker}`, raw);
    let chainRound = 0;
    const chained = (workers: number) => {
      chainRound += 1;
      const round = chainRound;
      return rate(workers, phaseMs, (worker, i) => {
        const chainId = `run_r${round}_w${worker}`;
        return appender.append(chainId, stepEvent(chainId, i));
      });
    };

    // Warm both paths (JIT, connection buffers, the stream's first blocks).
    await rate(8, 150, rawPublish);
    await rate(8, 150, (worker, i) => appender.append(`run_warm_${worker}`, stepEvent(`run_warm_${worker}`, i)));

    const results: BenchResult[] = [];
    const [raw1, chained1] = await abba(1, () => rate(1, phaseMs, rawPublish), () => chained(1));
    results.push(result('chained appends, 1 chain', chained1, 'js.publish, 1 in flight', raw1, { cpu: true }));
    const [raw64, chained64] = await abba(
      2,
      () => rate(CHAINS_IN_FLIGHT, phaseMs, rawPublish),
      () => chained(CHAINS_IN_FLIGHT),
    );
    results.push(
      result(`chained appends, ${CHAINS_IN_FLIGHT} chains`, chained64, `js.publish, ${CHAINS_IN_FLIGHT} in flight`, raw64, { target: 0.8, cpu: true }),
    );
    // The log publishes through a pipelined ack publisher; against that same publisher without
    // chaining (no CAS, no dedupe, no hashing) the ratio shows what chaining itself costs.
    const pipelined = new JetStreamAckPublisher(nc, 5_000);
    const noHeaders = headers();
    const [pipe64, chainedAgain64] = await abba(
      1,
      () => rate(CHAINS_IN_FLIGHT, phaseMs, (worker) => pipelined.publish(`${prefix}.pipe_${worker}`, raw, noHeaders)),
      () => chained(CHAINS_IN_FLIGHT),
    );
    pipelined.close();
    results.push(
      result(`chained appends, ${CHAINS_IN_FLIGHT} chains`, chainedAgain64, `pipelined publish, ${CHAINS_IN_FLIGHT} in flight`, pipe64, { cpu: true }),
    );

    // verifyChain over one long chain, against sha256 of the same stored bytes.
    const count = options.verifyReceipts ?? 20_000;
    const receipts: ReceiptEnvelope[] = [];
    const bytes: Buffer[] = [];
    let head: { seq: number; hash: string } = GENESIS_HEAD;
    for (let i = 0; i < count; i++) {
      const { receipt, canonical } = sealOnto(prepareAppend('run_verify', stepEvent('run_verify', i)), head);
      receipts.push(receipt);
      bytes.push(Buffer.from(canonical));
      head = receipt;
    }
    const hashAll = () => {
      for (const b of bytes) sha256Hex(b);
      return bytes.length;
    };
    const verifyAll = () => {
      const verdict = verifyChain(receipts);
      if (!verdict.ok) throw new Error(`bench chain does not verify: ${verdict.message}`);
      return verdict.count;
    };
    const [hashRate, verifyRate] = await abba(1, () => Promise.resolve(cpuRate(phaseMs, hashAll)), () => Promise.resolve(cpuRate(phaseMs, verifyAll)));
    results.push(result('verifyChain receipts', verifyRate, 'sha256 of the same bytes', hashRate));
    return results;
  } finally {
    await log?.close();
    await jsm.streams.delete(stream).catch(() => false);
    await nc.close();
  }
}

function formatRate(n: number): string {
  return `${Math.round(n).toLocaleString('en-US')}/s`;
}

export function formatBenchResults(results: BenchResult[]): string {
  return results
    .map((r) => {
      const cpu = r.cpuMicros === undefined ? '' : `   cpu/op ${r.cpuMicros.measured.toFixed(1)} vs ${r.cpuMicros.baseline.toFixed(1)} µs`;
      const target = r.target === undefined ? '' : `   (target ≥ ${r.target.toFixed(2)}: ${r.ratio >= r.target ? 'met' : 'MISSED'})`;
      return `${r.name.padEnd(26)} ${formatRate(r.perSecond).padStart(11)}   vs ${r.baselineName.padEnd(30)} ${formatRate(r.baselinePerSecond).padStart(11)}   ratio ${r.ratio.toFixed(2)}${cpu}${target}`;
    })
    .join('\n');
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
  runAppendBench()
    .then((results) => {
      process.stdout.write(`${formatBenchResults(results)}\n`);
    })
    .catch((error: unknown) => {
      process.stderr.write(`evidence append bench failed: ${error instanceof Error ? error.message : String(error)}\n`);
      process.exitCode = 1;
    });
}
