import { readdir, readFile } from 'node:fs/promises';
import { loadavg } from 'node:os';
import { parseSandboxSpec } from '@cairn/sandbox';
import { BUSYBOX_IMAGE_TAG, createDockerClient, ensureBusyboxImage, hardenedContainerOptions } from '@cairn/sandbox-docker';
import type Docker from 'dockerode';
import { servicePids, startBenchStack } from './bench-stack.js';
import { median, percentile } from './runs.bench.js';

/*
 * `npm run bench:sandboxes -- --density` (issue 14): an isolated stack on its default capacity
 * opens sandboxes of 128 MiB (and a 64 MiB disk) one after another until the worker refuses one
 * (or BENCH_DENSITY_MAX, default 150), and reports how many it held, what one idle sandbox costs
 * (its container's memory, its engine shim, the runtime's share, the host's), the services' CPU
 * while they all sit idle, create → first exec output at 1, 50 and 100 open (each level probed by
 * sandboxes made, used and deleted there), and an exec in each of them. Then it deletes them all
 * and checks that nothing is left: no container, nothing held on the worker.
 *
 * The baseline, in the same run and after Cairn's are gone: as many equally hardened containers
 * (same caps, same image) started through the engine's API directly — `docker run -d` and a
 * `docker exec` — held open at once, measured the same way (memory, create → first exec output,
 * an exec in each), then removed. The report gives each figure beside it and the ratio.
 */

const SPEC = { image: BUSYBOX_IMAGE_TAG, caps: { memoryMiB: 128, diskMiB: 64, pids: 64, cpus: 1 }, network: 'none', ttlSeconds: 1800, idleSeconds: 1800 } as const;
export const DENSITY_LEVELS = [1, 50, 100] as const;
const PROBES_PER_LEVEL = 10;
const IDLE_WINDOW_MS = 10_000;
/** How long a probe waits for the pool to hold a warm sandbox again before it goes ahead cold. */
const WARM_WAIT_MS = 15_000;
/** The issue's target for the first exec with a hundred open. */
export const FIRST_EXEC_TARGET_MS = 50;

/** Memory of one idle sandbox (or raw container), MiB; null where the host does not say. */
export interface IdleMemory {
  /** Its cgroup's count (the processes in it: for Cairn, the exec agent too). */
  container: number | null;
  /** Its engine shim's proportional set size. */
  shim: number | null;
  /** Cairn's runtime's growth per sandbox (the raw side has none). */
  runtime: number | null;
  /** What the host lost (MemAvailable), per sandbox, everything included. */
  host: number | null;
}

/** The same number of raw hardened containers, held open at once: the baseline. */
export interface DensityBaseline {
  opened: number;
  /** `docker run -d` (create + start), ms, per container. */
  create: number[];
  /** `docker run -d` → first output of a `docker exec echo ready`, ms, per container. */
  open: number[];
  /** A `docker exec true` in each, ms. */
  exec: number[];
  memory: IdleMemory;
  /** Raw containers still there after removing them. */
  left: number;
}

export interface DensityResult {
  opened: number;
  refused: { code: string; resource: string | null; message: string } | null;
  ceiling: number;
  /** `POST /v1/sandboxes` (201 READY), ms, for each sandbox held open. */
  create: number[];
  /** `POST /v1/sandboxes` → first output of `echo ready`, ms, for each sandbox held open. */
  open: number[];
  /** Create → first output of `echo ready`, ms, per level of sandboxes open (the probe included). */
  firstExec: { level: number; ms: number[] }[];
  /** Probes after a level's first that found a warm sandbox running, of how many; and how long each refill took, ms. */
  warm: { hits: number; probes: number; refillMs: number[] };
  /** `true` in each open sandbox, one after another, ms. */
  exec: number[];
  memory: IdleMemory;
  baseline: DensityBaseline;
  /** The services' CPU while every sandbox sat idle, ms per second, by service (and the machine's). */
  idleCpu: Record<string, number>;
  left: { containers: number; reservedSlots: number; open: number };
  load: { before: number[]; after: number[] };
}

function fixed(value: number | null, digits = 1): string {
  return value === null || !Number.isFinite(value) ? '-' : value.toFixed(digits);
}

