import { loadavg } from 'node:os';
import { parseSandboxSpec } from '@cairn/sandbox';
import { BUSYBOX_IMAGE_TAG, createDockerClient, ensureBusyboxImage, hardenedContainerOptions } from '@cairn/sandbox-docker';
import type Docker from 'dockerode';
import { countFromEnv, isEntryModule, startBenchStack } from './bench-stack.js';
import { median, percentile } from './runs.bench.js';
import { formatDensityBench, leftBehind, runDensityBench } from './sandboxes-density.bench.js';

/*
 * Interactive sandbox sessions through Cairn (REST) beside the same hardened container driven
 * through the engine's API directly:
 *   (a) first exec: `POST /v1/sandboxes` → the first output line of the first (streamed) exec,
 *       warm pool on, against `docker run` of an equally hardened container + the first output
 *       of a `docker exec` in it;
 *   (b) exec latency: a trivial `true` through `POST /v1/sandboxes/:id/exec` against a raw
 *       `docker exec` into a running hardened container.
 * Cairn's own isolated stack (`cairn up`), removed afterwards with every container it made.
 */

/** As the runs bench: half a CPU, small caps; the raw containers get the same. */
const CAPS = { wallSeconds: 20, memoryMiB: 32, pids: 32, diskMiB: 8, cpus: 0.5 };
const FIRST_ARGV = ['echo', 'ready'];
const TRIVIAL_ARGV = ['true'];
/** Targets (the issue): first exec from a warm pool ≤ 50 ms p50; an exec ≤ 1.2× a raw docker exec. */
export const TARGETS = { firstExecP50Ms: 50, execRatio: 1.2 } as const;
const REQUEST_TIMEOUT_MS = 60_000;

export interface Sample {
  name: string;
  ms: number[];
}

export interface SandboxesBenchResult {
  firstExec: { cairn: Sample; cairnCreate: Sample; raw: Sample; met: boolean; warmHits: number };
  exec: { cairn: Sample; raw: Sample; ratio: number; met: boolean };
  load: { before: number[]; after: number[] };
}

function ms(value: number): string {
  return Number.isFinite(value) ? `${value.toFixed(1)} ms` : '-';
}

export function formatSandboxesBench(result: SandboxesBenchResult): string {
  const row = (sample: Sample) => `  ${sample.name.padEnd(56)} p50 ${ms(median(sample.ms)).padStart(9)}   p90 ${ms(percentile(sample.ms, 90)).padStart(9)}   (n=${sample.ms.length})`;
  const { firstExec, exec, load } = result;
  const firstRatio = median(firstExec.cairn.ms) / median(firstExec.raw.ms);
  return [
    `first exec (create → first output of \`${FIRST_ARGV.join(' ')}\`), warm pool on; ${firstExec.warmHits}/${firstExec.cairn.ms.length} sessions started with a warm container ready`,
    row(firstExec.cairn),
    row(firstExec.cairnCreate),
    row(firstExec.raw),
    `  Cairn / raw p50: ${firstRatio.toFixed(2)}×   Cairn p50 ${ms(median(firstExec.cairn.ms))} (target ≤ ${TARGETS.firstExecP50Ms} ms: ${firstExec.met ? 'met' : 'MISSED'})`,
    `exec latency (\`${TRIVIAL_ARGV.join(' ')}\`, one after another)`,
    row(exec.cairn),
    row(exec.raw),
    `  Cairn / raw p50: ${exec.ratio.toFixed(2)}×   (target ≤ ${TARGETS.execRatio.toFixed(2)}×: ${exec.met ? 'met' : 'MISSED'})`,
    `load average (1, 5, 15 min): before ${load.before.map((l) => l.toFixed(2)).join(' ')}, after ${load.after.map((l) => l.toFixed(2)).join(' ')}`,
  ].join('\n');
}

/** The Cairn side, over REST with the stack's key. */
class CairnSessions {
  constructor(
    private readonly url: string,
    private readonly apiKey: string,
  ) {}

