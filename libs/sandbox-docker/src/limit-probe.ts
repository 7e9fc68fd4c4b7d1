import type { LimitSample, TmpfsUsage } from '@cairn/sandbox';
import type Docker from 'dockerode';
import { readFile, statfs } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import { cgroupCounterCandidates, parseKeyedCounters, parseProcCgroup, type SandboxLook } from './cgroup-files.js';

const TMPFS_MAGIC = 0x01021994;

/**
 * `auto` reads the kernel from the host (cgroup counters, statfs through `/proc/<pid>/root`:
 * needs root on the engine's host) and falls back per cap to a look from inside the sandbox;
 * `sandbox` always looks from inside (for runtimes that cannot see the host, and for testing).
 */
export type ProbeMode = 'auto' | 'sandbox';

/**
 * Where each cap is read from for one sandbox. `cgroup` / `host`: sampled from the host every
 * poll. `sandbox`: read from inside before the step, at its deadline and after it (memory also
 * from the engine's `oom` event) — a cap hit mid-step is then seen only when the step ends.
 */
export interface ProbeCoverage {
  memory: 'cgroup' | 'sandbox';
  pids: 'cgroup' | 'sandbox';
  disk: 'host' | 'sandbox';
}

export interface ProbeTarget {
  docker: Docker;
  containerId: string;
  /** The host pid of the container's init. */
  pid: number;
  mounts: readonly string[];
  mode: ProbeMode;
  cgroupRoot?: string;
  procRoot?: string;
}

async function readCounter(file: string, key: string): Promise<number | undefined> {
  try {
    return parseKeyedCounters(await readFile(file, 'utf8')).get(key);
  } catch {
    return undefined;
  }
}

async function firstReadable(files: readonly string[], key: string): Promise<string | null> {
  for (const file of files) if ((await readCounter(file, key)) !== undefined) return file;
  return null;
}

/** Epoch ms as the engine's `seconds.nanoseconds` timestamp. */
export function dockerTimestamp(epochMs: number): string {
  const ms = Math.floor(epochMs);
  return `${Math.floor(ms / 1000)}.${String((ms % 1000) * 1_000_000).padStart(9, '0')}`;
}

/** Reads a sandbox's limit counters; built once per sandbox, sampled many times per step. */
export class LimitProbe {
  private constructor(
    private readonly target: ProbeTarget,
    private readonly oomKillsFile: string | null,
    private readonly pidsEventsFile: string | null,
    private readonly rootfs: string | null,
  ) {}

  static async open(target: ProbeTarget): Promise<LimitProbe> {
    if (target.mode === 'sandbox') return new LimitProbe(target, null, null, null);
    const cgroupRoot = target.cgroupRoot ?? '/sys/fs/cgroup';
    const procRoot = target.procRoot ?? '/proc';
    let procCgroup: string;
    try {
      procCgroup = await readFile(`${procRoot}/${target.pid}/cgroup`, 'utf8');
    } catch {
      procCgroup = '';
    }
    const candidates = cgroupCounterCandidates(cgroupRoot, target.containerId, parseProcCgroup(procCgroup));
    const oomKills = await firstReadable(candidates.oomKills, 'oom_kill');
    const pidsEvents = await firstReadable(candidates.pidsEvents, 'max');
    const rootfs = `${procRoot}/${target.pid}/root`;
    let hostStatfs = target.mounts.length > 0;
    for (const mount of target.mounts) {
      try {
        if ((await statfs(`${rootfs}${mount}`)).type !== TMPFS_MAGIC) hostStatfs = false;
      } catch {
        hostStatfs = false;
      }
    }
    return new LimitProbe(target, oomKills, pidsEvents, hostStatfs ? rootfs : null);
  }

  get coverage(): ProbeCoverage {
    return {
      memory: this.oomKillsFile === null ? 'sandbox' : 'cgroup',
      pids: this.pidsEventsFile === null ? 'sandbox' : 'cgroup',
      disk: this.rootfs === null ? 'sandbox' : 'host',
    };
  }

  /** Whether some cap can only be read from inside the sandbox. */
  get needsSandboxLook(): boolean {
    const { memory, pids, disk } = this.coverage;
    return memory === 'sandbox' || pids === 'sandbox' || disk === 'sandbox';
  }

  /** One look from the host at every counter it can read; what it cannot read is left out. */
  async sample(atMs: number): Promise<LimitSample> {
    const [oomKills, pidsMax, tmpfs] = await Promise.all([
      this.oomKillsFile === null ? undefined : readCounter(this.oomKillsFile, 'oom_kill'),
      this.pidsEventsFile === null ? undefined : readCounter(this.pidsEventsFile, 'max'),
      this.rootfs === null ? undefined : this.hostTmpfs(this.rootfs),
    ]);
    const sample: LimitSample = { atMs };
    if (oomKills !== undefined) sample.oomKills = oomKills;
    if (pidsMax !== undefined) sample.pidsMax = pidsMax;
    if (tmpfs !== undefined) sample.tmpfs = tmpfs;
    return sample;
  }

  /** Fills in, from a look inside the sandbox, the caps the host cannot see. */
  merge(sample: LimitSample, inside: SandboxLook): LimitSample {
    const { memory, pids, disk } = this.coverage;
    if (memory === 'sandbox' && inside.oomKills !== undefined) sample.oomKills = inside.oomKills;
    if (pids === 'sandbox' && inside.pidsMax !== undefined) sample.pidsMax = inside.pidsMax;
    if (disk === 'sandbox' && inside.tmpfs !== undefined) sample.tmpfs = inside.tmpfs;
    return sample;
  }

  /** Whether the engine saw an OOM kill in the container between two instants (epoch ms). */
  async engineReportedOom(sinceMs: number, untilMs: number): Promise<boolean | undefined> {
    try {
      const query = {
        since: dockerTimestamp(sinceMs),
        until: dockerTimestamp(untilMs),
        filters: { container: [this.target.containerId], event: ['oom'] },
      };
      // The engine wants `seconds.nanoseconds` strings (a float's fraction would read as ns);
      // the typings only know whole seconds as numbers.
      const stream = await this.target.docker.getEvents(query as unknown as Docker.GetEventsOptions);
      // `until` ends the stream; the timer only guards against an engine that does not.
      const timer = setTimeout(() => (stream as Partial<Readable>).destroy?.(), 3000);
      let text = '';
      try {
        for await (const chunk of stream) text += String(chunk);
      } finally {
        clearTimeout(timer);
      }
      return text.includes('"oom"');
    } catch {
      return undefined;
    }
  }

  private async hostTmpfs(rootfs: string): Promise<TmpfsUsage[] | undefined> {
    try {
      return await Promise.all(
        this.target.mounts.map(async (path) => {
          const fs = await statfs(`${rootfs}${path}`);
          return { path, freeBlocks: fs.bfree, freeInodes: fs.ffree };
        }),
      );
    } catch {
      // The init is gone (the sandbox stopped): nothing to measure any more.
      return undefined;
    }
  }
}
