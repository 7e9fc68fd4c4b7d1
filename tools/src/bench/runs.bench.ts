import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseSandboxSpec } from '@cairn/sandbox';
import { BUSYBOX_IMAGE_TAG, createDockerClient, ensureBusyboxImage, hardenedContainerOptions } from '@cairn/sandbox-docker';
import { countFromEnv, isEntryModule, startBenchStack } from './bench-stack.js';

/*
 * Per-run wall time of trivial runs through Cairn (REST submit → `run.sealed` over SSE) beside
 * raw, equally hardened containers running the same command through the engine's API (create,
 * start, wait, remove: what `docker run --rm` does), sequentially and with 4 in flight. Cairn's
 * own isolated stack, started with `cairn up` and removed afterwards.
 */

const COMMAND = ['true'];
// Half a CPU each: four fit a 2-CPU worker, as the scheduler reserves them (the raw containers get the same).
const CAPS = { wallSeconds: 20, memoryMiB: 32, pids: 32, diskMiB: 8, cpus: 0.5 };
/** Targets (the issue): Cairn's per-run time at most 1.25× raw; with 4 in flight at least 80% of raw throughput. */
const RUN_TIMEOUT_MS = 60_000;
export const TARGETS = { sequentialRatio: 1.25, throughputShare: 0.8 } as const;

export interface Phase {
  name: string;
  runs: number;
  /** Wall time of each run, ms. */
  perRunMs: number[];
  /** Wall time of the whole phase, ms. */
  totalMs: number;
  /** CPU the whole machine was busy for during the phase (every process and the kernel), ms; null off Linux. */
  machineCpuMs: number | null;
}

export interface RunsBenchResult {
  sequential: { cairn: Phase; raw: Phase; ratio: number; met: boolean };
  inFlight: { cairn: Phase; raw: Phase; share: number; met: boolean };
  /** CPU time (user + system) each Cairn service spent per run over both Cairn phases, ms. */
  cpuPerRunMs: Record<string, number>;
}

/** CPU seconds (user + system) of a process so far, from /proc (Linux): clock ticks are 1/100 s. */
async function processCpuMs(pid: number): Promise<number | null> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => null);
  if (stat === null) return null;
  // Fields after the command name, which may hold spaces and parentheses: utime and stime are 14 and 15.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

/** Each service's CPU ms so far, by name, from the stack file `cairn up` wrote. */
async function servicesCpuMs(home: string): Promise<Record<string, number>> {
  const stack = JSON.parse(await readFile(join(home, 'stack.json'), 'utf8')) as { services: Record<string, { pid: number }> };
  const cpu: Record<string, number> = {};
  for (const [name, { pid }] of Object.entries(stack.services)) {
    const used = await processCpuMs(pid);
    if (used !== null) cpu[name] = used;
  }
  return cpu;
}

/** CPU time the machine has been busy so far (all CPUs, from /proc/stat), ms; null where unreadable. */
async function machineBusyMs(): Promise<number | null> {
  const stat = await readFile('/proc/stat', 'utf8').catch(() => null);
  const line = stat?.split('\n').find((l) => l.startsWith('cpu '));
  if (line === undefined) return null;
  // user nice system idle iowait irq softirq steal …, in clock ticks of 1/100 s.
  const [user, nice, system, , , irq, softirq, steal] = line.trim().split(/\s+/).slice(1).map(Number);
  return ((user ?? 0) + (nice ?? 0) + (system ?? 0) + (irq ?? 0) + (softirq ?? 0) + (steal ?? 0)) * 10;
}

export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

export function throughput(phase: Phase): number {
  return phase.totalMs > 0 ? (phase.runs * 1000) / phase.totalMs : 0;
}

/** Runs `task` `count` times with at most `parallel` at once; each run's time and the total. */
export async function timePhase(name: string, count: number, parallel: number, task: (i: number) => Promise<void>): Promise<Phase> {
  const perRunMs: number[] = [];
  let next = 0;
  const busyBefore = await machineBusyMs();
  const started = performance.now();
  const worker = async () => {
    while (next < count) {
      const i = next++;
      const t0 = performance.now();
      await task(i);
      perRunMs.push(performance.now() - t0);
    }
  };
  await Promise.all(Array.from({ length: Math.min(parallel, count) }, worker));
  const totalMs = performance.now() - started;
  const busyAfter = await machineBusyMs();
  return { name, runs: count, perRunMs, totalMs, machineCpuMs: busyBefore === null || busyAfter === null ? null : busyAfter - busyBefore };
}

function ms(value: number): string {
  return `${value.toFixed(0)} ms`;
}

