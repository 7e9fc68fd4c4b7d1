import type { EvidenceReceipt, RunSpec } from '@cairn/contracts';
import { canonicalJson, sha256Hex, verifyChain } from '@cairn/evidence';
import { foldRun } from '@cairn/lifecycle';
import { BUSYBOX_IMAGE_TAG } from '@cairn/sandbox-docker';
import { leaseId, reservationFor } from '@cairn/scheduling';
import { uniqueName } from '@cairn/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_CAPS, ofType, RuntimeWorld } from './runtime.harness.js';

/*
 * Steps held for approval and budgets enforced mid-run, by the runtime in-process on the real NATS
 * and Docker engine. Policy's decision carries `step_approvals` and `budget` as the policy service
 * would write them; intake's grant and cancel are appended here as intake would.
 */

let world: RuntimeWorld;
let patient: string;
let hasty: string;

/** A submitted, allowed and placed run whose decision carries `decided` besides caps and image. */
async function placed(spec: RunSpec, workerId: string, decided: Record<string, unknown>): Promise<string> {
  const runId = `run_${uniqueName('rtapr').toLowerCase()}`;
  await world.log.append(runId, {
    type: 'run.submitted',
    actor: 'intake',
    tenant: 'acme',
    causation: null,
    fields: { spec, spec_sha256: sha256Hex(canonicalJson(spec)), submitted_by: 'key:test', idempotency_key_sha256: sha256Hex(runId) },
  });
  const policy = await world.log.append(runId, {
    type: 'policy.decided',
    actor: 'policy',
    tenant: 'acme',
    causation: `${runId}:1`,
    fields: { decision: 'allow', policy_version: 'e'.repeat(64), reasons: [], caps: DEFAULT_CAPS, image: `${BUSYBOX_IMAGE_TAG}@${world.busyboxId}`, ...decided },
  });
  const now = Date.now();
  const { isolation: _isolation, ...reservation } = reservationFor(runId, DEFAULT_CAPS);
  const lease = {
    lease_id: leaseId(runId, 1),
    run_id: runId,
    worker_id: workerId,
    attempt: 1,
    granted_at: new Date(now).toISOString(),
    expires_at: new Date(now + 10_000).toISOString(),
    reservation,
  };
  await world.leases.put(lease);
  await world.log.append(runId, {
    type: 'run.scheduled',
    actor: 'scheduler',
    tenant: 'acme',
    causation: `${runId}:${policy.receipt.seq}`,
    fields: { worker_id: workerId, lease_id: lease.lease_id, lease_expires_at: lease.expires_at, attempt: 1 },
  });
  return runId;
}

/** As intake appends a person's decision or a cancel: caused by what it answers, guarded by nothing here. */
async function appendAsIntake(runId: string, type: string, fields: Record<string, unknown>, causation: string | null, key: string): Promise<void> {
  await world.log.append(runId, { type, actor: 'intake', tenant: 'acme', causation, key, fields });
}

const APPLY: RunSpec = {
  name: 'apply after approval',
  steps: [{ argv: ['sh', '-c', 'echo planned > /work/plan'] }, { argv: ['cat', '/work/plan'], apply: true }],
};
const HOLD_STEP_1 = { step_approvals: [{ approval_id: 'step-1', step_index: 1, reason: 'step 1 is marked apply', timeout_seconds: 120 }] };

beforeAll(async () => {
  world = await RuntimeWorld.create('rtapr');
  patient = world.newWorkerId('patient');
  hasty = world.newWorkerId('hasty');
  await world.startRuntime(patient);
  // Holds on this worker last at most 2 s whatever the rule says.
  await world.startRuntime(hasty, { CAIRN_STEP_HOLD_MAX_SECONDS: '2' });
});

afterAll(async () => {
  const left = await world?.leftoverContainers();
  await world?.dispose();
  expect(left).toEqual([]);
});

