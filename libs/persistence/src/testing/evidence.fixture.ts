import { GENESIS_HASH } from '@cairn/contracts';
import { canonicalJson, sealReceipt } from '@cairn/evidence';

/*
 * Test and benchmark fixtures: receipt fields that satisfy the contracts and walk the run
 * lifecycle, and a sealer that builds chains without a broker. Not for production code.
 */

export interface FixtureEvent {
  type: string;
  actor: string;
  fields: Record<string, unknown>;
}

const SHA = (c: string) => c.repeat(64);
const PROCESS_RESULT = {
  signal: null,
  stdout_sha256: SHA('d'),
  stderr_sha256: SHA('e'),
  stdout_bytes: 10,
  stderr_bytes: 0,
  output_truncated: false,
  duration_ms: 1200,
  limits_hit: [],
  redactions: [],
};

/** A run from submission to seal: allowed, scheduled, `steps` steps, verified, graded, sealed. */
export function runLifecycleEvents(runId: string, steps = 2, score = 3): FixtureEvent[] {
  const argv = ['npm', 'test'];
  const events: FixtureEvent[] = [
    {
      type: 'run.submitted',
      actor: 'intake',
      fields: {
        spec: { name: `fixture ${runId}`, steps: Array.from({ length: steps }, () => ({ argv })) },
        spec_sha256: SHA('a'),
        submitted_by: 'key:k1',
        idempotency_key_sha256: SHA('b'),
      },
    },
    { type: 'policy.decided', actor: 'policy', fields: { decision: 'allow', policy_version: SHA('c'), reasons: [] } },
    { type: 'run.scheduled', actor: 'scheduler', fields: { worker_id: 'w1', lease_id: 'l1', lease_expires_at: '2026-01-01T00:10:00.000Z', attempt: 1 } },
    {
      type: 'sandbox.created',
      actor: 'runtime',
      fields: {
        container_name: `cairn-${runId}`,
        worker_id: 'w1',
        driver: 'docker',
        image: 'cairn/sandbox:1',
        image_digest: null,
        caps: { wall_seconds: 600, memory_mib: 1024, pids: 128, disk_mib: 1024, cpus: 1 },
        network: 'none',
      },
    },
  ];
  for (let i = 0; i < steps; i++) {
    const step = { step_index: i, stage: 'step', tool: 'npm', argv };
    events.push({ type: 'step.started', actor: 'runtime', fields: { ...step, workdir: '/work', env_names: [] } });
    events.push({
      type: 'step.completed',
      actor: 'runtime',
      fields: { ...step, ...PROCESS_RESULT, exit_code: i % 3, artifact_hashes: { '/out/report.txt': SHA('7') } },
    });
  }
  events.push(
    { type: 'sandbox.destroyed', actor: 'runtime', fields: { container_name: `cairn-${runId}`, verified_gone: true, reason: 'completed' } },
    {
      type: 'run.executed',
      actor: 'runtime',
      fields: { steps_completed: steps, exit_codes: Array.from({ length: steps }, (_, i) => i % 3), artifact_hashes: {}, duration_ms: 1500 },
    },
    { type: 'kernel.facts', actor: 'kernel', fields: { facts: { exit_codes: [0] }, operations: ['exit_codes'] } },
    {
      type: 'verification.completed',
      actor: 'verifier',
      fields: { verdict: 'SUPPORTS', chain_ok: true, head_hash: SHA('f'), receipts_checked: 9, invariants: [{ id: 'chain', ok: true }], checks: [] },
    },
    { type: 'grade.recorded', actor: 'grader', fields: { score, max_score: 5, upper_bound: score, criteria: [] } },
    { type: 'run.sealed', actor: 'kernel', fields: { final_state: 'SEALED', evidence_digest: SHA('9') } },
  );
  return events;
}

/** What `retriedRunLifecycleEvents` puts in the lost attempt. */
export interface LostAttemptOptions {
  /** The worker that was lost; the second attempt runs on `w1`. */
  readonly lostWorker?: string;
  /** Steps the lost attempt completed before its worker was lost (it then started the next one). */
  readonly stepsDone?: number;
  /** Whether the lost sandbox's teardown was recorded (a `sandbox.destroyed` `reaped`) before the `run.retried`. */
  readonly teardownRecorded?: boolean;
}

/**
 * A run of two attempts on its one chain (ADR 0035): attempt 1 on `lostWorker` completed
 * `stepsDone` steps, started the next and was lost (`run.retried`, caused by its own
 * `run.scheduled`, seq 3); attempt 2 on `w1` runs every step to the seal, like
 * `runLifecycleEvents`. Both attempts' sandboxes are `cairn-<runId>-a<attempt>`; the lost attempt's
 * outputs have hashes of their own (stdout `5…`, stderr `6…`, `/out/report.txt` `8…`).
 */