  private async call(path: string, init: { method: string; body?: unknown; accept?: string }): Promise<Response> {
    const response = await fetch(`${this.url}${path}`, {
      method: init.method,
      headers: {
        authorization: `Bearer ${this.apiKey}`,
        accept: init.accept ?? 'application/json',
        ...(init.body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) }),
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    });
    if (!response.ok) throw new Error(`${init.method} ${path} answered ${response.status}: ${(await response.text()).slice(0, 300)}`);
    return response;
  }

  async create(): Promise<string> {
    const response = await this.call('/v1/sandboxes', { method: 'POST', body: { image: BUSYBOX_IMAGE_TAG, caps: CAPS, network: 'none', ttlSeconds: 600 } });
    const view = (await response.json()) as { id: string; state: string };
    if (view.state !== 'READY') throw new Error(`sandbox ${view.id} answered ${view.state}, not READY`);
    return view.id;
  }

  /** A streamed exec: resolves when its first output line has arrived, then drains it to the result. */
  async firstOutput(id: string, argv: string[]): Promise<{ firstAt: number; done: Promise<void> }> {
    const response = await this.call(`/v1/sandboxes/${id}/exec`, { method: 'POST', body: { argv }, accept: 'application/x-ndjson' });
    if (response.body === null) throw new Error('the exec stream has no body');
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let text = '';
    for (;;) {
      const read = await reader.read();
      if (read.done) throw new Error(`the exec stream of ${id} ended before any output: ${text.slice(0, 300)}`);
      text += decoder.decode(read.value as Uint8Array, { stream: true });
      if (text.includes('"type":"output"')) break;
      if (text.includes('"type":"error"') || text.includes('"type":"result"')) throw new Error(`the exec in ${id} printed nothing: ${text.slice(0, 300)}`);
    }
    const firstAt = performance.now();
    const done = (async () => {
      while (!(await reader.read()).done) {
        // drained: the result line follows the output
      }
    })();
    return { firstAt, done };
  }

  async exec(id: string, argv: string[]): Promise<void> {
    const response = await this.call(`/v1/sandboxes/${id}/exec`, { method: 'POST', body: { argv } });
    const result = (await response.json()) as { exitCode: number | null; limitHit: string | null };
    if (result.exitCode !== 0) throw new Error(`exec in ${id} exited ${String(result.exitCode)} (${String(result.limitHit)})`);
  }

  async destroy(id: string): Promise<void> {
    await this.call(`/v1/sandboxes/${id}`, { method: 'DELETE' });
  }
}

/** A raw `docker exec`: attach, start, resolve on the first output byte (if asked) and at the end. */
async function rawExec(container: Docker.Container, argv: string[], onFirstOutput?: () => void): Promise<void> {
  const exec = await container.exec({ Cmd: argv, AttachStdout: true, AttachStderr: true, Tty: false });
  const stream = await exec.start({ hijack: true, stdin: false });
  await new Promise<void>((resolve, reject) => {
    let first = true;
    stream.on('data', () => {
      if (first && onFirstOutput !== undefined) onFirstOutput();
      first = false;
    });
    stream.once('end', resolve);
    stream.once('close', resolve);
    stream.once('error', reject);
    stream.end();
  });
  const inspected = await exec.inspect();
  if (inspected.ExitCode !== 0) throw new Error(`raw docker exec ${argv.join(' ')} exited ${String(inspected.ExitCode)}`);
}

