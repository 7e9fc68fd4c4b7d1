import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { isolatedNames, queueBucketFor } from '@cairn/config';
import { checkStack, formatReport, scenarioClock } from '@cairn/fault-testing';
import { Cairn } from '@cairn/sdk';
import { testDatabaseUrl } from '@cairn/testing';
import { connect } from '@nats-io/transport-node';
import { countFromEnv, isEntryModule, runCli, startBenchStack } from './bench-stack.js';
import { BUSYBOX_IMAGE_TAG, createDockerClient, ensureBusyboxImage } from '@cairn/sandbox-docker';

/*
 * Load and soak (issue 18): trivial runs with a fixed number in flight, and sandbox sessions each
 * running a few execs, on an isolated stack, for a number of rounds; after every round the fault
 * suite's checker judges the whole log (nothing lost or doubled, every chain verifies, one terminal
 * state per run, nothing left behind, projections equal a rebuild), and each service's resident
 * memory is printed, so a leak shows as a climb across rounds. Everything through `@cairn/sdk`.
 */

const CAPS = { wallSeconds: 20, memoryMiB: 32, pids: 32, diskMiB: 8, cpus: 0.25 };
const RUN_TIMEOUT_MS = 120_000;

export interface LoadOptions {
  runs: number;
  inFlight: number;
  sessions: number;
  execsPerSession: number;
  sessionsInFlight: number;
  rounds: number;
  progress?: (line: string) => void;
}

export interface RoundResult {
  round: number;
  runs: { sealed: number; failed: string[]; wallMs: number; perRunMs: number[] };
  sessions: { done: number; failed: string[]; execs: number; wallMs: number };
  /** Resident memory of each service after the round, MiB. */
  rssMiB: Record<string, number>;
  invariants: { ok: boolean; text: string };
}

/** Runs `task` over `items` with at most `limit` at once; each failure is kept with its item. */
async function pool<T>(items: readonly T[], limit: number, task: (item: T) => Promise<void>): Promise<string[]> {
  const failures: string[] = [];
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const item = items[next++]!;
      await task(item).catch((error: unknown) => failures.push(error instanceof Error ? error.message : String(error)));
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return failures;
}

function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

async function rssOf(home: string): Promise<Record<string, number>> {
  const stack = JSON.parse(await readFile(join(home, 'stack.json'), 'utf8')) as { services: Record<string, { pid: number }> };
  const out: Record<string, number> = {};
  for (const [service, { pid }] of Object.entries(stack.services)) {
    const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
    const kb = /VmRSS:\s+(\d+) kB/.exec(status)?.[1];
    if (kb !== undefined) out[service] = Math.round(Number(kb) / 1024);
  }
  return out;
}

export interface LoadResult {
  rounds: RoundResult[];
  /** Containers of the stack's worker still there once `cairn down` returned (the warm pool included): none is right. */
  leftAfterDown: string[];
}

