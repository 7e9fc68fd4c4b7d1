// Test fixture: a realistic run as the upstream services leave it (intake, policy, scheduler,
// runtime), field for field per the contracts.
import { parseEvidenceReceipt } from '@cairn/contracts';
import type { EventType, EvidenceReceipt, GrantedCaps, RunSpec } from '@cairn/contracts';
import { canonicalJson, sealReceipt, sha256Hex } from '@cairn/evidence';

export const CAPS: GrantedCaps = { wall_seconds: 60, memory_mib: 256, pids: 64, disk_mib: 256, cpus: 1 };
export const IMAGE = `cairn/sandbox-busybox:1@sha256:${'b'.repeat(64)}`;

export const JUNIT_PASS = `<?xml version="1.0" encoding="UTF-8"?>
<testsuites>
  <testsuite name="math" tests="3" failures="0" errors="0" skipped="1">
    <testcase classname="math" name="adds"/>
    <testcase classname="math" name="subtracts"/>
    <testcase classname="math" name="divides"><skipped/></testcase>
  </testsuite>
</testsuites>
`;
export const JUNIT_FAIL = `<?xml version="1.0" encoding="UTF-8"?>
<testsuites>
  <testsuite name="math" tests="3" failures="1" errors="0" skipped="0">
    <testcase classname="math" name="adds"/>
    <testcase classname="math" name="subtracts"><failure message="expected 1, got 2">assertion failed</failure></testcase>
    <testcase classname="math" name="divides"/>
  </testsuite>
</testsuites>
`;
export const TAP_PASS = 'TAP version 13\n1..2\nok 1 - parses\nok 2 - prints\n';
export const TAP_FAIL = 'TAP version 13\n1..2\nok 1 - parses\nnot ok 2 - prints\n';

/** The rubric is worth 7; the claim is that the suite passes. */
export function unitTestSpec(extra: { checks?: RunSpec['checks']; claim?: NonNullable<RunSpec['claim']>['checks'] } = {}): RunSpec {
  return {
    name: 'unit tests',
    image: 'cairn/sandbox-busybox:1',
    steps: [
      { name: 'build', argv: ['make'] },
      { name: 'test', argv: ['make', 'test'] },
    ],
    outputs: ['/out'],
    checks: [
      { id: 'junit-clean', source: 'facts.junit.failed', op: 'eq', value: 0, weight: 3 },
      { id: 'tap-ok', source: 'facts.tap.ok', op: 'eq', value: true, weight: 2 },
      { id: 'test-exit', source: 'steps[1].exit_code', op: 'eq', value: 0, weight: 1 },
      { id: 'says-passed', source: 'steps[1].stdout', op: 'contains', value: 'all tests passed', weight: 1 },
      ...(extra.checks ?? []),
    ],
    claim: {
      statement: 'the test suite passes',
      checks: [
        { id: 'junit-clean', source: 'facts.junit.failed', op: 'eq', value: 0 },
        { id: 'tap-clean', source: 'artifacts["/out/results.tap"].tap.failed', op: 'eq', value: 0 },
        { id: 'build-ok', source: 'steps[0].exit_code', op: 'eq', value: 0 },
        ...(extra.claim ?? []),
      ],
    },
  };
}

export interface StepScenario {
  stdout: string;
  stderr?: string;
  exit_code: number | null;
  /** A cap that stopped the step (the run then fails with it). */
  error_code?: 'E_TIMEOUT';
}

export interface RunScenario {
  spec: RunSpec;
  steps: StepScenario[];
  /** Collected output files (under /out), as the runtime stores them. */
  files: Record<string, string>;
}

export function passingRun(spec: RunSpec = unitTestSpec()): RunScenario {
  return {
    spec,
    steps: [
      { stdout: 'built 3 targets\n', exit_code: 0 },
      { stdout: 'ran 3 tests: all tests passed\n', exit_code: 0 },
    ],
    files: { '/out/junit.xml': JUNIT_PASS, '/out/results.tap': TAP_PASS },
  };
}

