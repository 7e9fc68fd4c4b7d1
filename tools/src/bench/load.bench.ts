import { readdir, readFile } from 'node:fs/promises';
import { isolatedNames, queueBucketFor } from '@cairn/config';
import { checkStack, formatReport, scenarioClock } from '@cairn/fault-testing';
import { Cairn } from '@cairn/sdk';
import { testDatabaseUrl } from '@cairn/testing';
import { connect } from '@nats-io/transport-node';
import { CpuMeter, startBenchNats } from './bench-servers.js';
import { countFromEnv, isEntryModule, runCli, servicePids, startBenchStack } from './bench-stack.js';
import { BUSYBOX_IMAGE_TAG, createDockerClient, ensureBusyboxImage } from '@cairn/sandbox-docker';

/*
 * Load and soak (issue 18): a mix of runs with a fixed number in flight — instant ones, 20 s sleeps
 * and cap hits (a step past its wall-clock cap) — and sandbox sessions each running a few execs, on
 * an isolated stack with a NATS server of its own, for a number of rounds (or minutes: a soak);
 * after every round the fault suite's checker judges the whole log (nothing lost or doubled, every
 * chain verifies, one terminal state per run, nothing left behind, projections equal a rebuild).
 * Each round prints throughput, each stage's latency from the receipts' own times, Cairn's CPU per
 * run (every service, its NATS server and the PostgreSQL backends, from /proc) and each service's
 * resident memory and open file descriptors, so a leak shows as a climb. Everything through `@cairn/sdk`.
 */

const CAPS = { wallSeconds: 20, memoryMiB: 32, pids: 32, diskMiB: 8, cpus: 0.25 };
const RUN_TIMEOUT_MS = 120_000;

/** What a run of the mix does, and how it must end. */
export type RunKind = 'instant' | 'sleep' | 'cap';

/** One run in ten sleeps 20 s, one in ten runs past its 2 s wall-clock cap; the rest are instant. */
export function runKind(i: number): RunKind {
  if (i % 10 === 9) return 'sleep';
  if (i % 10 === 4) return 'cap';
  return 'instant';
}

function runSpecOf(kind: RunKind, name: string) {
  const base = { name, image: BUSYBOX_IMAGE_TAG, network: 'none' as const };
  if (kind === 'sleep') return { ...base, steps: [{ argv: ['sleep', '20'] }], caps: { ...CAPS, wallSeconds: 40 } };
  if (kind === 'cap') return { ...base, steps: [{ argv: ['sleep', '30'] }], caps: { ...CAPS, wallSeconds: 2 } };
  return { ...base, steps: [{ argv: ['true'] }], caps: CAPS };
}

/** A run's end as its kind requires: sealed, and for a cap hit ROLLBACK E_TIMEOUT. */
export function endProblem(kind: RunKind, run: { runId: string; state: string; errorCode: string | null }): string | null {
  const wanted = kind === 'cap' ? { state: 'ROLLBACK', errorCode: 'E_TIMEOUT' } : { state: 'SEALED', errorCode: null };
  if (run.state === wanted.state && run.errorCode === wanted.errorCode) return null;
  return `${run.runId} (${kind}) ended ${run.state}${run.errorCode === null ? '' : ` ${run.errorCode}`}, not ${wanted.state}${wanted.errorCode === null ? '' : ` ${wanted.errorCode}`}`;
}

/** The stages of a run, each from one receipt's `ts` to the next stage's. */
export const STAGES = ['submitted → scheduled', 'scheduled → running', 'running → executed', 'executed → sealed'] as const;
export type Stage = (typeof STAGES)[number];

/** Each stage's duration in ms from a run's receipts (those it reached; a cap hit has no `run.executed`). */
export function stageDurations(receipts: readonly { type: string; ts: string }[]): Partial<Record<Stage, number>> {
  const at = (type: string) => {
    const found = receipts.find((r) => r.type === type);
    return found === undefined ? null : Date.parse(found.ts);
  };
  const marks = [at('run.submitted'), at('run.scheduled'), at('sandbox.created'), at('run.executed'), at('run.sealed')];
  const out: Partial<Record<Stage, number>> = {};
  STAGES.forEach((stage, i) => {
    const from = marks[i];
    const to = marks[i + 1];
    if (from !== null && from !== undefined && to !== null && to !== undefined) out[stage] = to - from;
  });
  return out;
}

export interface LoadOptions {
  runs: number;
  inFlight: number;
  sessions: number;
  execsPerSession: number;
  sessionsInFlight: number;
  rounds: number;
  /** A soak: rounds go on until this many minutes have passed (at least one round; `rounds` is then ignored). */
  minutes?: number;
  progress?: (line: string) => void;
}

