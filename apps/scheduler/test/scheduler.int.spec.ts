import 'reflect-metadata';
import { grantLease, leaseId } from '@cairn/scheduling';
import { startService } from '@cairn/service-kit';
import type { RunningService } from '@cairn/service-kit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SCHEDULER_SERVICE, schedulerModule } from '../src/scheduler.module.js';
import { createSchedulerWorld, fakeWorker, sleep, until } from './scheduler.harness.js';
import type { SchedulerWorld } from './scheduler.harness.js';

const TTL_MS = 2500;
let world: SchedulerWorld;
let scheduler: RunningService;
const renewers: NodeJS.Timeout[] = [];

/** What the runtime does for a run it holds: renew its lease before it runs out. */
function keepRenewing(runId: string, workerId: string): void {
  renewers.push(
    setInterval(() => {
      void world.leases.renew(runId, workerId, Date.now() + TTL_MS).catch(() => undefined);
    }, 500),
  );
}

async function scheduledOf(runId: string) {
  return until(`run.scheduled on ${runId}`, async () => (await world.chain(runId)).find((r) => r.type === 'run.scheduled'));
}

beforeAll(async () => {
  world = await createSchedulerWorld('sched');
  await world.registry.register(fakeWorker('w-main'));
  scheduler = await startService(
    SCHEDULER_SERVICE,
    schedulerModule(world.config({ CAIRN_LEASE_TTL_MS: String(TTL_MS), CAIRN_LEASE_SCAN_INTERVAL_MS: '200' })),
  );
});

afterAll(async () => {
  for (const timer of renewers) clearInterval(timer);
  await scheduler?.stop();
  await world?.dispose();
});

