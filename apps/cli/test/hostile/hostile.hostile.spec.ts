import { createHash } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { verifyChain } from '@cairn/evidence';
import { uniqueName } from '@cairn/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestStack } from '../stack.harness.js';
import { startEgressSink } from './egress-sink.js';
import type { EgressSink } from './egress-sink.js';
import { BUSYBOX, HOSTILE_POLICY, HOSTILE_WORKLOADS, OUTPUT_KEEP_BYTES, stepReceipt } from './hostile-workloads.js';
import type { HostileWorkload, RefusedExpectation, RunExpectation, WorkloadContext } from './hostile-workloads.js';

/*
 * The hostile-workload suite (`npm run test:hostile`): every row of hostile-workloads.ts is
 * submitted through the REST gateway of one isolated stack (`cairn up`, with HOSTILE_POLICY), as
 * users would, as many at a time as the stack's worker runs at once. Each test then checks its row: the run's final state and error code,
 * the receipt of the attacking step (its exit code, and its stderr read back by the hash the
 * receipt names), the safe outcome, that no container, network or volume of the run is left, and
 * that the run's chain verifies from genesis.
 */

interface Submission {
  name: string;
  status: number;
  body: { runId?: string; code?: string; message?: string };
  hostBefore: Record<string, string>;
}


let stack: TestStack;
let sink: EgressSink;
let policyDir = '';
const submissions = new Map<string, Promise<Submission>>();
/**
 * Runs in flight at once: what the stack's one worker runs together (4 slots; 2 CPUs at 0.5 each).
 * More would only wait in the scheduler's retry backoff, which grows to 30 s a try.
 */
const RUNS_IN_FLIGHT = 4;
const SEAL_WAIT_MS = 90_000;

async function submit(workload: HostileWorkload): Promise<Submission> {
  const hostBefore: Record<string, string> = {};
  for (const [fact, read] of Object.entries(workload.hostFacts ?? {})) hostBefore[fact] = await read();
  const name = `hostile ${workload.id}`;
  const response = await stack.api('/v1/runs', {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': uniqueName(`hostile-${workload.id}`) },
    body: JSON.stringify({ name, ...workload.spec }).replaceAll('{{SINK_IP}}', sink.ip),
  });
  return { name, status: response.status, body: (await response.json()) as Submission['body'], hostBefore };
}

async function receiptsOf(runId: string): Promise<Record<string, unknown>[]> {
  const response = await stack.api(`/v1/runs/${runId}/events?after=0&limit=1000`);
  expect(response.status).toBe(200);
  return ((await response.json()) as { items: Record<string, unknown>[] }).items;
}

/** An artifact's bytes from the stack's store, checked against the hash it is stored under. */
async function artifact(sha256: string): Promise<Buffer> {
  expect(sha256).toMatch(/^[0-9a-f]{64}$/);
  const bytes = await stack.storedArtifact(sha256);
  if (bytes === null) throw new Error(`no artifact ${sha256} in the stack's store`);
  expect(createHash('sha256').update(bytes).digest('hex')).toBe(sha256);
  return bytes;
}


/** The proof bundle the gateway serves verifies offline, from genesis, up to the run's head. */
async function expectChainVerifies(runId: string, headHash: string, count: number): Promise<void> {
  const response = await stack.api(`/v1/runs/${runId}/bundle`);
  expect(response.status).toBe(200);
  const bundle = (await response.json()) as { format: string; runId: string; receipts: unknown[]; headHash: string };
  expect(bundle).toMatchObject({ format: 'cairn.bundle/v1', runId, headHash });
  expect(verifyChain(bundle.receipts, { requireNonEmpty: true, chainId: runId })).toMatchObject({ ok: true, count, headHash });
}

async function checkRun(workload: HostileWorkload, expected: RunExpectation): Promise<void> {
  const submission = await submissions.get(workload.id)!;
  expect(submission.status, JSON.stringify(submission.body)).toBe(202);
  const runId = submission.body.runId!;
  const run = await stack.waitForRun(runId, (r) => r.sealed, SEAL_WAIT_MS);
  const receipts = await receiptsOf(runId);
  const why = JSON.stringify(receipts.find((r) => r.type === 'run.failed') ?? null);
  expect({ state: run.state, errorCode: run.errorCode }, why).toEqual({ state: expected.state, errorCode: expected.errorCode });

  const types = receipts.map((r) => r.type);
  expect(types.at(-1)).toBe('run.sealed');
  // The sandbox went, verified gone, whatever the workload did to it.
  expect(receipts.filter((r) => r.type === 'sandbox.destroyed').map((r) => r.verified_gone)).toEqual([true]);
  expect(types.includes('run.executed')).toBe(expected.state === 'SEALED');
  if (expected.stepsCompleted !== undefined) expect(types.filter((t) => t === 'step.completed')).toHaveLength(expected.stepsCompleted);

  const step = expected.step;
  if (step !== undefined) {
    const receipt = stepReceipt(receipts, step.index);
    if (step.exitCode !== undefined) expect(receipt.exit_code).toBe(step.exitCode);
    expect(receipt.error_code).toBe(step.errorCode);
    for (const limit of step.limits ?? []) expect(receipt.limits_hit).toContain(limit);
    if (step.truncated !== undefined) expect(receipt.output_truncated).toBe(step.truncated);
    if (step.stderr !== undefined) expect((await artifact(receipt.stderr_sha256 as string)).toString('utf8')).toMatch(step.stderr);
    if (step.stdout !== undefined) expect((await artifact(receipt.stdout_sha256 as string)).toString('utf8')).toMatch(step.stdout);
    if (expected.state === 'ROLLBACK') {
      const failed = receipts.find((r) => r.type === 'run.failed');
      expect(failed).toMatchObject({ error_code: expected.errorCode, step_index: step.index });
    }
  }

  expect(await stack.leftovers({ chainId: runId })).toEqual({ containers: [], networks: [], volumes: [] });
  await expectChainVerifies(runId, run.headHash, receipts.length);
  const context: WorkloadContext = { runId, receipts, artifact, apiKey: stack.apiKey, hostBefore: submission.hostBefore, sink };
  await expected.check?.(context);
}