export interface SandboxesBenchOptions {
  sessions?: number;
  execs?: number;
  /** CAIRN_WARM_POOL_SIZE of the stack measured. */
  warmPool?: string;
  progress?: (line: string) => void;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export async function runSandboxesBench(options: SandboxesBenchOptions = {}): Promise<SandboxesBenchResult> {
  const progress = options.progress ?? (() => undefined);
  const sessions = options.sessions ?? 20;
  const execs = options.execs ?? 100;
  const warmPool = options.warmPool ?? process.env.BENCH_WARM_POOL ?? '2';
  const loadBefore = loadavg();
  progress(`warm pool: ${warmPool} per profile (BENCH_WARM_POOL); load average ${loadBefore.map((l) => l.toFixed(2)).join(' ')}`);
  progress('starting an isolated stack (cairn up)…');
  const stack = await startBenchStack('bench-sbx', { CAIRN_WARM_POOL_SIZE: warmPool });
  const { url, apiKey, stackId, workerId } = stack;
  const docker = createDockerClient();
  const rawWorker = stack.rawWorkerId;
  let rawCount = 0;
  try {
    const cairn = new CairnSessions(url, apiKey);
    const imageId = await ensureBusyboxImage({ docker });

    /** An equally hardened container, started: what `docker run -d` of it does. */
    const rawContainer = async (): Promise<Docker.Container> => {
      rawCount += 1;
      const spec = parseSandboxSpec({ image: imageId, caps: CAPS, labels: { workerId: rawWorker, chainId: `sbx_bench_raw_${stackId}_${rawCount}` }, lifetimeSeconds: 600 });
      const container = await docker.createContainer(hardenedContainerOptions(spec, imageId));
      await container.start();
      return container;
    };
    /** Idle warm containers: pool-labelled and still pool-named (a claimed one takes its sandbox's name). */
    const warmContainers = async (): Promise<number> =>
      (await docker.listContainers({ filters: { label: [`io.cairn.worker=${workerId}`, 'io.cairn.pool'], status: ['running'] } })).filter((c) =>
        c.Names.some((name) => name.startsWith('/cairn-pool-')),
      ).length;
    /**
     * Waits (bounded) until the pool holds a warm container, so each session measures a warm
     * start. A pool that never fills (sessions that do not use it) is waited for only once.
     */
    let poolFills: boolean | null = null;
    const untilWarm = async (): Promise<boolean> => {
      if (poolFills === false) return false;
      const deadline = Date.now() + (poolFills === null ? 15_000 : 5_000);
      while (Date.now() < deadline) {
        if ((await warmContainers()) > 0) {
          poolFills = true;
          return true;
        }
        await sleep(50);
      }
      poolFills ??= false;
      return false;
    };

    const cairnFirst: number[] = [];
    const cairnCreate: number[] = [];
    const rawFirst: number[] = [];
    let warmHits = 0;
    const cairnSession = async (record: boolean) => {
      // Warm-up sessions teach the pool its profile; only measured ones wait for it.
      const warm = record ? await untilWarm() : false;
      const t0 = performance.now();
      const id = await cairn.create();
      const created = performance.now();
      const { firstAt, done } = await cairn.firstOutput(id, FIRST_ARGV);
      await done;
      await cairn.destroy(id);
      if (!record) return;
      if (warm) warmHits += 1;
      cairnFirst.push(firstAt - t0);
      cairnCreate.push(created - t0);
    };
    const rawSession = async (record: boolean) => {
      const t0 = performance.now();
      const container = await rawContainer();
      let firstAt = Number.NaN;
      await rawExec(container, FIRST_ARGV, () => (firstAt = performance.now()));
      await container.remove({ force: true });
      if (record) rawFirst.push(firstAt - t0);
    };

    progress('warming up (the first session of a profile teaches the pool its profile)…');
    for (let i = 0; i < 2; i++) {
      await cairnSession(false);
      await rawSession(false);
    }

    progress(`first exec: ${sessions} sessions each…`);
    // Interleaved, so both sides share whatever else the machine is doing.
    for (let i = 0; i < sessions; i++) {
      await rawSession(true);
      await cairnSession(true);
    }

    progress(`exec latency: ${execs} execs each…`);
    const sandboxId = await cairn.create();
    const raw = await rawContainer();
    const cairnExec: number[] = [];
    const rawExecMs: number[] = [];
    try {
      for (let i = 0; i < 5; i++) {
        await cairn.exec(sandboxId, TRIVIAL_ARGV);
        await rawExec(raw, TRIVIAL_ARGV);
      }
      const block = 10;
      for (let done = 0; done < execs; done += block) {
        const n = Math.min(block, execs - done);
        for (let i = 0; i < n; i++) {
          const t0 = performance.now();
          await rawExec(raw, TRIVIAL_ARGV);
          rawExecMs.push(performance.now() - t0);
        }
        for (let i = 0; i < n; i++) {
          const t0 = performance.now();
          await cairn.exec(sandboxId, TRIVIAL_ARGV);
          cairnExec.push(performance.now() - t0);
        }
      }
    } finally {
      await cairn.destroy(sandboxId).catch(() => undefined);
      await raw.remove({ force: true }).catch(() => undefined);
    }

    const firstP50 = median(cairnFirst);
    const ratio = median(cairnExec) / median(rawExecMs);
    return {
      firstExec: {
        cairn: { name: 'Cairn: POST /v1/sandboxes → first exec output', ms: cairnFirst },
        cairnCreate: { name: '  of which POST /v1/sandboxes (201 READY)', ms: cairnCreate },
        raw: { name: 'raw: docker run (hardened) → first docker exec output', ms: rawFirst },
        met: firstP50 <= TARGETS.firstExecP50Ms,
        warmHits,
      },
      exec: {
        cairn: { name: 'Cairn: POST /v1/sandboxes/:id/exec (JSON)', ms: cairnExec },
        raw: { name: 'raw: docker exec into a running hardened container', ms: rawExecMs },
        ratio,
        met: ratio <= TARGETS.execRatio,
      },
      load: { before: loadBefore, after: loadavg() },
    };
  } finally {
    progress('cleaning up…');
    await stack.close();
  }
}

if (isEntryModule(import.meta.url) && process.argv.includes('--density')) {
  const ceiling = countFromEnv('BENCH_DENSITY_MAX');
  runDensityBench({ progress: (line) => process.stderr.write(`[bench:sandboxes --density] ${line}\n`), ...(ceiling === undefined ? {} : { ceiling }) })
    .then((result) => {
      process.stdout.write(`${formatDensityBench(result)}\n`);
      if (leftBehind(result) !== 0) process.exitCode = 1;
    })
    .catch((error: unknown) => {
      process.stderr.write(`density bench failed: ${error instanceof Error ? error.message : String(error)}\n`);
      process.exitCode = 1;
    });
} else if (isEntryModule(import.meta.url)) {
  const sessions = countFromEnv('BENCH_SESSIONS');
  const execs = countFromEnv('BENCH_EXECS');
  runSandboxesBench({
    progress: (line) => process.stderr.write(`[bench:sandboxes] ${line}\n`),
    ...(sessions === undefined ? {} : { sessions }),
    ...(execs === undefined ? {} : { execs }),
  })
    .then((result) => {
      process.stdout.write(`${formatSandboxesBench(result)}\n`);
    })
    .catch((error: unknown) => {
      process.stderr.write(`sandboxes bench failed: ${error instanceof Error ? error.message : String(error)}\n`);
      process.exitCode = 1;
    });
}