export function formatRunsBench(result: RunsBenchResult): string {
  const row = (phase: Phase) =>
    `  ${phase.name.padEnd(34)} median ${ms(median(phase.perRunMs)).padStart(7)}   p90 ${ms(percentile(phase.perRunMs, 90)).padStart(7)}   ${throughput(phase).toFixed(2).padStart(6)} runs/s   (${phase.runs} runs)` +
    (phase.machineCpuMs === null ? '' : `   machine CPU ${ms(phase.machineCpuMs / phase.runs)}/run`);
  const { sequential, inFlight } = result;
  return [
    'sequential (one run at a time)',
    row(sequential.cairn),
    row(sequential.raw),
    `  Cairn / raw per run: ${sequential.ratio.toFixed(2)}×   (target ≤ ${TARGETS.sequentialRatio.toFixed(2)}×: ${sequential.met ? 'met' : 'MISSED'})`,
    '4 in flight',
    row(inFlight.cairn),
    row(inFlight.raw),
    `  Cairn throughput / raw: ${(inFlight.share * 100).toFixed(0)}%   (target ≥ ${(TARGETS.throughputShare * 100).toFixed(0)}%: ${inFlight.met ? 'met' : 'MISSED'})`,
    'CPU per Cairn run, by service (user + system)',
    ...Object.entries(result.cpuPerRunMs)
      .sort(([, a], [, b]) => b - a)
      .map(([service, cpu]) => `  ${service.padEnd(14)} ${cpu.toFixed(1).padStart(6)} ms`),
    `  ${'all'.padEnd(14)} ${Object.values(result.cpuPerRunMs).reduce((a, b) => a + b, 0).toFixed(1).padStart(6)} ms`,
  ].join('\n');
}

/** Submits one trivial run and waits on the SSE stream for its seal; fails unless it sealed SEALED. */
async function cairnRun(url: string, apiKey: string, key: string): Promise<void> {
  const auth = { authorization: `Bearer ${apiKey}` };
  const submitted = await fetch(`${url}/v1/runs`, {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json', 'idempotency-key': key },
    body: JSON.stringify({ name: 'bench: true', image: BUSYBOX_IMAGE_TAG, steps: [{ argv: COMMAND }], caps: CAPS, network: 'none' }),
  });
  if (submitted.status !== 202) throw new Error(`submit answered ${submitted.status}: ${await submitted.text()}`);
  const { runId } = (await submitted.json()) as { runId: string };
  // A run that does not seal in a minute is a failure of the stack, not a slow figure.
  const stream = await fetch(`${url}/v1/runs/${runId}/events/stream?after=0`, {
    headers: { ...auth, accept: 'text/event-stream' },
    signal: AbortSignal.timeout(RUN_TIMEOUT_MS),
  }).catch((error: unknown) => {
    throw new Error(`run ${runId}: ${error instanceof Error ? error.message : String(error)}`);
  });
  if (stream.status !== 200 || stream.body === null) throw new Error(`stream answered ${stream.status}`);
  const decoder = new TextDecoder();
  const reader = stream.body.getReader();
  let text = '';
  const next = () =>
    reader.read().catch((error: unknown) => {
      throw new Error(`run ${runId} was not sealed within ${RUN_TIMEOUT_MS / 1000} s: ${error instanceof Error ? error.message : String(error)}`);
    });
  for (let read = await next(); !read.done; read = await next()) {
    text += decoder.decode(read.value as Uint8Array, { stream: true });
    const sealed = /"type":"run\.sealed"[^\n]*"final_state":"([A-Z]+)"|"final_state":"([A-Z]+)"[^\n]*"type":"run\.sealed"/.exec(text);
    if (sealed !== null) {
      const state = sealed[1] ?? sealed[2];
      await reader.cancel();
      if (state !== 'SEALED') {
        const why = /"error_code":"(E_[A-Z_]+)"(?:[^\n]*?"message":("(?:[^"\\]|\\.)*"))?/.exec(text);
        throw new Error(`run ${runId} sealed ${state ?? '?'}${why === null ? '' : ` (${why[1]}${why[2] === undefined ? '' : `: ${JSON.parse(why[2]) as string}`})`}`);
      }
      return;
    }
  }
  throw new Error(`the stream of ${runId} ended before run.sealed`);
}

export interface RunsBenchOptions {
  sequentialRuns?: number;
  inFlightRuns?: number;
  /** CAIRN_WARM_POOL_SIZE of the stack measured. */
  warmPool?: string;
  progress?: (line: string) => void;
}