describe('a step held for approval', () => {
  it('is requested after the steps before it, with the sandbox kept; a grant lets it run on what they made', async () => {
    const runId = await placed(APPLY, patient, HOLD_STEP_1);
    const held = await world.waitForType(runId, ['approval.requested']);
    expect(held.map((r) => r.type).slice(3)).toEqual(['sandbox.created', 'step.started', 'step.completed', 'approval.requested']);
    const request = ofType(held, 'approval.requested')[0]!;
    expect(request).toMatchObject({ actor: 'runtime', approval_id: 'step-1', scope: 'step', step_index: 1, reason: 'step 1 is marked apply' });
    const waits = Date.parse(request.expires_at) - Date.parse(request.ts);
    expect(waits).toBeGreaterThan(119_000);
    expect(waits).toBeLessThanOrEqual(120_000);
    expect(foldRun(held)?.state).toBe('AWAITING_APPROVAL');
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect((await world.containersOf(patient)).filter((c) => c.chain === runId && c.running)).toHaveLength(1);
    expect(await world.types(runId)).toHaveLength(held.length);

    await appendAsIntake(runId, 'approval.granted', { approval_id: 'step-1', approved_by: 'key:boss' }, `${runId}:${request.seq}`, 'step-1');
    const chain = await world.waitForType(runId, ['run.executed', 'run.failed', 'run.cancelled']);
    expect(chain.map((r) => r.type).slice(7)).toEqual(['approval.granted', 'step.started', 'step.completed', 'sandbox.destroyed', 'run.executed']);
    const applied = ofType(chain, 'step.completed')[1]!;
    expect(applied).toMatchObject({ step_index: 1, exit_code: 0, stdout_bytes: 'planned\n'.length });
    expect(foldRun(chain)).toMatchObject({ state: 'EXECUTED', errorCode: null });
    expect(verifyChain(chain).ok).toBe(true);
    expect(await world.containersOf(patient)).toEqual([]);
  });

  it('times out by itself when nobody decides: approval.rejected (timeout), the sandbox destroyed, CANCELLED with E_NO_APPROVAL', async () => {
    const runId = await placed(APPLY, hasty, HOLD_STEP_1);
    const chain = await world.waitFor(runId, (c) => c.some((r) => r.type === 'sandbox.destroyed'), 20_000);
    expect(chain.map((r) => r.type).slice(6)).toEqual(['approval.requested', 'approval.rejected', 'sandbox.destroyed']);
    const request = ofType(chain, 'approval.requested')[0]!;
    // The worker's hold cap (2 s) is what the request says, not the rule's 120 s.
    expect(Date.parse(request.expires_at) - Date.parse(request.ts)).toBeLessThanOrEqual(2000);
    expect(ofType(chain, 'approval.rejected')[0]).toMatchObject({ actor: 'runtime', rejected_by: 'runtime', cause: 'timeout', causation: `${runId}:${request.seq}` });
    expect(ofType(chain, 'sandbox.destroyed')[0]).toMatchObject({ verified_gone: true, reason: 'cancelled' });
    expect(ofType(chain, 'step.started')).toHaveLength(1);
    expect(foldRun(chain)).toMatchObject({ state: 'CANCELLED', errorCode: 'E_NO_APPROVAL' });
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(await world.types(runId)).toHaveLength(chain.length);
    expect(await world.containersOf(hasty)).toEqual([]);
    expect(await world.leases.get(runId)).toBeNull();
  });

  it('is stopped by a cancel while it waits: the kept sandbox is torn down on the record, then run.cancelled', async () => {
    const runId = await placed(APPLY, patient, HOLD_STEP_1);
    await world.waitForType(runId, ['approval.requested']);
    await appendAsIntake(runId, 'run.cancel_requested', { requested_by: 'key:test' }, null, 'cancel');
    const chain = await world.waitForType(runId, ['run.cancelled'], 15_000);
    expect(chain.map((r) => r.type).slice(6)).toEqual(['approval.requested', 'run.cancel_requested', 'sandbox.destroyed', 'run.cancelled']);
    expect(foldRun(chain)).toMatchObject({ state: 'CANCELLED', errorCode: null });
    expect(await world.containersOf(patient)).toEqual([]);
  });
});