function ratio(cairn: number | null, raw: number | null): string {
  return cairn === null || raw === null || !Number.isFinite(cairn) || !Number.isFinite(raw) || raw <= 0 ? '-' : `${(cairn / raw).toFixed(2)}×`;
}

export function formatDensityBench(result: DensityResult): string {
  const { baseline } = result;
  const row = (name: string, cairn: number | null, raw: number | null, unit: string) =>
    `  ${name.padEnd(34)} ${`${fixed(cairn, 2)} ${unit}`.padStart(12)}   ${`${fixed(raw, 2)} ${unit}`.padStart(12)}   ${ratio(cairn, raw).padStart(7)}`;
  const latency = (name: string, cairn: readonly number[], raw: readonly number[]) => [
    row(`${name} p50`, cairn.length === 0 ? null : median(cairn), raw.length === 0 ? null : median(raw), 'ms'),
    row(`${name} p95`, cairn.length === 0 ? null : percentile(cairn, 95), raw.length === 0 ? null : percentile(raw, 95), 'ms'),
    row(`${name} p99`, cairn.length === 0 ? null : percentile(cairn, 99), raw.length === 0 ? null : percentile(raw, 99), 'ms'),
  ];
  const lines = [
    `density: ${result.opened} sandboxes of ${SPEC.caps.memoryMiB} MiB (+${SPEC.caps.diskMiB} MiB disk, ${SPEC.caps.cpus} CPU) open at once` +
      (result.refused === null ? ` (the ceiling, ${result.ceiling})` : `; the next refused ${result.refused.code}${result.refused.resource === null ? '' : ` (${result.refused.resource})`}`),
    `memory per idle sandbox: container ${fixed(result.memory.container, 2)} MiB, engine shim ${fixed(result.memory.shim, 2)} MiB, runtime ${fixed(result.memory.runtime, 2)} MiB; host ${fixed(result.memory.host, 2)} MiB`,
    `create → first exec output (\`echo ready\`):`,
    ...result.firstExec.map(
      ({ level, ms }) => `  at ${String(level).padStart(3)} open   p50 ${fixed(median(ms)).padStart(7)} ms   p99 ${fixed(percentile(ms, 99)).padStart(7)} ms   (n=${ms.length})`,
    ),
    `  probes that found a warm sandbox: ${result.warm.hits}/${result.warm.probes} (each level's first makes its profile warm); refill after a claim p50 ${result.warm.refillMs.length === 0 ? '-' : fixed(median(result.warm.refillMs), 0)} ms`,
    `exec (\`true\`) across all ${result.opened}: p50 ${fixed(median(result.exec))} ms, p99 ${fixed(percentile(result.exec, 99))} ms`,
    `idle CPU (ms per s, ${result.opened} open): ${Object.entries(result.idleCpu)
      .sort(([a], [b]) => (a < b ? -1 : 1))
      .map(([name, value]) => `${name} ${fixed(value)}`)
      .join(', ')}`,
  ];
  const at100 = result.firstExec.find((l) => l.level === 100);
  if (at100 !== undefined) lines.push(`  first exec p50 at 100 open ${fixed(median(at100.ms))} ms (target ≤ ${FIRST_EXEC_TARGET_MS} ms: ${median(at100.ms) <= FIRST_EXEC_TARGET_MS ? 'met' : 'MISSED'})`);
  lines.push(
    `baseline, same run: ${baseline.opened} raw hardened containers (docker run -d, same caps and image) open at once`,
    `  ${''.padEnd(34)} ${'Cairn'.padStart(12)}   ${'raw docker'.padStart(12)}   ${'ratio'.padStart(7)}`,
    row('memory per idle: container', result.memory.container, baseline.memory.container, 'MiB'),
    row('memory per idle: engine shim', result.memory.shim, baseline.memory.shim, 'MiB'),
    row('memory per idle: host', result.memory.host, baseline.memory.host, 'MiB'),
    ...latency('create (201 / docker run -d)', result.create, baseline.create),
    ...latency('create → first exec output', result.open, baseline.open),
    ...latency('exec `true` across them', result.exec, baseline.exec),
    `after closing them all: ${result.left.open} open, ${result.left.containers} containers, ${result.left.reservedSlots} slots held, ${baseline.left} raw containers (${leftBehind(result) === 0 ? 'nothing left' : 'LEFT BEHIND'})`,
    `load average (1, 5, 15 min): before ${result.load.before.map((l) => l.toFixed(2)).join(' ')}, after ${result.load.after.map((l) => l.toFixed(2)).join(' ')}`,
  );
  return lines.join('\n');
}