/** A test failed: the step exits 1 and the JUnit report has a failure; the TAP stream still passes. */
export function failingRun(): RunScenario {
  return {
    spec: unitTestSpec(),
    steps: [
      { stdout: 'built 3 targets\n', exit_code: 0 },
      { stdout: 'ran 3 tests: 1 test failed\n', stderr: 'FAIL math subtracts\n', exit_code: 1 },
    ],
    files: { '/out/junit.xml': JUNIT_FAIL, '/out/results.tap': TAP_PASS },
  };
}

/** A check (worth 2) and a claim check on a coverage report the run never wrote. */
export function missingSourceRun(): RunScenario {
  const coverage = 'artifacts["/out/coverage.json"].json.total';
  return passingRun(
    unitTestSpec({
      checks: [{ id: 'coverage', source: coverage, op: 'gte', value: 80, weight: 2 }],
      claim: [{ id: 'coverage', source: coverage, op: 'gte', value: 80 }],
    }),
  );
}

/** The test step passes its time cap: the runtime kills it, tears down and fails the run E_TIMEOUT. */
export function timedOutRun(): RunScenario {
  return {
    spec: unitTestSpec(),
    steps: [
      { stdout: 'built 3 targets\n', exit_code: 0 },
      { stdout: 'ran 1 test\n', exit_code: null, error_code: 'E_TIMEOUT' },
    ],
    files: {},
  };
}

/** One event as a service appends it. */
export interface PlannedEvent {
  type: EventType;
  actor: string;
  causation: string | null;
  key?: string;
  fields: Record<string, unknown>;
}

export interface PlannedRun {
  events: PlannedEvent[];
  /** Every byte string a receipt names by sha256: put them in the artifact store. */
  blobs: Map<string, Uint8Array>;
  /** Output path (or `steps[i].stdout`) → sha256. */
  hashes: Record<string, string>;
}

const encoder = new TextEncoder();

/**
 * The receipts from `run.submitted` to `run.executed` (or, when a step hits a cap, to `run.failed`)
 * in the runtime's order: sandbox, each step's pair, teardown, then the run's ending.
 */