export async function runRunsBench(options: RunsBenchOptions = {}): Promise<RunsBenchResult> {
  const progress = options.progress ?? (() => undefined);
  const sequentialRuns = options.sequentialRuns ?? 12;
  const inFlightRuns = options.inFlightRuns ?? 24;
  const warmPool = options.warmPool ?? process.env.BENCH_WARM_POOL ?? '2';
  progress(`warm pool: ${warmPool} per profile (BENCH_WARM_POOL)`);
  progress('starting an isolated stack (cairn up)…');
  // The warm pool is measured on unless BENCH_WARM_POOL says otherwise.
  const stack = await startBenchStack('bench-runs', { CAIRN_WARM_POOL_SIZE: warmPool });
  const { url, apiKey, home, stackId } = stack;
  const docker = createDockerClient();
  const rawWorker = stack.rawWorkerId;
  try {
    const imageId = await ensureBusyboxImage({ docker });

    let rawCount = 0;
    const rawRun = async () => {
      rawCount += 1;
      const spec = parseSandboxSpec({ image: imageId, caps: CAPS, labels: { workerId: rawWorker, chainId: `run_bench_raw_${stackId}_${rawCount}` } });
      // The same hardened container the runtime makes, running the command itself as `docker run --rm` would.
      const container = await docker.createContainer({ ...hardenedContainerOptions(spec, imageId), Entrypoint: COMMAND, Cmd: [] });
      await container.start();
      const exit = (await container.wait()) as { StatusCode: number };
      await container.remove({ force: true });
      if (exit.StatusCode !== 0) throw new Error(`raw run exited ${exit.StatusCode}`);
    };
    let cairnCount = 0;
    const cairnOnce = () => cairnRun(url, apiKey, `${stackId}-${++cairnCount}`);

    progress('warming up…');
    for (let i = 0; i < 2; i++) {
      await cairnOnce();
      await rawRun();
    }

    // Alternating phases share whatever else the machine is doing.
    progress(`sequential: ${sequentialRuns} runs each…`);
    const half = Math.ceil(sequentialRuns / 2);
    const seqRawA = await timePhase('raw hardened container, sequential', half, 1, rawRun);
    let cpuBefore = await servicesCpuMs(home);
    const cpuUsed: Record<string, number> = {};
    const countCpu = async () => {
      const now = await servicesCpuMs(home);
      for (const [name, used] of Object.entries(now)) cpuUsed[name] = (cpuUsed[name] ?? 0) + used - (cpuBefore[name] ?? used);
      cpuBefore = now;
    };
    const seqCairnA = await timePhase('Cairn run (submit → sealed)', half, 1, cairnOnce);
    const seqCairnB = await timePhase('Cairn run (submit → sealed)', sequentialRuns - half, 1, cairnOnce);
    await countCpu();
    const seqRawB = await timePhase('raw hardened container, sequential', sequentialRuns - half, 1, rawRun);
    const merge = (a: Phase, b: Phase): Phase => ({
      name: a.name,
      runs: a.runs + b.runs,
      perRunMs: [...a.perRunMs, ...b.perRunMs],
      totalMs: a.totalMs + b.totalMs,
      machineCpuMs: a.machineCpuMs === null || b.machineCpuMs === null ? null : a.machineCpuMs + b.machineCpuMs,
    });
    const seqCairn = merge(seqCairnA, seqCairnB);
    const seqRaw = merge(seqRawA, seqRawB);

    progress(`4 in flight: ${inFlightRuns} runs each…`);
    const parRaw = await timePhase('raw hardened containers, 4 in flight', inFlightRuns, 4, rawRun);
    cpuBefore = await servicesCpuMs(home);
    const parCairn = await timePhase('Cairn runs, 4 in flight', inFlightRuns, 4, cairnOnce);
    await countCpu();
    const cairnRuns = sequentialRuns + inFlightRuns;
    const cpuPerRunMs = Object.fromEntries(Object.entries(cpuUsed).map(([name, used]) => [name, used / cairnRuns]));

    const ratio = median(seqCairn.perRunMs) / median(seqRaw.perRunMs);
    const share = throughput(parCairn) / throughput(parRaw);
    return {
      sequential: { cairn: seqCairn, raw: seqRaw, ratio, met: ratio <= TARGETS.sequentialRatio },
      inFlight: { cairn: parCairn, raw: parRaw, share, met: share >= TARGETS.throughputShare },
      cpuPerRunMs,
    };
  } finally {
    progress('cleaning up…');
    await stack.close();
  }
}

if (isEntryModule(import.meta.url)) {
  const sequentialRuns = countFromEnv('BENCH_SEQUENTIAL_RUNS');
  const inFlightRuns = countFromEnv('BENCH_IN_FLIGHT_RUNS');
  runRunsBench({
    progress: (line) => process.stderr.write(`[bench:runs] ${line}\n`),
    ...(sequentialRuns === undefined ? {} : { sequentialRuns }),
    ...(inFlightRuns === undefined ? {} : { inFlightRuns }),
  })
    .then((result) => {
      process.stdout.write(`${formatRunsBench(result)}\n`);
    })
    .catch((error: unknown) => {
      process.stderr.write(`runs bench failed: ${error instanceof Error ? error.message : String(error)}\n`);
      process.exitCode = 1;
    });
}
