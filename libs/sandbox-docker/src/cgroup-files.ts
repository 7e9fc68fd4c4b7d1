/*
 * Pure parsing of the kernel files the limit probe reads. cgroup v1 keeps each controller in
 * its own hierarchy (`/sys/fs/cgroup/memory/docker/<id>`); v2 has one (`/sys/fs/cgroup/<path>`).
 */

export interface ProcCgroupEntry {
  hierarchy: number;
  controllers: string[];
  path: string;
}

/** Parses `/proc/<pid>/cgroup`: `hierarchy-id:controller,list:/path` per line. */
export function parseProcCgroup(text: string): ProcCgroupEntry[] {
  const entries: ProcCgroupEntry[] = [];
  for (const line of text.split('\n')) {
    const match = /^(\d+):([^:]*):(.*)$/.exec(line.trim());
    if (match?.[1] === undefined || match[2] === undefined || match[3] === undefined) continue;
    entries.push({ hierarchy: Number(match[1]), controllers: match[2] === '' ? [] : match[2].split(','), path: match[3] });
  }
  return entries;
}

/** Parses `key value` lines (`memory.oom_control`, `memory.events`, `pids.events`). */
export function parseKeyedCounters(text: string): Map<string, number> {
  const counters = new Map<string, number>();
  for (const line of text.split('\n')) {
    const match = /^(\S+)\s+(\d+)$/.exec(line.trim());
    if (match?.[1] !== undefined && match[2] !== undefined) counters.set(match[1], Number(match[2]));
  }
  return counters;
}

export interface CgroupCounterFiles {
  /** A file with an `oom_kill N` line: v1 `memory.oom_control` or v2 `memory.events`. */
  oomKills: string[];
  /** A file with a `max N` line: `pids.events` in either version. */
  pidsEvents: string[];
}

/**
 * Where the counters of a container may live, best guess first: the paths its init process
 * reports, then the engine's usual layouts (cgroupfs and systemd drivers, v1 and v2). The probe
 * keeps the first that reads.
 */
export function cgroupCounterCandidates(root: string, containerId: string, procCgroup: readonly ProcCgroupEntry[]): CgroupCounterFiles {
  const v1 = (controller: string): string | undefined =>
    procCgroup.find((entry) => entry.controllers.includes(controller))?.path;
  const v2 = procCgroup.find((entry) => entry.hierarchy === 0 && entry.controllers.length === 0)?.path;
  const memory = v1('memory');
  const pids = v1('pids');

  const oomKills: string[] = [];
  const pidsEvents: string[] = [];
  if (memory !== undefined) oomKills.push(`${root}/memory${memory}/memory.oom_control`);
  if (pids !== undefined) pidsEvents.push(`${root}/pids${pids}/pids.events`);
  if (v2 !== undefined && v2 !== '/') {
    oomKills.push(`${root}${v2}/memory.events`);
    pidsEvents.push(`${root}${v2}/pids.events`);
  }
  for (const dir of [`docker/${containerId}`, `system.slice/docker-${containerId}.scope`]) {
    oomKills.push(`${root}/memory/${dir}/memory.oom_control`, `${root}/${dir}/memory.events`);
    pidsEvents.push(`${root}/pids/${dir}/pids.events`, `${root}/${dir}/pids.events`);
  }
  return { oomKills: [...new Set(oomKills)], pidsEvents: [...new Set(pidsEvents)] };
}

/**
 * The look from inside a sandbox, for when the host's cgroup files and `/proc/<pid>/root` are out
 * of reach: the container's own cgroup (private cgroup namespace, mounted read-only, counters the
 * sandbox cannot change) and `stat -f` of the writable mounts. A fixed script; its only arguments
 * are the mount paths.
 */
export const SANDBOX_LOOK_SCRIPT = [
  "grep -H -e '^oom_kill ' -e '^max ' /sys/fs/cgroup/memory/memory.oom_control /sys/fs/cgroup/memory.events /sys/fs/cgroup/pids/pids.events /sys/fs/cgroup/pids.events 2>/dev/null",
  "stat -f -c '%n %f %d' \"$@\"",
].join('\n');

export interface SandboxLook {
  oomKills?: number;
  pidsMax?: number;
  tmpfs?: { path: string; freeBlocks: number; freeInodes: number }[];
}

/** Parses what `SANDBOX_LOOK_SCRIPT` printed: `file:key value` and `mount free-blocks free-inodes` lines. */
export function parseSandboxLook(text: string): SandboxLook {
  const look: SandboxLook = {};
  const tmpfs: { path: string; freeBlocks: number; freeInodes: number }[] = [];
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    const counter = /^(\/sys\/fs\/cgroup\/\S+):(oom_kill|max) (\d+)$/.exec(line);
    if (counter?.[1] !== undefined && counter[3] !== undefined) {
      const value = Number(counter[3]);
      if (counter[2] === 'oom_kill' && counter[1].includes('memory')) look.oomKills = value;
      if (counter[2] === 'max' && counter[1].endsWith('pids.events')) look.pidsMax = value;
      continue;
    }
    const fs = /^(\/\S*) (\d+) (\d+)$/.exec(line);
    if (fs?.[1] !== undefined && fs[2] !== undefined && fs[3] !== undefined) {
      tmpfs.push({ path: fs[1], freeBlocks: Number(fs[2]), freeInodes: Number(fs[3]) });
    }
  }
  if (tmpfs.length > 0) look.tmpfs = tmpfs;
  return look;
}
