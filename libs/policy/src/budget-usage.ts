import type { RunState } from '@cairn/contracts';
import type { JobRunUsage } from './job-budget.js';

/**
 * One earlier run of a tenant, as policy's usage ledger holds it (times are receipt `ts`, RFC 3339).
 * "Earlier" means submitted before the run being decided, in stream order: the caller gathers the
 * records so that two runs decided at the same time never count each other both ways.
 */
export interface RunUsageRecord {
  runId: string;
  /** An interactive sandbox session (`sbx_…`) rather than a run; absent: a run. */
  kind?: 'run' | 'sandbox';
  /** The RunSpec's `job`, or null. */
  job: string | null;
  state: RunState;
  /** The CPUs policy granted; null when it granted none (denied, or not decided yet). */
  cpus: number | null;
  /** The memory a worker reserves for it (granted memory plus tmpfs), MiB; null when nothing was granted. */
  memoryMiB?: number | null;
  /** When its sandbox was created; null when none was. */
  startedAt: string | null;
  /** When its sandbox was recorded gone; null while it is open or when its teardown was never recorded. */
  endedAt: string | null;
  /** Its latest receipt. */
  updatedAt: string;
}

/** What a tenant has in flight and has used today, for its quotas. */
export interface TenantUsage {
  /** Runs admitted and not yet executed: undecided, held, scheduled or running. */
  concurrentRuns: number;
  /** Of those, interactive sandbox sessions (asked for and not ended). */
  concurrentSandboxes?: number;
  /** Memory reserved by all of them (granted memory plus tmpfs), MiB. */
  memoryMiB?: number;
  /** Granted CPUs × sandbox seconds in the last 24 hours. */
  cpuSecondsToday: number;
}

export interface BudgetUsage {
  /** The job's admitted runs (every state but REJECTED), with their sandbox seconds so far. */
  jobRuns: JobRunUsage[];
  tenant: TenantUsage;
}

const DAY_MS = 86_400_000;

/**
 * States that hold (or may soon hold) a place in the tenant's concurrency: a run not decided yet
 * counts, because policy may still admit it, and a held one counts, because a grant schedules it
 * without asking policy again. Counting them is the fail-closed side of the race.
 */
const CONCURRENT: ReadonlySet<RunState> = new Set<RunState>(['SUBMITTED', 'AWAITING_APPROVAL', 'SCHEDULED', 'RUNNING']);
/** States in which an open sandbox is still running up time. */
const SANDBOX_LIVE: ReadonlySet<RunState> = new Set<RunState>(['SCHEDULED', 'RUNNING', 'AWAITING_APPROVAL']);

/**
 * The sandbox interval of a run in ms since the epoch: from its creation to its teardown, or to
 * now while it runs, or to its last receipt when it ended without a recorded teardown (a lost
 * worker). Null when it never had a sandbox or a time does not parse.
 */
function sandboxInterval(record: RunUsageRecord, nowMs: number): [number, number] | null {
  if (record.startedAt === null) return null;
  const start = Date.parse(record.startedAt);
  const end = record.endedAt !== null ? Date.parse(record.endedAt) : SANDBOX_LIVE.has(record.state) ? nowMs : Date.parse(record.updatedAt);
  if (!Number.isFinite(start) || !Number.isFinite(end)) return null;
  return [start, Math.max(start, end)];
}

/**
 * What the earlier runs of a tenant add up to for a run of `job` decided at `nowMs`: the job's
 * runs and time (every admitted run counts, a cancelled one too; a REJECTED one never ran), the
 * runs in flight, and the CPU-seconds of the last 24 hours. Seconds round up: the budget is never
 * shown to fit by rounding.
 */
export function summariseUsage(records: readonly RunUsageRecord[], job: string | undefined, nowMs: number): BudgetUsage {
  const jobRuns: JobRunUsage[] = [];
  let concurrentRuns = 0;
  let concurrentSandboxes = 0;
  let memoryMiB = 0;
  let cpuMs = 0;
  const dayStart = nowMs - DAY_MS;
  for (const record of records) {
    const interval = sandboxInterval(record, nowMs);
    if (job !== undefined && record.job === job && record.state !== 'REJECTED') {
      // An unreadable time is reported as such (NaN), and checkJobBudget refuses it.
      const seconds = record.startedAt === null ? 0 : interval === null ? Number.NaN : Math.ceil((interval[1] - interval[0]) / 1000);
      jobRuns.push({ runId: record.runId, seconds });
    }
    if (CONCURRENT.has(record.state)) {
      concurrentRuns += 1;
      if (record.kind === 'sandbox') concurrentSandboxes += 1;
      memoryMiB += record.memoryMiB ?? 0;
    }
    if (interval !== null && record.cpus !== null) {
      const overlap = Math.min(interval[1], nowMs) - Math.max(interval[0], dayStart);
      if (overlap > 0) cpuMs += overlap * record.cpus;
    }
  }
  return { jobRuns, tenant: { concurrentRuns, concurrentSandboxes, memoryMiB, cpuSecondsToday: Math.ceil(cpuMs / 1000) } };
}