export async function runLoadBench(options: LoadOptions): Promise<LoadResult> {
  const progress = options.progress ?? (() => undefined);
  await ensureBusyboxImage();
  progress('starting an isolated stack (cairn up)…');
  const stack = await startBenchStack('bench-load', { CAIRN_WORKER_SLOTS: String(Math.max(options.inFlight, options.sessionsInFlight) + 2) });
  const nc = await connect({ servers: stack.natsUrl });
  const cairn = new Cairn({ url: stack.url, apiKey: stack.apiKey });
  const names = isolatedNames(stack.stackId);
  const acknowledged: string[] = [];
  const results: RoundResult[] = [];
  const clock = scenarioClock();
  try {
    for (let round = 1; round <= options.rounds; round++) {
      progress(`round ${round}/${options.rounds}: ${options.runs} runs, ${options.inFlight} in flight…`);
      const perRunMs: number[] = [];
      const runsStarted = performance.now();
      let sealed = 0;
      const runFailures = await pool(
        Array.from({ length: options.runs }, (_, i) => i),
        options.inFlight,
        async (i) => {
          const started = performance.now();
          const { runId } = await cairn.runs.submit({ name: `load ${round}.${i}`, image: BUSYBOX_IMAGE_TAG, steps: [{ argv: ['true'] }], caps: CAPS, network: 'none' });
          acknowledged.push(runId);
          const run = await cairn.runs.wait(runId, { timeoutMs: RUN_TIMEOUT_MS });
          if (run.state !== 'SEALED') throw new Error(`${runId} ended ${run.state}${run.errorCode === null ? '' : ` ${run.errorCode}`}`);
          perRunMs.push(performance.now() - started);
          sealed += 1;
        },
      );
      const runsWallMs = performance.now() - runsStarted;

      progress(`round ${round}/${options.rounds}: ${options.sessions} sessions × ${options.execsPerSession} execs, ${options.sessionsInFlight} at once…`);
      const sessionsStarted = performance.now();
      let done = 0;
      let execs = 0;
      const sessionFailures = await pool(
        Array.from({ length: options.sessions }, (_, i) => i),
        options.sessionsInFlight,
        async () => {
          const session = await cairn.sandboxes.create({ image: BUSYBOX_IMAGE_TAG, caps: CAPS, network: 'none', ttlSeconds: 300 });
          acknowledged.push(session.id);
          try {
            for (let e = 0; e < options.execsPerSession; e++) {
              const result = await session.exec(['sh', '-c', `echo exec ${e}`]);
              if (result.exitCode !== 0) throw new Error(`${session.id}: exec ${e} exited ${String(result.exitCode)}`);
              execs += 1;
            }
          } finally {
            await cairn.sandboxes.destroy(session.id);
          }
          done += 1;
        },
      );
      const sessionsWallMs = performance.now() - sessionsStarted;

      progress(`round ${round}/${options.rounds}: checking the invariants…`);
      const report = await checkStack(
        {
          nc,
          natsUrl: stack.natsUrl,
          evidenceStream: names.CAIRN_EVIDENCE_STREAM,
          subjectPrefix: names.CAIRN_EVIDENCE_SUBJECT_PREFIX,
          workerIds: [names.CAIRN_WORKER_ID],
          warmPoolLive: true,
          leasesBucket: names.CAIRN_LEASES_BUCKET,
          queueBucket: queueBucketFor(names.CAIRN_LEASES_BUCKET),
          databaseUrl: stack.databaseUrl,
          databaseServerUrl: testDatabaseUrl(),
        },
        { acknowledged },
        clock,
      );
      results.push({
        round,
        runs: { sealed, failed: runFailures, wallMs: runsWallMs, perRunMs },
        sessions: { done, failed: sessionFailures, execs, wallMs: sessionsWallMs },
        rssMiB: await rssOf(stack.home),
        invariants: { ok: report.ok, text: formatReport(report) },
      });
    }
    progress('cairn down, then what is left…');
    await runCli(['down'], stack.env);
    const left = await createDockerClient().listContainers({ all: true, filters: { label: [`io.cairn.worker=${names.CAIRN_WORKER_ID}`] } });
    return { rounds: results, leftAfterDown: left.map((c) => (c.Names[0] ?? c.Id).replace(/^\//, '')) };
  } finally {
    await nc.close();
    await stack.close();
  }
}

export function formatLoadBench(options: LoadOptions, { rounds: results, leftAfterDown }: LoadResult): string {
  const lines = [`load: ${options.runs} runs (${options.inFlight} in flight) and ${options.sessions} sessions × ${options.execsPerSession} execs (${options.sessionsInFlight} at once), ${options.rounds} round(s)`];
  for (const r of results) {
    lines.push(
      `round ${r.round}`,
      `  runs      ${r.runs.sealed}/${options.runs} sealed in ${(r.runs.wallMs / 1000).toFixed(1)} s (${((r.runs.sealed * 1000) / r.runs.wallMs).toFixed(2)} runs/s)   per run p50 ${Math.round(percentile(r.runs.perRunMs, 50))} ms  p99 ${Math.round(percentile(r.runs.perRunMs, 99))} ms`,
      `  sessions  ${r.sessions.done}/${options.sessions} done, ${r.sessions.execs} execs in ${(r.sessions.wallMs / 1000).toFixed(1)} s`,
      ...[...r.runs.failed, ...r.sessions.failed].slice(0, 10).map((f) => `  FAILED    ${f}`),
      `  memory    ${Object.entries(r.rssMiB).map(([s, m]) => `${s} ${m}`).join(', ')} MiB`,
      `  invariants ${r.invariants.ok ? 'hold' : 'BROKEN'}`,
      ...r.invariants.text.split('\n').map((l) => `    ${l}`),
    );
  }
  if (results.length > 1) {
    const first = results[0]!.rssMiB;
    const last = results.at(-1)!.rssMiB;
    lines.push(`memory from round 1 to ${results.length}: ${Object.keys(last).map((s) => `${s} ${(last[s]! - (first[s] ?? 0) >= 0 ? '+' : '')}${last[s]! - (first[s] ?? 0)}`).join(', ')} MiB`);
  }
  lines.push(`after cairn down: ${leftAfterDown.length === 0 ? 'no container left' : `LEFT ${leftAfterDown.join(', ')}`}`);
  return lines.join('\n');
}

/** Whether every round sealed everything and kept every invariant. */
export function loadHeld(options: LoadOptions, { rounds: results, leftAfterDown }: LoadResult): boolean {
  return leftAfterDown.length === 0 && results.every((r) => r.invariants.ok && r.runs.sealed === options.runs && r.sessions.done === options.sessions);
}

if (isEntryModule(import.meta.url)) {
  const options: LoadOptions = {
    runs: countFromEnv('BENCH_LOAD_RUNS') ?? 200,
    inFlight: countFromEnv('BENCH_LOAD_IN_FLIGHT') ?? 8,
    sessions: countFromEnv('BENCH_LOAD_SESSIONS') ?? 20,
    execsPerSession: countFromEnv('BENCH_LOAD_EXECS') ?? 5,
    sessionsInFlight: countFromEnv('BENCH_LOAD_SESSIONS_IN_FLIGHT') ?? 4,
    rounds: countFromEnv('BENCH_LOAD_ROUNDS') ?? 1,
  };
  const results = await runLoadBench({ ...options, progress: (line) => process.stderr.write(`[bench:load] ${line}\n`) });
  process.stdout.write(formatLoadBench(options, results) + '\n');
  if (!loadHeld(options, results)) process.exitCode = 1;
}