export function retriedRunLifecycleEvents(runId: string, steps = 2, score = 3, options: LostAttemptOptions = {}): FixtureEvent[] {
  const lostWorker = options.lostWorker ?? 'w0';
  const stepsDone = options.stepsDone ?? 1;
  const events = runLifecycleEvents(runId, steps, score);
  const shared = events.slice(0, 2);
  const argv = ['npm', 'test'];
  const lostName = `cairn-${runId}-a1`;
  const lost: FixtureEvent[] = [
    { type: 'run.scheduled', actor: 'scheduler', fields: { worker_id: lostWorker, lease_id: 'l1', lease_expires_at: '2026-01-01T00:10:00.000Z', attempt: 1 } },
    { type: 'sandbox.created', actor: 'runtime', fields: { ...events[3]!.fields, container_name: lostName, worker_id: lostWorker } },
  ];
  for (let i = 0; i <= stepsDone && i < steps; i++) {
    const step = { step_index: i, stage: 'step', tool: 'npm', argv };
    lost.push({ type: 'step.started', actor: 'runtime', fields: { ...step, workdir: '/work', env_names: [] } });
    // Its own outputs (stdout 5…, stderr 6…, a report 8…), told apart from the second attempt's.
    const outputs = { stdout_sha256: SHA('5'), stderr_sha256: SHA('6'), artifact_hashes: { '/out/report.txt': SHA('8') } };
    if (i < stepsDone) lost.push({ type: 'step.completed', actor: 'runtime', fields: { ...step, ...PROCESS_RESULT, ...outputs, exit_code: 0 } });
  }
  if (options.teardownRecorded === true) {
    lost.push({ type: 'sandbox.destroyed', actor: 'runtime', fields: { container_name: lostName, verified_gone: true, reason: 'reaped' } });
  }
  lost.push({
    type: 'run.retried',
    actor: 'scheduler',
    fields: {
      causation: `${runId}:3`,
      attempt: 1,
      error_code: 'E_WORKER_LOST',
      worker_id: lostWorker,
      lease_id: 'l1',
      message: `worker ${lostWorker} lost: lease l1 expired`,
      retries_left: 0,
    },
  });
  const name = `cairn-${runId}-a2`;
  const current = events.slice(2).map((event): FixtureEvent => {
    if (event.type === 'run.scheduled') return { ...event, fields: { ...event.fields, lease_id: 'l2', attempt: 2 } };
    if (event.type === 'sandbox.created' || event.type === 'sandbox.destroyed') return { ...event, fields: { ...event.fields, container_name: name } };
    return event;
  });
  return [...shared, ...lost, ...current];
}

/** An interactive sandbox session: requested, created, `execs` commands, a file, destroyed. */
export function sandboxSessionEvents(sandboxId: string, execs = 2): FixtureEvent[] {
  const events: FixtureEvent[] = [
    {
      type: 'sandbox.requested',
      actor: 'intake',
      fields: { spec: { ttlSeconds: 600 }, spec_sha256: SHA('a'), requested_by: 'key:agent1', expires_at: '2026-01-01T00:10:00.000Z' },
    },
    {
      type: 'sandbox.created',
      actor: 'runtime',
      fields: {
        container_name: `cairn-${sandboxId}`,
        worker_id: 'w1',
        driver: 'docker',
        image: 'cairn/sandbox:1',
        image_digest: null,
        caps: { wall_seconds: 600, memory_mib: 512, pids: 64, disk_mib: 256, cpus: 1 },
        network: 'none',
      },
    },
  ];
  for (let i = 0; i < execs; i++) {
    const argv = ['sh', '-c', `echo ${i}`];
    events.push({ type: 'sandbox.exec.started', actor: 'runtime', fields: { exec_id: `x${i}`, argv, workdir: '/work', env_names: [] } });
    events.push({ type: 'sandbox.exec.completed', actor: 'runtime', fields: { exec_id: `x${i}`, argv, ...PROCESS_RESULT, exit_code: 0 } });
  }
  events.push(
    { type: 'sandbox.file.written', actor: 'runtime', fields: { path: '/work/a.txt', sha256: SHA('1'), bytes: 12 } },
    { type: 'sandbox.destroyed', actor: 'runtime', fields: { container_name: `cairn-${sandboxId}`, verified_gone: true, reason: 'deleted' } },
  );
  return events;
}

/** Builds one chain's receipts in memory, exactly as the evidence log seals them. */
export class FixtureChain {
  private seq = 0;
  private head = GENESIS_HASH;

  constructor(
    readonly chainId: string,
    readonly tenant = 'acme',
    private readonly clockStart = Date.UTC(2026, 0, 1),
  ) {}

  get lastSeq(): number {
    return this.seq;
  }

  /** The next receipt of the chain, sealed onto the current head. */
  next(event: FixtureEvent): Record<string, unknown> & { seq: number; hash: string } {
    this.seq += 1;
    const body = {
      v: 1,
      seq: this.seq,
      run_id: this.chainId,
      tenant: this.tenant,
      type: event.type,
      actor: event.actor,
      ts: new Date(this.clockStart + this.seq * 1000).toISOString(),
      causation: this.seq === 1 ? null : `${this.chainId}:${this.seq - 1}`,
      ...event.fields,
    };
    const receipt = sealReceipt(this.head, body);
    this.head = receipt.hash;
    return receipt;
  }
}

const encoder = new TextEncoder();

/** A receipt as the stream stores it: canonical JSON, UTF-8. */
export function encodeReceipt(receipt: unknown): Uint8Array {
  return encoder.encode(canonicalJson(receipt));
}

/**
 * `<chain subject>.<type>`: where the evidence log stores `data` (docs/adr/0012), the type read from
 * it — `not.typed` when it names none a subject can hold (a poison message in a test).
 */
export function typedSubject(chainSubject: string, data: Uint8Array | string): string {
  let type: unknown;
  try {
    type = (JSON.parse(typeof data === 'string' ? data : new TextDecoder().decode(data)) as { type?: unknown }).type;
  } catch {
    type = undefined;
  }
  return `${chainSubject}.${typeof type === 'string' && /^[a-z0-9_]+(\.[a-z0-9_]+)*$/.test(type) ? type : 'not.typed'}`;
}