export function plannedRun(runId: string, scenario: RunScenario): PlannedRun {
  const blobs = new Map<string, Uint8Array>();
  const hashes: Record<string, string> = {};
  const blob = (text: string): string => {
    const bytes = encoder.encode(text);
    const sha = sha256Hex(bytes);
    blobs.set(sha, bytes);
    return sha;
  };
  const at = (seq: number) => `${runId}:${seq}`;
  const container = `cairn-${runId}`;
  const events: PlannedEvent[] = [
    {
      type: 'run.submitted',
      actor: 'intake',
      causation: null,
      fields: { spec: scenario.spec, spec_sha256: sha256Hex(canonicalJson(scenario.spec)), submitted_by: 'key:k1', idempotency_key_sha256: sha256Hex(runId) },
    },
    { type: 'policy.decided', actor: 'policy', causation: at(1), fields: { decision: 'allow', policy_version: 'c'.repeat(64), reasons: [], caps: CAPS, image: IMAGE } },
    {
      type: 'run.scheduled',
      actor: 'scheduler',
      causation: at(2),
      fields: { worker_id: 'w-test', lease_id: `lease_${runId}_1`.slice(0, 64), lease_expires_at: '2026-11-30T03:00:00.000Z', attempt: 1 },
    },
    {
      type: 'sandbox.created',
      actor: 'runtime',
      causation: at(3),
      fields: { container_name: container, worker_id: 'w-test', driver: 'docker', image: 'cairn/sandbox-busybox:1', image_digest: `sha256:${'b'.repeat(64)}`, caps: CAPS, network: 'none' },
    },
  ];
  let failed: { code: 'E_TIMEOUT'; step: number } | null = null;
  for (const [index, step] of scenario.steps.entries()) {
    const argv = scenario.spec.steps[index]?.argv ?? ['true'];
    const common = { step_index: index, stage: 'step', tool: argv[0] ?? 'true', argv };
    const stdoutSha = blob(step.stdout);
    const stderrSha = blob(step.stderr ?? '');
    hashes[`steps[${index}].stdout`] = stdoutSha;
    hashes[`steps[${index}].stderr`] = stderrSha;
    events.push({ type: 'step.started', actor: 'runtime', causation: at(3), key: `step-${index}`, fields: { ...common, workdir: '/work', env_names: [] } });
    events.push({
      type: 'step.completed',
      actor: 'runtime',
      causation: at(3),
      key: `step-${index}`,
      fields: {
        ...common,
        exit_code: step.exit_code,
        signal: step.exit_code === null ? 'SIGKILL' : null,
        stdout_sha256: stdoutSha,
        stderr_sha256: stderrSha,
        stdout_bytes: encoder.encode(step.stdout).byteLength,
        stderr_bytes: encoder.encode(step.stderr ?? '').byteLength,
        output_truncated: false,
        duration_ms: 40 + index,
        limits_hit: step.error_code === 'E_TIMEOUT' ? ['wall_time'] : [],
        redactions: [],
        artifact_hashes: {},
        ...(step.error_code === undefined ? {} : { error_code: step.error_code }),
      },
    });
    if (step.error_code !== undefined) {
      failed = { code: step.error_code, step: index };
      break;
    }
  }
  events.push({
    type: 'sandbox.destroyed',
    actor: 'runtime',
    causation: at(3),
    key: 'teardown',
    fields: { container_name: container, verified_gone: true, reason: failed === null ? 'completed' : 'failed', duration_ms: 300 },
  });
  if (failed !== null) {
    const fields = { error_code: failed.code, message: `step ${failed.step} hit a cap (wall_time); the sandbox was destroyed`, step_index: failed.step };
    events.push({ type: 'run.failed', actor: 'runtime', causation: at(3), key: 'failed', fields });
    return { events, blobs, hashes };
  }
  const artifactHashes: Record<string, string> = {};
  for (const [path, content] of Object.entries(scenario.files)) artifactHashes[path] = hashes[path] = blob(content);
  events.push({
    type: 'run.executed',
    actor: 'runtime',
    causation: at(3),
    fields: { steps_completed: scenario.steps.length, exit_codes: scenario.steps.map((s) => s.exit_code), artifact_hashes: artifactHashes, duration_ms: 900 },
  });
  return { events, blobs, hashes };
}

/** Seals events into a chain in memory (no NATS), each checked against its contract. */
export class LocalChain {
  readonly receipts: EvidenceReceipt[] = [];
  private head = '0'.repeat(64);

  constructor(
    readonly runId: string,
    readonly tenant = 'acme',
  ) {}

  add(event: PlannedEvent): EvidenceReceipt {
    const seq = this.receipts.length + 1;
    const ts = new Date(Date.UTC(2026, 10, 30, 2, 0, seq)).toISOString();
    const body = { v: 1, seq, run_id: this.runId, tenant: this.tenant, type: event.type, actor: event.actor, ts, causation: event.causation, ...event.fields };
    const sealed = sealReceipt(this.head, body);
    const parsed = parseEvidenceReceipt(sealed);
    if (!parsed.ok) throw new Error(`${event.type}: ${parsed.message}`);
    this.head = parsed.receipt.hash;
    this.receipts.push(parsed.receipt);
    return parsed.receipt;
  }

  addAll(events: readonly PlannedEvent[]): this {
    for (const event of events) this.add(event);
    return this;
  }
}

/** What `withLostAttempt` records of the attempt that was lost. */
export interface LostAttemptScenario {
  /** The worker that was lost. */
  worker?: string;
  /** What its step 0 wrote before the loss (it completed; its bytes go in `blobs` too). */
  stdout?: string;
  /** Its sandbox's teardown was recorded (`sandbox.destroyed` `reaped`) before the `run.retried`; otherwise it is owed to the reaper. */
  teardownRecorded?: boolean;
}

