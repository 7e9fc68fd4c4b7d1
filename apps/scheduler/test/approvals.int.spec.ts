import 'reflect-metadata';
import type { ReceiptEnvelope } from '@cairn/contracts';
import { foldRun } from '@cairn/lifecycle';
import { startService } from '@cairn/service-kit';
import type { RunningService } from '@cairn/service-kit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { approvalsBucketFor } from '@cairn/config';
import { ApprovalDeadlines } from '../src/approval-deadlines.store.js';
import { SCHEDULER_SERVICE, schedulerModule } from '../src/scheduler.module.js';
import { createSchedulerWorld, fakeWorker, sleep, until } from './scheduler.harness.js';
import type { SchedulerWorld } from './scheduler.harness.js';

/* Held runs on the real JetStream: approval deadlines indexed, grants scheduled, timeouts rejected. */

let world: SchedulerWorld;
let scheduler: RunningService;
let deadlines: ApprovalDeadlines;

/** A run policy held, with one `approval.requested` that expires `inMs` from now. */
async function heldRun(inMs: number, approvalId = 'image'): Promise<string> {
  const runId = await world.decidedRun({ decision: 'hold' });
  const fields = { approval_id: approvalId, scope: 'run', step_index: null, reason: 'image needs approval', expires_at: new Date(Date.now() + inMs).toISOString() };
  await world.log.append(runId, { type: 'approval.requested', actor: 'policy', tenant: 'acme', causation: `${runId}:2`, key: approvalId, fields });
  return runId;
}

async function appendAfter(runId: string, type: string, fields: Record<string, unknown>, key?: string): Promise<ReceiptEnvelope> {
  const chain = await world.chain(runId);
  const { receipt } = await world.log.append(runId, { type, actor: 'intake', tenant: 'acme', causation: `${runId}:${chain.length}`, fields, ...(key === undefined ? {} : { key }) });
  return receipt;
}

beforeAll(async () => {
  world = await createSchedulerWorld('schapr');
  await world.registry.register(fakeWorker('w-apr'));
  const config = world.config({ CAIRN_APPROVAL_SCAN_INTERVAL_MS: '200' });
  deadlines = new ApprovalDeadlines(world.nc, approvalsBucketFor(config.CAIRN_LEASES_BUCKET));
  scheduler = await startService(SCHEDULER_SERVICE, schedulerModule(config));
});

afterAll(async () => {
  await scheduler?.stop();
  await world?.dispose();
});

describe('the scheduler and approvals', () => {
  it('rejects an approval nobody decided by its deadline: approval.rejected (timeout), the run CANCELLED with E_NO_APPROVAL', async () => {
    const runId = await heldRun(800);
    await until(`the deadline of ${runId}`, async () => (await deadlines.list()).find((d) => d.run_id === runId));
    const rejected = await until('approval.rejected', async () => (await world.chain(runId)).find((r) => r.type === 'approval.rejected'));
    expect(rejected).toMatchObject({ actor: 'scheduler', approval_id: 'image', rejected_by: 'scheduler', cause: 'timeout', causation: `${runId}:3` });
    const requested = (await world.chain(runId)).find((r) => r.type === 'approval.requested') as ReceiptEnvelope & { expires_at: string };
    expect(Date.parse(rejected.ts)).toBeGreaterThanOrEqual(Date.parse(requested.expires_at));
    expect(foldRun(await world.chain(runId))).toMatchObject({ state: 'CANCELLED', errorCode: 'E_NO_APPROVAL' });
    await until('the deadline gone', async () => !(await deadlines.list()).some((d) => d.run_id === runId));
  });

  it('schedules a held run once it is approved, and never times it out afterwards', async () => {
    const runId = await heldRun(1200);
    await until(`the deadline of ${runId}`, async () => (await deadlines.list()).find((d) => d.run_id === runId));
    await appendAfter(runId, 'approval.granted', { approval_id: 'image', approved_by: 'key:boss' }, 'image');
    const scheduled = await until('run.scheduled', async () => (await world.chain(runId)).find((r) => r.type === 'run.scheduled'));
    expect(scheduled).toMatchObject({ actor: 'scheduler', worker_id: 'w-apr' });
    await sleep(1500);
    const types = (await world.chain(runId)).map((r) => r.type);
    expect(types).toEqual(['run.submitted', 'policy.decided', 'approval.requested', 'approval.granted', 'run.scheduled']);
    expect((await deadlines.list()).some((d) => d.run_id === runId)).toBe(false);
  });

  it('keeps a run with two approvals held until both are granted', async () => {
    const runId = await heldRun(60_000, 'egress');
    await appendAfter(runId, 'approval.requested', { approval_id: 'image', scope: 'run', step_index: null, reason: 'image', expires_at: new Date(Date.now() + 60_000).toISOString() }, 'image');
    await appendAfter(runId, 'approval.granted', { approval_id: 'egress', approved_by: 'key:boss' }, 'egress');
    await sleep(600);
    expect((await world.chain(runId)).some((r) => r.type === 'run.scheduled')).toBe(false);
    await appendAfter(runId, 'approval.granted', { approval_id: 'image', approved_by: 'key:boss' }, 'image');
    await until('run.scheduled', async () => (await world.chain(runId)).find((r) => r.type === 'run.scheduled'));
  });

  it('drops the deadlines of a held run that is cancelled and sealed, and appends nothing after its seal', async () => {
    const runId = await heldRun(700);
    await until(`the deadline of ${runId}`, async () => (await deadlines.list()).find((d) => d.run_id === runId));
    await appendAfter(runId, 'run.cancelled', { cancelled_by: 'key:k1' }, 'cancel');
    const head = (await world.chain(runId)).at(-1)!;
    await appendAfter(runId, 'run.sealed', { final_state: 'CANCELLED', evidence_digest: head.hash });
    await until('the deadline gone', async () => !(await deadlines.list()).some((d) => d.run_id === runId));
    await sleep(1000);
    expect((await world.chain(runId)).at(-1)?.type).toBe('run.sealed');
  });
});