describe('the scheduler', () => {
  it('places an allowed run on a registered worker: the lease first, then run.scheduled', async () => {
    const runId = await world.decidedRun();
    keepRenewing(runId, 'w-main');
    const scheduled = await scheduledOf(runId);
    expect(scheduled).toMatchObject({
      seq: 3,
      actor: 'scheduler',
      causation: `${runId}:2`,
      worker_id: 'w-main',
      lease_id: leaseId(runId, 1),
      attempt: 1,
    });
    const lease = await world.leases.get(runId);
    expect(lease).toMatchObject({ run_id: runId, worker_id: 'w-main', lease_id: leaseId(runId, 1), reservation: { runId, memoryMiB: 512, cpus: 1, diskMiB: 256 } });
    expect(scheduled.lease_expires_at).toBe(lease?.granted_at && new Date(Date.parse(lease.granted_at) + TTL_MS).toISOString());
  });

  it('never schedules a denied run', async () => {
    const denied = await world.decidedRun({ decision: 'deny' });
    const allowed = await world.decidedRun();
    keepRenewing(allowed, 'w-main');
    await scheduledOf(allowed);
    await sleep(300);
    expect((await world.chain(denied)).map((r) => r.type)).toEqual(['run.submitted', 'policy.decided']);
    expect(await world.leases.get(denied)).toBeNull();
  });

  it('keeps a run waiting while no worker has its image, and places it once one registers', async () => {
    const runId = await world.decidedRun({ image: 'cairn/sandbox-debian:1' });
    await sleep(1500);
    expect((await world.chain(runId)).map((r) => r.type)).toEqual(['run.submitted', 'policy.decided']);
    await world.registry.register(fakeWorker('w-debian', { images: { 'cairn/sandbox-debian:1': `sha256:${'d'.repeat(64)}` } }));
    keepRenewing(runId, 'w-debian');
    expect(await scheduledOf(runId)).toMatchObject({ worker_id: 'w-debian' });
  });

  it('counts leased runs against a worker’s capacity: the next run waits until a slot is released', async () => {
    const image = 'cairn/sandbox-one:1';
    await world.registry.register(fakeWorker('w-one', { capacity: { slots: 1, memoryMiB: 4096, cpus: 2, diskMiB: 4096 }, images: { [image]: `sha256:${'e'.repeat(64)}` } }));
    const first = await world.decidedRun({ image });
    keepRenewing(first, 'w-one');
    expect(await scheduledOf(first)).toMatchObject({ worker_id: 'w-one' });
    const second = await world.decidedRun({ image });
    keepRenewing(second, 'w-one');
    await sleep(1500);
    expect((await world.chain(second)).map((r) => r.type)).toEqual(['run.submitted', 'policy.decided']);

    await world.log.append(first, { type: 'run.cancelled', actor: 'intake', tenant: 'acme', causation: null, key: 'cancel', fields: { cancelled_by: 'key:k1' } });
    await until('the first lease released', async () => ((await world.leases.get(first)) === null ? true : null));
    expect(await scheduledOf(second)).toMatchObject({ worker_id: 'w-one' });
  });

  it('places a held run once every run-scope approval is granted', async () => {
    const runId = await world.decidedRun({ decision: 'hold' });
    const expires = new Date(Date.now() + 3_600_000).toISOString();
    for (const id of ['egress', 'image']) {
      await world.log.append(runId, {
        type: 'approval.requested',
        actor: 'policy',
        tenant: 'acme',
        causation: `${runId}:1`,
        key: id,
        fields: { approval_id: id, scope: 'run', step_index: null, reason: `${id} needs approval`, expires_at: expires },
      });
    }
    const grant = (id: string) =>
      world.log.append(runId, { type: 'approval.granted', actor: 'key:admin', tenant: 'acme', causation: null, key: id, fields: { approval_id: id, approved_by: 'key:admin' } });
    await grant('egress');
    await sleep(1000);
    expect((await world.chain(runId)).some((r) => r.type === 'run.scheduled')).toBe(false);
    const second = await grant('image');
    keepRenewing(runId, 'w-main');
    expect(await scheduledOf(runId)).toMatchObject({ causation: `${runId}:${second.receipt.seq}`, worker_id: 'w-main' });
  });

  it('announces a lease written before a crash instead of placing the run again', async () => {
    await scheduler.stop();
    const runId = await world.decidedRun();
    // As a scheduler that died between its two writes leaves it: a lease, and no run.scheduled yet.
    await world.leases.create({ ...grantLease(runId, 'w-debian', Date.now(), 60_000), reservation: { runId, memoryMiB: 512, cpus: 1, diskMiB: 256 } });
    scheduler = await startService(
      SCHEDULER_SERVICE,
      schedulerModule(world.config({ CAIRN_LEASE_TTL_MS: String(TTL_MS), CAIRN_LEASE_SCAN_INTERVAL_MS: '200' })),
    );
    expect(await scheduledOf(runId)).toMatchObject({ worker_id: 'w-debian', lease_id: leaseId(runId, 1) });
  });

  it('fails a run whose worker stops renewing its lease with E_WORKER_LOST, caused by its run.scheduled', async () => {
    const runId = await world.decidedRun();
    const scheduled = await scheduledOf(runId);
    const failed = await until('run.failed', async () => (await world.chain(runId)).find((r) => r.type === 'run.failed'), TTL_MS + 10_000);
    expect(failed).toMatchObject({
      actor: 'scheduler',
      error_code: 'E_WORKER_LOST',
      causation: `${runId}:${scheduled.seq}`,
      seq: scheduled.seq + 1,
    });
    expect(failed.message).toContain(`worker w-main lost: lease ${leaseId(runId, 1)}`);
    await until('the lease deleted', async () => ((await world.leases.get(runId)) === null ? true : null));
    await sleep(600);
    expect((await world.chain(runId)).filter((r) => r.type === 'run.failed')).toHaveLength(1);
  });

  it('gives a run with retries: 1 whose worker is lost back as run.retried, places attempt 2 on a lease of its own, and fails it E_WORKER_LOST when that worker is lost too', async () => {
    const runId = await world.decidedRun({ retries: 1 });
    const first = await scheduledOf(runId);
    const retried = await until('run.retried', async () => (await world.chain(runId)).find((r) => r.type === 'run.retried'), TTL_MS + 10_000);
    expect(retried).toMatchObject({
      actor: 'scheduler',
      seq: first.seq + 1,
      causation: `${runId}:${first.seq}`,
      attempt: 1,
      error_code: 'E_WORKER_LOST',
      worker_id: first.worker_id,
      lease_id: leaseId(runId, 1),
      retries_left: 0,
    });
    const second = await until('attempt 2 placed', async () => (await world.chain(runId)).find((r) => r.type === 'run.scheduled' && r.seq > retried.seq));
    expect(second).toMatchObject({ actor: 'scheduler', seq: retried.seq + 1, causation: `${runId}:${retried.seq}`, attempt: 2, lease_id: leaseId(runId, 2) });
    expect(await world.leases.get(runId)).toMatchObject({ lease_id: leaseId(runId, 2), attempt: 2 });
    // Nobody renews attempt 2 either: its one retry is used, so the run fails.
    const failed = await until('run.failed', async () => (await world.chain(runId)).find((r) => r.type === 'run.failed'), TTL_MS + 10_000);
    expect(failed).toMatchObject({ seq: second.seq + 1, causation: `${runId}:${second.seq}`, error_code: 'E_WORKER_LOST' });
    expect(failed.message).toMatch(/all 1 retries are used$/);
    await until('the lease deleted', async () => ((await world.leases.get(runId)) === null ? true : null));
    await sleep(600);
    const chain = await world.chain(runId);
    expect(chain.filter((r) => r.type === 'run.retried')).toHaveLength(1);
    expect(chain.filter((r) => r.type === 'run.scheduled')).toHaveLength(2);
  });

  it('never fails a run whose worker keeps renewing its lease', async () => {
    // The runs placed above are renewed by their fake runtimes: none was failed.
    const leases = await world.leases.list();
    expect(leases.length).toBeGreaterThan(0);
    for (const lease of leases) expect((await world.chain(lease.run_id)).some((r) => r.type === 'run.failed')).toBe(false);
  });
});
