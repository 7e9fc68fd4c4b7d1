import 'reflect-metadata';
import { startService } from '@cairn/service-kit';
import type { RunningService } from '@cairn/service-kit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SCHEDULER_SERVICE, schedulerModule } from '../src/scheduler.module.js';
import { createSchedulerWorld, fakeWorker, until } from './scheduler.harness.js';
import type { SchedulerWorld } from './scheduler.harness.js';

// Long leases: nothing here renews them, and none may lapse while the test looks.
const TTL_MS = 120_000;
let world: SchedulerWorld;
let scheduler: RunningService;

async function workerOf(runId: string): Promise<string> {
  const scheduled = await until(`run.scheduled on ${runId}`, async () => (await world.chain(runId)).find((r) => r.type === 'run.scheduled'));
  return String((scheduled as { worker_id?: unknown }).worker_id);
}

beforeAll(async () => {
  world = await createSchedulerWorld('spread');
  // Two workers alike but in size: A has 4 slots, B has 2.
  await world.registry.register(fakeWorker('w-big', { capacity: { slots: 4, memoryMiB: 8192, cpus: 4, diskMiB: 8192 } }));
  await world.registry.register(fakeWorker('w-small', { capacity: { slots: 2, memoryMiB: 8192, cpus: 4, diskMiB: 8192 } }));
  scheduler = await startService(SCHEDULER_SERVICE, schedulerModule(world.config({ CAIRN_LEASE_TTL_MS: String(TTL_MS), CAIRN_LEASE_SCAN_INTERVAL_MS: '200' })));
});

afterAll(async () => {
  await scheduler?.stop();
  await world?.dispose();
});

describe('the scheduler across workers', () => {
  it('spreads runs by free capacity: each goes to the worker with the most room left', async () => {
    const placed: string[] = [];
    // One at a time, so each placement sees the leases of the ones before it.
    for (let i = 0; i < 4; i++) placed.push(await workerOf(await world.decidedRun()));
    // Free slots first (4 vs 2, 3 vs 2), then free memory on a tie (2 vs 2: small has more), then slots again (2 vs 1).
    expect(placed).toEqual(['w-big', 'w-big', 'w-small', 'w-big']);
  });

  it('places nothing on a drained worker, even when it is the roomier; its leases stay; a re-registration keeps the drain; undrained, it takes work again', async () => {
    // big: 1 free of 4, small: 1 free of 2. Give big all its room back by dropping the leases it holds.
    for (const lease of await world.leases.list()) if (lease.worker_id === 'w-big') await world.leases.delete(lease.run_id, lease.lease_id);
    const held = (await world.leases.list()).filter((lease) => lease.worker_id === 'w-small').map((lease) => lease.run_id);
    expect(held).toHaveLength(1);

    await world.drains.drain({ workerId: 'w-big', drainedAt: Date.now(), by: 'key:test' });
    // The worker restarts and registers afresh (draining: false in its own record): the operator's drain holds.
    await world.registry.register(fakeWorker('w-big', { capacity: { slots: 4, memoryMiB: 8192, cpus: 4, diskMiB: 8192 } }));
    expect(await workerOf(await world.decidedRun())).toBe('w-small');
    // The drained worker's runs are untouched; small is now full, so the next run waits rather than go to big.
    const waiting = await world.decidedRun();
    await until('the run to be queued', async () => ((await world.queue.get(waiting)) === null ? null : true));
    expect((await world.chain(waiting)).map((r) => r.type)).toEqual(['run.submitted', 'policy.decided']);
    expect((await world.leases.list()).map((lease) => lease.run_id)).toEqual(expect.arrayContaining(held));

    // Undrained: the queued run goes to big at the next pass.
    expect(await world.drains.undrain('w-big')).toBe(true);
    expect(await workerOf(waiting)).toBe('w-big');
  });
});
