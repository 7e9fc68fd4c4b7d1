import { CairnError } from '@cairn/contracts';
import type { RunState } from '@cairn/contracts';
import type { RunUsageRecord } from '@cairn/policy';

/** A `sandboxes` projection row as the usage query reads it (times as RFC 3339 text). */
export interface SandboxUsageRow {
  sandbox_id: string;
  state: string;
  cpus: number | null;
  /** Granted memory plus tmpfs; null before policy granted caps. */
  memory_mib: number | null;
  ready_at: string | null;
  updated_at: string;
}

/**
 * What a sandbox session weighs in its tenant's quotas, as the run it is treated like: a session
 * holds a worker slot and its CPUs from `sandbox.created` until it is destroyed, as a running run
 * does. PENDING (asked for, decided, placed) counts in flight like a run not yet started — the
 * fail-closed side of the race; READY is a run running; an ended one only adds its CPU-seconds.
 * A state the sandbox lifecycle does not know is refused (fail closed), not guessed.
 */
export function sandboxUsageRecord(row: SandboxUsageRow): RunUsageRecord {
  return {
    runId: row.sandbox_id,
    kind: 'sandbox',
    job: null,
    state: runStateOf(row.sandbox_id, row.state),
    cpus: row.cpus,
    memoryMiB: row.memory_mib,
    startedAt: row.ready_at,
    // Its last receipt (the teardown, or the seal just after it) ends an ended one's interval.
    endedAt: null,
    updatedAt: row.updated_at,
  };
}

const AS_RUN_STATE: Readonly<Record<string, RunState>> = {
  PENDING: 'SCHEDULED',
  READY: 'RUNNING',
  DESTROYED: 'SEALED',
  FAILED: 'FAILED',
  REJECTED: 'REJECTED',
};

function runStateOf(sandboxId: string, state: string): RunState {
  const mapped = AS_RUN_STATE[state];
  if (mapped === undefined) throw new CairnError('E_UNKNOWN_STATE', `sandbox ${sandboxId} is in a state the lifecycle does not know: ${JSON.stringify(state)}`, { sandboxId });
  return mapped;
}