async function checkRefused(workload: HostileWorkload, expected: RefusedExpectation): Promise<void> {
  const submission = await submissions.get(workload.id)!;
  expect(submission.status, JSON.stringify(submission.body)).toBe(expected.status);
  expect(submission.body.code).toBe(expected.code);
  expect(submission.body.message).toContain(`${expected.field}:`);
  expect(submission.body.runId).toBeUndefined();
  const response = await stack.api('/v1/runs?limit=200');
  const names = ((await response.json()) as { items: { name: string | null }[] }).items.map((r) => r.name);
  expect(names.length).toBeGreaterThan(0);
  expect(names).not.toContain(submission.name);
}

/** At most `size` tasks at once, started in the order asked. */
class Slots {
  private free: number;
  private readonly waiting: (() => void)[] = [];

  constructor(size: number) {
    this.free = size;
  }

  async hold<T>(task: () => Promise<T>): Promise<T> {
    if (this.free > 0) this.free -= 1;
    else await new Promise<void>((resolve) => this.waiting.push(resolve));
    try {
      return await task();
    } finally {
      const next = this.waiting.shift();
      if (next === undefined) this.free += 1;
      else next();
    }
  }
}

function outcomeOf(workload: HostileWorkload): string {
  const e = workload.expect;
  if (e.kind === 'refused') return `${e.status} ${e.code} (${e.field})`;
  return [e.state, e.errorCode].filter((part) => part !== null).join(' ');
}

beforeAll(async () => {
  policyDir = await mkdtemp(join(tmpdir(), 'cairn-hostile-policy-'));
  const policyFile = join(policyDir, 'policy.json');
  await writeFile(policyFile, JSON.stringify(HOSTILE_POLICY));
  stack = await TestStack.create('hostile', { CAIRN_STEP_OUTPUT_MAX_BYTES: String(OUTPUT_KEEP_BYTES), CAIRN_POLICY_FILE: policyFile });
  await stack.up();
  // A host the workloads may aim at (never a real address): reachable from here, counted.
  sink = await startEgressSink(`cairn-hostile-sink-${stack.stackId}`, BUSYBOX, { 'io.cairn.test': stack.stackId });
  await sink.touch();
  // Each run is submitted as a slot frees (the slot is held until it is sealed), in row order.
  const slots = new Slots(RUNS_IN_FLIGHT);
  for (const workload of HOSTILE_WORKLOADS) {
    const pending = slots.hold(async () => {
      const submission = await submit(workload);
      if (submission.status === 202 && submission.body.runId !== undefined) {
        await stack.waitForRun(submission.body.runId, (r) => r.sealed, SEAL_WAIT_MS).catch(() => undefined);
      }
      return submission;
    });
    // Each test awaits its own; meanwhile a failure must not go unhandled.
    pending.catch(() => undefined);
    submissions.set(workload.id, pending);
  }
});

afterAll(async () => {
  await sink?.remove();
  await stack?.dispose();
  if (policyDir !== '') await rm(policyDir, { recursive: true, force: true });
});

describe('hostile workloads, submitted through the REST gateway', () => {
  it('has at least 25 distinct workloads', () => {
    expect(new Set(HOSTILE_WORKLOADS.map((w) => w.id)).size).toBe(HOSTILE_WORKLOADS.length);
    expect(HOSTILE_WORKLOADS.length).toBeGreaterThanOrEqual(25);
  });

  for (const workload of HOSTILE_WORKLOADS) {
    const expected = workload.expect;
    it(`${workload.id}: ${workload.title} → ${outcomeOf(workload)}`, async () => {
      if (expected.kind === 'refused') await checkRefused(workload, expected);
      else await checkRun(workload, expected);
    });
  }

  it("leaves nothing of the stack's worker on the engine", async () => {
    expect(await stack.leftovers()).toEqual({ containers: [], networks: [], volumes: [] });
  });
});