/**
 * `planned` as the second attempt of a run whose first was lost (ADR 0035): after the submission
 * and the decision, attempt 1 on `worker` creates its sandbox (`cairn-<run>-a1`), completes step 0
 * and starts step 1, then `run.retried` (caused by its own `run.scheduled`, seq 3); then `planned`
 * from its placement on, as attempt 2, each causation moved to the receipts it now follows.
 */
export function withLostAttempt(runId: string, planned: PlannedRun, lost: LostAttemptScenario = {}): PlannedRun {
  const worker = lost.worker ?? 'w-lost';
  const at = (seq: number) => `${runId}:${seq}`;
  const container = `cairn-${runId}-a1`;
  const blobs = new Map(planned.blobs);
  const stdout = encoder.encode(lost.stdout ?? 'attempt 1: step 0 ran on the lost worker\n');
  const stdoutSha = sha256Hex(stdout);
  blobs.set(stdoutSha, stdout);
  const stderrSha = sha256Hex('');
  blobs.set(stderrSha, new Uint8Array(0));
  const [submitted, decided, placed, created, ...rest] = planned.events;
  if (submitted === undefined || decided === undefined || placed === undefined || created === undefined) throw new Error('a planned run starts with four receipts');
  const step0 = rest.find((e) => e.type === 'step.started' && e.fields['step_index'] === 0);
  const step1 = rest.find((e) => e.type === 'step.started' && e.fields['step_index'] === 1);
  const lostEvents: PlannedEvent[] = [
    { ...placed, fields: { ...placed.fields, worker_id: worker, lease_id: `lease_${runId}_1`.slice(0, 64), attempt: 1 } },
    { ...created, fields: { ...created.fields, container_name: container, worker_id: worker } },
  ];
  if (step0 !== undefined) {
    const argv = step0.fields['argv'] as string[];
    lostEvents.push({ ...step0, key: 'a1-step-0' });
    lostEvents.push({
      type: 'step.completed',
      actor: 'runtime',
      causation: at(3),
      key: 'a1-step-0',
      fields: {
        step_index: 0,
        stage: 'step',
        tool: argv[0] ?? 'true',
        argv,
        exit_code: 0,
        signal: null,
        stdout_sha256: stdoutSha,
        stderr_sha256: stderrSha,
        stdout_bytes: stdout.byteLength,
        stderr_bytes: 0,
        output_truncated: false,
        duration_ms: 10,
        limits_hit: [],
        redactions: [],
        artifact_hashes: {},
      },
    });
  }
  if (step1 !== undefined) lostEvents.push({ ...step1, key: 'a1-step-1' });
  if (lost.teardownRecorded === true) {
    lostEvents.push({ type: 'sandbox.destroyed', actor: 'runtime', causation: at(3), key: 'a1-reaped', fields: { container_name: container, verified_gone: true, reason: 'reaped' } });
  }
  const retriedSeq = 3 + lostEvents.length;
  lostEvents.push({
    type: 'run.retried',
    actor: 'scheduler',
    causation: at(3),
    key: 'retried-1',
    fields: { attempt: 1, error_code: 'E_WORKER_LOST', worker_id: worker, lease_id: `lease_${runId}_1`.slice(0, 64), message: `worker ${worker} lost: its lease expired`, retries_left: 0 },
  });
  const shift = lostEvents.length;
  const moved = (causation: string | null): string | null => {
    if (causation === null || !causation.startsWith(`${runId}:`)) return causation;
    const seq = Number(causation.slice(runId.length + 1));
    return seq >= 3 ? at(seq + shift) : causation;
  };
  const current: PlannedEvent[] = [
    { ...placed, causation: at(retriedSeq), fields: { ...placed.fields, lease_id: `lease_${runId}_2`.slice(0, 64), attempt: 2 } },
    ...[created, ...rest].map((e) => ({ ...e, causation: moved(e.causation) })),
  ];
  return { events: [submitted, decided, ...lostEvents, ...current], blobs, hashes: { ...planned.hashes, 'attempts[1].steps[0].stdout': stdoutSha } };
}
