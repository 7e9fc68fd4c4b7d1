import { realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { sha256Hex } from '@cairn/evidence';
import { connectNats, EvidenceLog } from '@cairn/evidence-log';
import type { AppendInput } from '@cairn/evidence-log';
import { startNatsServers } from '@cairn/testing';
import type { NatsServers } from '@cairn/testing';

/*
 * What the sync policy costs (docs/adr/0014-durable-by-default.md): chained appends per second on
 * servers of the bench's own, one with deploy/nats/sync.conf (every write fsynced before its ack) and one with
 * nats-server's default (a background sync every 2 minutes), measured in turn (ABBA) so neither
 * gets the machine's quiet moments to itself; on one node and on a three-node cluster at R3.
 */

export interface DurabilityBenchOptions {
  /** Time per measured phase. */
  phaseMs?: number;
  /** Also measure two three-node clusters (six servers on this machine). Default true. */
  clusters?: boolean;
}

export interface DurabilityResult {
  setup: string;
  chains: number;
  /** Appends per second, every write fsynced before its ack. */
  always: number;
  /** The same on nats-server's default. */
  lazy: number;
  /** always / lazy. */
  ratio: number;
}

const STEP_FIELDS = {
  stage: 'test',
  tool: 'pytest',
  argv: ['python3', '-m', 'pytest', '-q', 'tests/'],
  exit_code: 0,
  stdout_sha256: sha256Hex('stdout'),
  stderr_sha256: sha256Hex('stderr'),
  duration_ms: 1234,
  limits_hit: [],
};

function stepEvent(chainId: string, index: number): AppendInput {
  return { type: 'step.completed', actor: 'runtime', tenant: 'bench', causation: `${chainId}:1`, key: String(index), fields: STEP_FIELDS };
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[mid] ?? 0) : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
}

interface Target {
  servers: NatsServers;
  log: EvidenceLog;
  close(): Promise<void>;
}

async function target(nodes: 1 | 3, sync: 'always' | 'default'): Promise<Target> {
  const servers = await startNatsServers({ nodes, sync, label: `bench-${sync}-${nodes}` });
  try {
    const nc = await connectNats({ servers: servers.urls, name: 'cairn-bench-durability' });
    const log = await EvidenceLog.fromConnection(nc, { servers: servers.urls, stream: 'BENCH_DURABILITY', subjectPrefix: 'bench.durability', replicas: nodes });
    return {
      servers,
      log,
      async close() {
        await log.close();
        await nc.close();
        await servers.stop();
      },
    };
  } catch (error) {
    await servers.stop();
    throw error;
  }
}

let round = 0;

/** `chains` chains appended side by side, each awaiting its own appends, for `ms`: appends per second. */
async function appendRate(log: EvidenceLog, chains: number, ms: number): Promise<number> {
  round += 1;
  const prefix = `run_d${round}`;
  const start = performance.now();
  const deadline = start + ms;
  let done = 0;
  await Promise.all(
    Array.from({ length: chains }, async (_, worker) => {
      const chainId = `${prefix}_w${worker}`;
      for (let i = 0; performance.now() < deadline; i++) {
        await log.append(chainId, stepEvent(chainId, i));
        done += 1;
      }
    }),
  );
  return (done * 1000) / (performance.now() - start);
}

async function measure(setup: string, always: Target, lazy: Target, chains: number, phaseMs: number, rounds: number): Promise<DurabilityResult> {
  const a: number[] = [];
  const l: number[] = [];
  for (let r = 0; r < rounds; r++) {
    l.push(await appendRate(lazy.log, chains, phaseMs));
    a.push(await appendRate(always.log, chains, phaseMs));
    a.push(await appendRate(always.log, chains, phaseMs));
    l.push(await appendRate(lazy.log, chains, phaseMs));
  }
  const result = { setup, chains, always: median(a), lazy: median(l) };
  return { ...result, ratio: result.always / result.lazy };
}

async function compare(nodes: 1 | 3, phaseMs: number): Promise<DurabilityResult[]> {
  const always = await target(nodes, 'always');
  try {
    const lazy = await target(nodes, 'default');
    try {
      const setup = nodes === 1 ? '1 node' : '3 nodes, R3';
      // Warm both (JIT, connections, the streams' first blocks).
      await appendRate(always.log, 8, 150);
      await appendRate(lazy.log, 8, 150);
      return [await measure(setup, always, lazy, 1, phaseMs, 2), await measure(setup, always, lazy, 64, phaseMs, 2)];
    } finally {
      await lazy.close();
    }
  } finally {
    await always.close();
  }
}

export async function runDurabilityBench(options: DurabilityBenchOptions = {}): Promise<DurabilityResult[]> {
  const phaseMs = options.phaseMs ?? 400;
  const results = await compare(1, phaseMs);
  if (options.clusters ?? true) results.push(...(await compare(3, phaseMs)));
  return results;
}

function formatRate(n: number): string {
  return `${Math.round(n).toLocaleString('en-US')}/s`;
}

export function formatDurabilityBench(results: DurabilityResult[]): string {
  const lines = results.map(
    (r) =>
      `${`${r.setup}, ${r.chains} chain${r.chains === 1 ? '' : 's'}`.padEnd(26)} ${formatRate(r.always).padStart(11)}   vs default sync ${formatRate(r.lazy).padStart(11)}   ratio ${r.ratio.toFixed(2)}`,
  );
  return ['durability: chained appends fsynced before each ack (sync_interval: always) vs nats-server\'s default (every 2 min)', ...lines].join('\n');
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
  runDurabilityBench()
    .then((results) => process.stdout.write(`${formatDurabilityBench(results)}\n`))
    .catch((error: unknown) => {
      process.stderr.write(`durability bench failed: ${error instanceof Error ? error.message : String(error)}\n`);
      process.exitCode = 1;
    });
}