describe('budgets mid-run', () => {
  it('cuts a step at the time the run has left and ends the run ROLLBACK E_BUDGET, the sandbox gone, the receipts kept', async () => {
    const runId = await placed({ name: 'out of time', steps: [{ argv: ['sleep', '20'], timeoutSeconds: 25 }, { argv: ['echo', 'never'] }] }, patient, {
      budget: { run_seconds: 2 },
    });
    const chain = await world.waitForType(runId, ['run.failed', 'run.executed'], 20_000);
    expect(chain.map((r) => r.type).slice(3)).toEqual(['sandbox.created', 'step.started', 'step.completed', 'sandbox.destroyed', 'run.failed']);
    const step = ofType(chain, 'step.completed')[0]!;
    expect(step).toMatchObject({ error_code: 'E_BUDGET', limits_hit: ['wall_time'] });
    expect(step.duration_ms).toBeLessThan(10_000);
    expect(ofType(chain, 'run.failed')[0]).toMatchObject({ error_code: 'E_BUDGET', step_index: 0, message: expect.stringContaining("run's time budget") as string });
    expect(foldRun(chain)).toMatchObject({ state: 'ROLLBACK', errorCode: 'E_BUDGET' });
    expect(await world.containersOf(patient)).toEqual([]);
  });

  it('ends the run ROLLBACK E_BUDGET after a step that writes more than the output budget, and runs no step after it', async () => {
    const runId = await placed({ name: 'chatty', steps: [{ argv: ['sh', '-c', 'yes | head -c 5000'] }, { argv: ['echo', 'never'] }] }, patient, {
      budget: { output_bytes_per_step: 1000 },
    });
    const chain: EvidenceReceipt[] = await world.waitForType(runId, ['run.failed', 'run.executed'], 20_000);
    expect(ofType(chain, 'step.started')).toHaveLength(1);
    const [step] = ofType(chain, 'step.completed');
    expect(step).toMatchObject({ error_code: 'E_BUDGET', limits_hit: ['output_bytes'] });
    // Stopped the moment it passed the budget (what arrived meanwhile is counted too).
    expect(step!.stdout_bytes).toBeGreaterThan(1000);
    expect(step!.stdout_bytes).toBeLessThanOrEqual(5000);
    expect(ofType(chain, 'run.failed')[0]).toMatchObject({ error_code: 'E_BUDGET', message: expect.stringContaining(`${step!.stdout_bytes} bytes of output`) as string });
    expect(foldRun(chain)).toMatchObject({ state: 'ROLLBACK', errorCode: 'E_BUDGET' });
    expect(await world.containersOf(patient)).toEqual([]);
  });

  it('stops an endless writer the moment it passes the output budget, not at its time cap', async () => {
    const runId = await placed({ name: 'endless', steps: [{ argv: ['yes', 'chatty'], timeoutSeconds: 20 }, { argv: ['echo', 'never'] }] }, patient, {
      budget: { output_bytes_per_step: 100_000 },
    });
    const chain: EvidenceReceipt[] = await world.waitForType(runId, ['run.failed', 'run.executed'], 20_000);
    const [step] = ofType(chain, 'step.completed');
    expect(step).toMatchObject({ exit_code: null, signal: 'SIGKILL', error_code: 'E_BUDGET', output_truncated: true });
    expect(step!.limits_hit).toEqual(['output_bytes']);
    expect(step!.stdout_bytes).toBeGreaterThan(100_000);
    expect(step!.duration_ms).toBeLessThan(5000);
    expect(ofType(chain, 'step.started')).toHaveLength(1);
    expect(ofType(chain, 'sandbox.destroyed')[0]).toMatchObject({ verified_gone: true });
    expect(foldRun(chain)).toMatchObject({ state: 'ROLLBACK', errorCode: 'E_BUDGET' });
    expect(await world.containersOf(patient)).toEqual([]);
  });
});
