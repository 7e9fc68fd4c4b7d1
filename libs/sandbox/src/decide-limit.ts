import type { TaxonomyErrorCode } from '@cairn/contracts';

/*
 * Which cap a step hit, decided from what the engine and the kernel reported while it ran — never
 * guessed from the exit code: a fork bomb stopped by the pids cap exits 0, and so does a shell
 * whose OOM-killed child it ignored.
 */

export const LIMIT_CODES = ['E_TIMEOUT', 'E_MEM_LIMIT', 'E_PROC_LIMIT', 'E_DISK_LIMIT'] as const satisfies readonly TaxonomyErrorCode[];
export type LimitCode = (typeof LIMIT_CODES)[number];

/**
 * Ties (limits first seen in the same sample) go to the more specific cause: a full disk or a
 * process cap explains a later timeout; tmpfs pages and many processes both press on memory, so
 * disk and pids come before the OOM killer; the deadline, which explains nothing, comes last.
 */
export const LIMIT_PRECEDENCE: readonly LimitCode[] = ['E_DISK_LIMIT', 'E_PROC_LIMIT', 'E_MEM_LIMIT', 'E_TIMEOUT'];

export interface TmpfsUsage {
  path: string;
  freeBlocks: number;
  freeInodes: number;
}

/**
 * One look at a sandbox's counters. Counters are cumulative since the sandbox started, so a
 * step is judged by the difference to the sample taken just before it; an absent field is one
 * that could not be read, and proves nothing either way.
 */
export interface LimitSample {
  /** When the sample was taken, in ms since the step started. */
  atMs: number;
  deadlinePassed?: boolean;
  /** The memory cgroup's `oom_kill` counter (v1 `memory.oom_control`, v2 `memory.events`). */
  oomKills?: number;
  /** The engine reported an OOM kill (`State.OOMKilled` or an `oom` event). */
  oomReported?: boolean;
  /** The pids cgroup's `max` counter in `pids.events`: forks refused by the cap. */
  pidsMax?: number;
  /** Free blocks and inodes of each writable tmpfs; zero of either is the disk cap. */
  tmpfs?: readonly TmpfsUsage[];
}

export interface LimitObservation {
  limit: LimitCode;
  /** When it was first seen (the sample's `atMs`). */
  atMs: number;
  /** What showed it, for the step's receipt: `pids.events max 0→7`, `/work: 0 free blocks`. */
  evidence: string;
}

const rank = (limit: LimitCode): number => LIMIT_PRECEDENCE.indexOf(limit);

/** The limits `sample` shows hit against `baseline`, in precedence order. */
export function observeLimits(baseline: LimitSample, sample: LimitSample): LimitObservation[] {
  const seen: LimitObservation[] = [];
  const at = sample.atMs;
  for (const fs of sample.tmpfs ?? []) {
    if (fs.freeBlocks <= 0) seen.push({ limit: 'E_DISK_LIMIT', atMs: at, evidence: `${fs.path}: 0 free blocks` });
    else if (fs.freeInodes <= 0) seen.push({ limit: 'E_DISK_LIMIT', atMs: at, evidence: `${fs.path}: 0 free inodes` });
  }
  if (sample.pidsMax !== undefined && baseline.pidsMax !== undefined && sample.pidsMax > baseline.pidsMax) {
    seen.push({ limit: 'E_PROC_LIMIT', atMs: at, evidence: `pids.events max ${baseline.pidsMax}→${sample.pidsMax}` });
  }
  if (sample.oomKills !== undefined && baseline.oomKills !== undefined && sample.oomKills > baseline.oomKills) {
    seen.push({ limit: 'E_MEM_LIMIT', atMs: at, evidence: `oom_kill ${baseline.oomKills}→${sample.oomKills}` });
  } else if (sample.oomReported === true && baseline.oomReported !== true) {
    seen.push({ limit: 'E_MEM_LIMIT', atMs: at, evidence: 'the engine reported an OOM kill' });
  }
  if (sample.deadlinePassed === true) seen.push({ limit: 'E_TIMEOUT', atMs: at, evidence: 'the wall-time deadline passed' });
  return seen.sort((a, b) => rank(a.limit) - rank(b.limit));
}

/** The first limit hit: earliest first seen; in a tie, the first in `LIMIT_PRECEDENCE`. */
export function firstLimit(observations: readonly LimitObservation[]): LimitObservation | null {
  let first: LimitObservation | null = null;
  for (const o of observations) {
    if (first === null || o.atMs < first.atMs || (o.atMs === first.atMs && rank(o.limit) < rank(first.limit))) first = o;
  }
  return first;
}

/** `firstLimit`'s code, or null when no cap was hit. */
export function decideLimit(observations: readonly LimitObservation[]): LimitCode | null {
  return firstLimit(observations)?.limit ?? null;
}

/**
 * Folds the samples of one step: keeps the first sighting of each limit, and says which limit
 * decides the step so far. A driver stops the step as soon as `first` is not null.
 */
export class LimitWatch {
  private readonly sightings = new Map<LimitCode, LimitObservation>();

  /** `baseline`: the step's first look, what every later one is compared with. */
  constructor(readonly baseline: LimitSample) {}

  /** Records `sample`; returns the limits it showed for the first time. */
  observe(sample: LimitSample): LimitObservation[] {
    const fresh: LimitObservation[] = [];
    for (const o of observeLimits(this.baseline, sample)) {
      if (this.sightings.has(o.limit)) continue;
      this.sightings.set(o.limit, o);
      fresh.push(o);
    }
    return fresh;
  }

  get observations(): LimitObservation[] {
    return [...this.sightings.values()];
  }

  get first(): LimitObservation | null {
    return firstLimit(this.observations);
  }

  get decision(): LimitCode | null {
    return this.first?.limit ?? null;
  }
}