/** What the bench left behind: sandboxes open, containers, slots held, raw containers (0 when clean). */
export function leftBehind(result: DensityResult): number {
  return result.left.open + result.left.containers + result.left.reservedSlots + result.baseline.left;
}

class Api {
  constructor(
    private readonly url: string,
    private readonly key: string,
  ) {}

  async call(path: string, init: { method?: string; body?: unknown; accept?: string } = {}): Promise<Response> {
    return fetch(`${this.url}${path}`, {
      method: init.method ?? 'GET',
      headers: { authorization: `Bearer ${this.key}`, accept: init.accept ?? 'application/json', ...(init.body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) }),
      signal: AbortSignal.timeout(120_000),
    });
  }

  /** A new sandbox's id, or the refusal. */
  async create(): Promise<{ id: string } | { refused: { code: string; resource: string | null; message: string } }> {
    const response = await this.call('/v1/sandboxes', { method: 'POST', body: SPEC });
    const body = (await response.json()) as { id?: string; code?: string; message?: string; details?: { resource?: string } };
    if (response.status === 201 && typeof body.id === 'string') return { id: body.id };
    return { refused: { code: body.code ?? String(response.status), resource: body.details?.resource ?? null, message: body.message ?? '' } };
  }

  /** Resolves when the first output line of a streamed exec arrives; the rest is drained. */
  async firstOutput(id: string, argv: string[]): Promise<void> {
    const response = await this.call(`/v1/sandboxes/${id}/exec`, { method: 'POST', body: { argv }, accept: 'application/x-ndjson' });
    if (response.body === null) throw new Error('no exec stream');
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let text = '';
    for (;;) {
      const read = await reader.read();
      if (read.done) throw new Error(`the exec in ${id} printed nothing: ${text.slice(0, 300)}`);
      text += decoder.decode(read.value as Uint8Array, { stream: true });
      if (text.includes('"type":"output"')) break;
    }
    void (async () => {
      while (!(await reader.read()).done) {
        // drained
      }
    })();
  }

  async exec(id: string): Promise<void> {
    const response = await this.call(`/v1/sandboxes/${id}/exec`, { method: 'POST', body: { argv: ['true'] } });
    const result = (await response.json()) as { exitCode?: number };
    if (result.exitCode !== 0) throw new Error(`exec in ${id} answered ${response.status} ${JSON.stringify(result)}`);
  }

  async destroy(id: string): Promise<void> {
    const response = await this.call(`/v1/sandboxes/${id}`, { method: 'DELETE' });
    if (response.status !== 200) throw new Error(`DELETE ${id} answered ${response.status}`);
  }

  async reservedSlots(workerId: string): Promise<number> {
    const body = (await (await this.call('/v1/workers')).json()) as { items: { workerId: string; reserved: { slots: number } }[] };
    return body.items.find((w) => w.workerId === workerId)?.reserved.slots ?? -1;
  }

  async openCount(): Promise<number> {
    let open = 0;
    let cursor: string | null = null;
    do {
      const page = (await (await this.call(`/v1/sandboxes?limit=200${cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`}`)).json()) as {
        items: { state: string }[];
        nextCursor: string | null;
      };
      open += page.items.filter((s) => s.state === 'READY' || s.state === 'PENDING').length;
      cursor = page.nextCursor;
    } while (cursor !== null);
    return open;
  }
}

/** A process's proportional set size (its share of pages it shares with others), MiB; RSS where smaps_rollup is unreadable. */
async function pssMiB(pid: number): Promise<number | null> {
  const rollup = await readFile(`/proc/${pid}/smaps_rollup`, 'utf8').catch(() => null);
  const line = rollup?.split('\n').find((l) => l.startsWith('Pss:')) ?? (await readFile(`/proc/${pid}/status`, 'utf8').catch(() => ''))?.split('\n').find((l) => l.startsWith('VmRSS:'));
  const kib = line === undefined ? Number.NaN : Number(line.split(/\s+/)[1]);
  return Number.isFinite(kib) ? kib / 1024 : null;
}

/** The engine's shim of each container (`containerd-shim-runc-v2 … -id <container id>`), by container id. */
async function shimsOf(ids: ReadonlySet<string>): Promise<number[]> {
  const pids: number[] = [];
  for (const entry of await readdir('/proc').catch(() => [])) {
    if (!/^\d+$/.test(entry)) continue;
    const cmdline = (await readFile(`/proc/${entry}/cmdline`, 'utf8').catch(() => '')).split('\0');
    if (!(cmdline[0] ?? '').includes('containerd-shim')) continue;
    const at = cmdline.indexOf('-id');
    if (at !== -1 && ids.has(cmdline[at + 1] ?? '')) pids.push(Number(entry));
  }
  return pids;
}

/** A container's memory as its cgroup counts it (v1 or v2), MiB; null where unreadable. */
async function containerMiB(id: string): Promise<number | null> {
  for (const path of [`/sys/fs/cgroup/memory/docker/${id}/memory.usage_in_bytes`, `/sys/fs/cgroup/system.slice/docker-${id}.scope/memory.current`]) {
    const text = await readFile(path, 'utf8').catch(() => null);
    if (text !== null && Number.isFinite(Number(text.trim()))) return Number(text.trim()) / (1024 * 1024);
  }
  return null;
}

async function memAvailableMiB(): Promise<number | null> {
  const line = (await readFile('/proc/meminfo', 'utf8').catch(() => '')).split('\n').find((l) => l.startsWith('MemAvailable:'));
  return line === undefined ? null : Number(line.split(/\s+/)[1]) / 1024;
}

async function processCpuMs(pid: number): Promise<number | null> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => null);
  if (stat === null) return null;
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

async function machineBusyMs(): Promise<number | null> {
  const line = (await readFile('/proc/stat', 'utf8').catch(() => '')).split('\n').find((l) => l.startsWith('cpu '));
  if (line === undefined) return null;
  const [user, nice, system, , , irq, softirq, steal] = line.trim().split(/\s+/).slice(1).map(Number);
  return ((user ?? 0) + (nice ?? 0) + (system ?? 0) + (irq ?? 0) + (softirq ?? 0) + (steal ?? 0)) * 10;
}

function mean(values: readonly (number | null)[]): number | null {
  const known = values.filter((v): v is number => v !== null);
  return known.length === 0 ? null : known.reduce((a, b) => a + b, 0) / known.length;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** What `count` idle containers (`ids`) cost: their cgroups and shims on average, and the host's loss since `hostBefore`, per container. */
async function idleMemory(ids: ReadonlySet<string>, hostBefore: number | null, count: number): Promise<Omit<IdleMemory, 'runtime'>> {
  const containers = await Promise.all([...ids].map(containerMiB));
  const shims = await Promise.all((await shimsOf(ids)).map(pssMiB));
  const hostAfter = await memAvailableMiB();
  return { container: mean(containers), shim: mean(shims), host: hostBefore === null || hostAfter === null ? null : (hostBefore - hostAfter) / Math.max(1, count) };
}

/** A raw `docker exec`; `onFirstOutput` hears the first output byte. */
async function rawExec(container: Docker.Container, argv: string[], onFirstOutput?: () => void): Promise<void> {
  const exec = await container.exec({ Cmd: argv, AttachStdout: true, AttachStderr: true, Tty: false });
  const stream = await exec.start({ hijack: true, stdin: false });
  await new Promise<void>((resolve, reject) => {
    let first = true;
    stream.on('data', () => {
      if (first) onFirstOutput?.();
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

/**
 * The baseline: `count` containers as hardened as a sandbox (the same caps and image, labelled for
 * the bench's raw worker so teardown finds them), started one after another and held open, measured
 * as Cairn's were, then removed.
 */
async function rawBaseline(docker: Docker, rawWorkerId: string, stackId: string, count: number, progress: (line: string) => void): Promise<DensityBaseline> {
  const imageId = await ensureBusyboxImage({ docker });
  const caps = { wallSeconds: SPEC.ttlSeconds, ...SPEC.caps };
  const held: Docker.Container[] = [];
  const create: number[] = [];
  const open: number[] = [];
  const exec: number[] = [];
  const label = [`io.cairn.worker=${rawWorkerId}`];
  try {
    await sleep(2000);
    const hostBefore = await memAvailableMiB();
    for (let i = 0; i < count; i++) {
      const spec = parseSandboxSpec({ image: imageId, caps, labels: { workerId: rawWorkerId, chainId: `sbx_bench_density_raw_${stackId}_${i}` }, lifetimeSeconds: SPEC.ttlSeconds });
      const t0 = performance.now();
      const container = await docker.createContainer(hardenedContainerOptions(spec, imageId));
      held.push(container);
      await container.start();
      const started = performance.now();
      let firstAt = Number.NaN;
      await rawExec(container, ['echo', 'ready'], () => (firstAt = performance.now()));
      create.push(started - t0);
      open.push(firstAt - t0);
      if (held.length % 25 === 0) progress(`  ${held.length} raw open`);
    }
    await sleep(2000 + IDLE_WINDOW_MS);
    const ids = new Set((await docker.listContainers({ filters: { label } })).map((c) => c.Id));
    const memory = { ...(await idleMemory(ids, hostBefore, held.length)), runtime: null };
    for (const container of held) {
      const t0 = performance.now();
      await rawExec(container, ['true']);
      exec.push(performance.now() - t0);
    }
    progress('removing the raw containers…');
    const queue = [...held];
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        for (let c = queue.shift(); c !== undefined; c = queue.shift()) await c.remove({ force: true });
      }),
    );
    held.length = 0;
    const left = (await docker.listContainers({ all: true, filters: { label } })).length;
    return { opened: count, create, open, exec, memory, left };
  } finally {
    for (const container of held) await container.remove({ force: true }).catch(() => undefined);
  }
}

export interface DensityOptions {
  ceiling?: number;
  progress?: (line: string) => void;
}

export async function runDensityBench(options: DensityOptions = {}): Promise<DensityResult> {
  const progress = options.progress ?? (() => undefined);
  const ceiling = options.ceiling ?? 150;
  const loadBefore = loadavg();
  progress(`opening sandboxes until refused (at most ${ceiling}); load average ${loadBefore.map((l) => l.toFixed(2)).join(' ')}`);
  // The worker's default capacity: no slot count set (bench-stack's 4 is taken away).
  const stack = await startBenchStack('bench-density', { CAIRN_WORKER_SLOTS: '' });
  const docker = createDockerClient();
  const api = new Api(stack.url, stack.apiKey);
  const open: string[] = [];
  try {
    const pids = await servicePids(stack.home);
    const runtimePid = pids.runtime;
    const hostBefore = await memAvailableMiB();
    const runtimeBefore = runtimePid === undefined ? null : await pssMiB(runtimePid);

    const firstExec = new Map<number, number[]>();
    const refills: number[] = [];
    let warmProbes = 0;
    /** Waits (bounded) for a warm sandbox of the worker's pool to be running: the path the target is about. */
    const warmReady = async (): Promise<boolean> => {
      const t0 = performance.now();
      for (const deadline = Date.now() + WARM_WAIT_MS; Date.now() < deadline; await sleep(50)) {
        const pooled = await docker.listContainers({ filters: { label: [`io.cairn.worker=${stack.workerId}`, 'io.cairn.pool'], status: ['running'] } });
        if (pooled.some((c) => c.Names.some((n) => n.startsWith('/cairn-pool-')))) {
          refills.push(performance.now() - t0);
          return true;
        }
      }
      return false;
    };
    const probe = async (level: number) => {
      const samples: number[] = [];
      for (let i = 0; i < PROBES_PER_LEVEL; i++) {
        // The first probe of a level makes its profile warm; the rest wait for the pool's refill, as a caller between creates would.
        if (i > 0 && (await warmReady())) warmProbes += 1;
        const t0 = performance.now();
        const made = await api.create();
        if (!('id' in made)) throw new Error(`a probe at ${level} open was refused: ${JSON.stringify(made.refused)}`);
        await api.firstOutput(made.id, ['echo', 'ready']);
        samples.push(performance.now() - t0);
        await api.destroy(made.id);
      }
      firstExec.set(level, samples);
      progress(`  ${level} open: create → first exec p50 ${median(samples).toFixed(1)} ms; pool refilled in p50 ${refills.length === 0 ? '-' : median(refills).toFixed(0)} ms`);
    };

    let refused: DensityResult['refused'] = null;
    const createMs: number[] = [];
    const openMs: number[] = [];
    while (open.length < ceiling) {
      const level = open.length + 1;
      if ((DENSITY_LEVELS as readonly number[]).includes(level)) await probe(level);
      const t0 = performance.now();
      const made = await api.create();
      if (!('id' in made)) {
        refused = made.refused;
        break;
      }
      const created = performance.now();
      await api.firstOutput(made.id, ['echo', 'ready']);
      createMs.push(created - t0);
      openMs.push(performance.now() - t0);
      open.push(made.id);
      if (open.length % 25 === 0) progress(`  ${open.length} open`);
    }
    progress(`${open.length} open; ${refused === null ? 'the ceiling' : `refused: ${refused.code} ${refused.resource ?? ''}`}`);

    // Idle: what they cost, sitting there.
    await sleep(2000);
    const before = { machine: await machineBusyMs(), ...Object.fromEntries(await Promise.all(Object.entries(pids).map(async ([name, pid]) => [name, await processCpuMs(pid)] as const))) };
    await sleep(IDLE_WINDOW_MS);
    const after = { machine: await machineBusyMs(), ...Object.fromEntries(await Promise.all(Object.entries(pids).map(async ([name, pid]) => [name, await processCpuMs(pid)] as const))) };
    const idleCpu: Record<string, number> = {};
    for (const [name, value] of Object.entries(after)) {
      const start = (before as Record<string, number | null>)[name];
      if (typeof value === 'number' && typeof start === 'number') idleCpu[name] = (value - start) / (IDLE_WINDOW_MS / 1000);
    }
    const listed = await docker.listContainers({ filters: { label: [`io.cairn.worker=${stack.workerId}`] } });
    const mine = listed.filter((c) => !c.Names.some((n) => n.startsWith('/cairn-pool-')));
    const runtimeAfter = runtimePid === undefined ? null : await pssMiB(runtimePid);
    const memory = {
      ...(await idleMemory(new Set(mine.map((c) => c.Id)), hostBefore, open.length)),
      runtime: runtimeBefore === null || runtimeAfter === null ? null : (runtimeAfter - runtimeBefore) / Math.max(1, open.length),
    };

    const exec: number[] = [];
    for (const id of open) {
      const t0 = performance.now();
      await api.exec(id);
      exec.push(performance.now() - t0);
    }

    progress('closing them all…');
    const queue = [...open];
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        for (let id = queue.shift(); id !== undefined; id = queue.shift()) await api.destroy(id);
      }),
    );
    open.length = 0;
    let left = { containers: -1, reservedSlots: -1, open: -1 };
    for (const deadline = Date.now() + 30_000; Date.now() < deadline; await sleep(500)) {
      const containersLeft = (await docker.listContainers({ all: true, filters: { label: [`io.cairn.worker=${stack.workerId}`] } })).filter((c) => !c.Names.some((name) => name.startsWith('/cairn-pool-'))).length;
      left = { containers: containersLeft, reservedSlots: await api.reservedSlots(stack.workerId), open: await api.openCount() };
      if (left.containers === 0 && left.reservedSlots === 0 && left.open === 0) break;
    }
    const opened = exec.length;
    progress(`baseline: ${opened} raw hardened containers (docker run -d) open at once…`);
    const baseline = await rawBaseline(docker, stack.rawWorkerId, stack.stackId, opened, progress);
    return {
      opened,
      refused,
      ceiling,
      create: createMs,
      open: openMs,
      baseline,
      firstExec: DENSITY_LEVELS.filter((level) => firstExec.has(level)).map((level) => ({ level, ms: firstExec.get(level) ?? [] })),
      warm: { hits: warmProbes, probes: firstExec.size * (PROBES_PER_LEVEL - 1), refillMs: refills },
      exec,
      memory,
      idleCpu,
      left,
      load: { before: loadBefore, after: loadavg() },
    };
  } finally {
    for (const id of open) await api.destroy(id).catch(() => undefined);
    progress('cleaning up…');
    await stack.close();
  }
}