export interface RoundResult {
  round: number;
  /** `sealed`: runs that ended as their kind requires (a cap hit ROLLBACK E_TIMEOUT, sealed). */
  runs: { sealed: number; failed: string[]; wallMs: number; perRunMs: number[]; kinds?: Partial<Record<RunKind, number>> };
  /** Each stage's durations (ms) over the round's runs, from their receipts. */
  stagesMs?: Partial<Record<Stage, number[]>>;
  /** CPU ms per run over the runs phase, by process group (services, nats-server, postgres). */
  cpuPerRunMs?: Record<string, number>;
  /** Open file descriptors of each service after the round. */
  fds?: Record<string, number>;
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
  const out: Record<string, number> = {};
  for (const [service, pid] of Object.entries(await servicePids(home))) {
    const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
    const kb = /VmRSS:\s+(\d+) kB/.exec(status)?.[1];
    if (kb !== undefined) out[service] = Math.round(Number(kb) / 1024);
  }
  return out;
}

async function fdsOf(home: string): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const [service, pid] of Object.entries(await servicePids(home))) {
    const fds = await readdir(`/proc/${pid}/fd`).catch(() => null);
    if (fds !== null) out[service] = fds.length;
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
  // A NATS server of its own, so the CPU counted for NATS is this stack's alone.
  const nats = await startBenchNats();
  progress(nats === null ? 'NATS: the machine’s server (its CPU is not counted)' : `NATS: a server of its own (${nats.url})`);
  const stack = await startBenchStack('bench-load', { CAIRN_WORKER_SLOTS: String(Math.max(options.inFlight, options.sessionsInFlight) + 2) }, nats?.url).catch(async (error: unknown) => {
    await nats?.close();
    throw error;
  });
  const nc = await connect({ servers: stack.natsUrl });
  const cairn = new Cairn({ url: stack.url, apiKey: stack.apiKey });
  const names = isolatedNames(stack.stackId);
  const acknowledged: string[] = [];
  const results: RoundResult[] = [];
  const clock = scenarioClock();
  try {
    const soakUntil = options.minutes === undefined ? null : Date.now() + options.minutes * 60_000;
    const of = soakUntil === null ? `/${options.rounds}` : ` (soak, ${options.minutes} min)`;
    for (let round = 1; soakUntil === null ? round <= options.rounds : round === 1 || Date.now() < soakUntil; round++) {
      progress(`round ${round}${of}: ${options.runs} runs (instant, 20 s sleeps, cap hits), ${options.inFlight} in flight…`);
      const perRunMs: number[] = [];
      const stagesMs: Partial<Record<Stage, number[]>> = {};
      const kinds: Partial<Record<RunKind, number>> = {};
      const meter = new CpuMeter({ services: () => servicePids(stack.home), natsPid: nats?.pid ?? null, databaseUrl: stack.databaseUrl });
      await meter.start();
      const runsStarted = performance.now();
      let sealed = 0;
      const runFailures = await pool(
        Array.from({ length: options.runs }, (_, i) => i),
        options.inFlight,
        async (i) => {
          const kind = runKind(i);
          kinds[kind] = (kinds[kind] ?? 0) + 1;
          const started = performance.now();
          const { runId } = await cairn.runs.submit(runSpecOf(kind, `load ${round}.${i} ${kind}`));
          acknowledged.push(runId);
          const run = await cairn.runs.wait(runId, { timeoutMs: RUN_TIMEOUT_MS });
          const problem = run.sealed ? endProblem(kind, run) : `${runId} (${kind}) not sealed: ${run.state}`;
          if (problem !== null) throw new Error(problem);
          perRunMs.push(performance.now() - started);
          sealed += 1;
        },
      );
      const runsWallMs = performance.now() - runsStarted;
      await meter.stop();
      // Stage latencies from the receipts' own times, read once the runs are done (not counted as load).
      await pool(acknowledged.slice(-options.runs).filter((id) => id.startsWith('run_')), 8, async (runId) => {
        const receipts = [];
        for await (const receipt of cairn.chains.allEvents(runId)) receipts.push(receipt);
        for (const [stage, ms] of Object.entries(stageDurations(receipts)) as [Stage, number][]) (stagesMs[stage] ??= []).push(ms);
      });

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
        runs: { sealed, failed: runFailures, wallMs: runsWallMs, perRunMs, kinds },
        stagesMs,
        cpuPerRunMs: meter.perRun(Math.max(1, sealed)),
        fds: await fdsOf(stack.home),
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
    await nats?.close();
  }
}

export function formatLoadBench(options: LoadOptions, { rounds: results, leftAfterDown }: LoadResult): string {
  const lines = [`load: ${options.runs} runs (${options.inFlight} in flight) and ${options.sessions} sessions × ${options.execsPerSession} execs (${options.sessionsInFlight} at once), ${options.rounds} round(s)`];
  for (const r of results) {
    lines.push(
      `round ${r.round}`,
      `  runs      ${r.runs.sealed}/${options.runs} sealed in ${(r.runs.wallMs / 1000).toFixed(1)} s (${((r.runs.sealed * 1000) / r.runs.wallMs).toFixed(2)} runs/s)   per run p50 ${Math.round(percentile(r.runs.perRunMs, 50))} ms  p99 ${Math.round(percentile(r.runs.perRunMs, 99))} ms`,
      ...(r.runs.kinds === undefined ? [] : [`  mix       ${Object.entries(r.runs.kinds).map(([kind, n]) => `${n} ${kind}`).join(', ')}`]),
      ...STAGES.filter((stage) => (r.stagesMs?.[stage]?.length ?? 0) > 0).map((stage) => {
        const values = r.stagesMs![stage]!;
        return `  stage     ${stage.padEnd(24)} p50 ${Math.round(percentile(values, 50))} ms  p95 ${Math.round(percentile(values, 95))} ms  p99 ${Math.round(percentile(values, 99))} ms  (n=${values.length})`;
      }),
      ...(r.cpuPerRunMs === undefined ? [] : [`  cpu/run   ${Object.values(r.cpuPerRunMs).reduce((a, b) => a + b, 0).toFixed(1)} ms in all: ${Object.entries(r.cpuPerRunMs).map(([name, ms]) => `${name} ${ms.toFixed(1)}`).join(', ')}`]),
      `  sessions  ${r.sessions.done}/${options.sessions} done, ${r.sessions.execs} execs in ${(r.sessions.wallMs / 1000).toFixed(1)} s`,
      ...[...r.runs.failed, ...r.sessions.failed].slice(0, 10).map((f) => `  FAILED    ${f}`),
      `  memory    ${Object.entries(r.rssMiB).map(([s, m]) => `${s} ${m}`).join(', ')} MiB`,
      ...(r.fds === undefined ? [] : [`  fds       ${Object.entries(r.fds).map(([s, n]) => `${s} ${n}`).join(', ')}`]),
      `  invariants ${r.invariants.ok ? 'hold' : 'BROKEN'}`,
      ...r.invariants.text.split('\n').map((l) => `    ${l}`),
    );
  }
  if (results.length > 1) {
    const first = results[0]!.rssMiB;
    const last = results.at(-1)!.rssMiB;
    lines.push(`memory from round 1 to ${results.length}: ${Object.keys(last).map((s) => `${s} ${(last[s]! - (first[s] ?? 0) >= 0 ? '+' : '')}${last[s]! - (first[s] ?? 0)}`).join(', ')} MiB`);
    const fdsFirst = results[0]!.fds;
    const fdsLast = results.at(-1)!.fds;
    if (fdsFirst !== undefined && fdsLast !== undefined) {
      lines.push(`fds from round 1 to ${results.length}: ${Object.keys(fdsLast).map((s) => `${s} ${(fdsLast[s]! - (fdsFirst[s] ?? 0) >= 0 ? '+' : '')}${fdsLast[s]! - (fdsFirst[s] ?? 0)}`).join(', ')}`);
    }
  }
  lines.push(`after cairn down: ${leftAfterDown.length === 0 ? 'no container left' : `LEFT ${leftAfterDown.join(', ')}`}`);
  return lines.join('\n');
}

/** Whether every round sealed everything and kept every invariant. */
export function loadHeld(options: LoadOptions, { rounds: results, leftAfterDown }: LoadResult): boolean {
  return leftAfterDown.length === 0 && results.every((r) => r.invariants.ok && r.runs.sealed === options.runs && r.sessions.done === options.sessions);
}

/** `--minutes N` (a soak), or BENCH_LOAD_MINUTES. */
export function minutesOption(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): { minutes?: number } {
  const at = argv.indexOf('--minutes');
  const raw = at >= 0 ? (argv[at + 1] ?? '') : env.BENCH_LOAD_MINUTES;
  if (raw === undefined) return {};
  const minutes = Number(raw);
  if (!Number.isFinite(minutes) || minutes <= 0 || minutes > 24 * 60) throw new Error(`--minutes takes a number of minutes from 0 to 1440, not ${JSON.stringify(raw)}`);
  return { minutes };
}

if (isEntryModule(import.meta.url)) {
  const options: LoadOptions = {
    runs: countFromEnv('BENCH_LOAD_RUNS') ?? 200,
    inFlight: countFromEnv('BENCH_LOAD_IN_FLIGHT') ?? 8,
    sessions: countFromEnv('BENCH_LOAD_SESSIONS') ?? 20,
    execsPerSession: countFromEnv('BENCH_LOAD_EXECS') ?? 5,
    sessionsInFlight: countFromEnv('BENCH_LOAD_SESSIONS_IN_FLIGHT') ?? 4,
    rounds: countFromEnv('BENCH_LOAD_ROUNDS') ?? 1,
    ...minutesOption(process.argv),
  };
  const results = await runLoadBench({ ...options, progress: (line) => process.stderr.write(`[bench:load] ${line}\n`) });
  process.stdout.write(formatLoadBench(options, results) + '\n');
  if (!loadHeld(options, results)) process.exitCode = 1;
}
