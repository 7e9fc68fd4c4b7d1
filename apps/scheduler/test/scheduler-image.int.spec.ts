import 'reflect-metadata';
import { startService } from '@cairn/service-kit';
import type { RunningService } from '@cairn/service-kit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SCHEDULER_SERVICE, schedulerModule } from '../src/scheduler.module.js';
import { createSchedulerWorld, fakeWorker, until } from './scheduler.harness.js';
import type { SchedulerWorld } from './scheduler.harness.js';

/** A worker that has not reported an image for this long is not live, so neither is the image: PRODUCT.md's E_IMAGE_PULL. */
const STALE_AFTER_MS = 1500;
let world: SchedulerWorld;
let scheduler: RunningService;
let heartbeat: NodeJS.Timeout | undefined;

beforeAll(async () => {
  world = await createSchedulerWorld('schedimg');
  await world.registry.register(fakeWorker('w-busybox'));
  // Live as a real worker is: a new heartbeat well within the stale limit, since the scheduler judges it by
  // when it saw the last one, on its own clock (ADR 0033), not by the time a worker writes.
  heartbeat = setInterval(() => void world.registry.register(fakeWorker('w-busybox')).catch(() => undefined), 300);
  scheduler = await startService(SCHEDULER_SERVICE, schedulerModule(world.config({ CAIRN_WORKER_STALE_AFTER_MS: String(STALE_AFTER_MS) })));
});

afterAll(async () => {
  clearInterval(heartbeat);
  await scheduler?.stop();
  await world?.dispose();
});

describe('the scheduler, for an image no live worker has', () => {
  it('fails the run E_IMAGE_PULL once it has waited as long as a worker takes to report an image, caused by its decision, leasing nothing', async () => {
    const runId = await world.decidedRun({ image: 'cairn/sandbox-debian:1' });
    const failed = await until(`run.failed on ${runId}`, async () => (await world.chain(runId)).find((r) => r.type === 'run.failed'), 15_000);
    expect(failed).toMatchObject({
      seq: 3,
      actor: 'scheduler',
      causation: `${runId}:2`,
      error_code: 'E_IMAGE_PULL',
      message: expect.stringMatching(/no live worker has image cairn\/sandbox-debian:1/) as unknown,
    });
    const decidedAt = Date.parse((await world.chain(runId))[1]!.ts);
    expect(Date.parse(failed.ts) - decidedAt).toBeGreaterThanOrEqual(STALE_AFTER_MS);
    expect((await world.chain(runId)).map((r) => r.type)).toEqual(['run.submitted', 'policy.decided', 'run.failed']);
    expect(await world.leases.get(runId)).toBeNull();
  });

  it('still places a run whose image a live worker has', async () => {
    const runId = await world.decidedRun();
    const scheduled = await until(`run.scheduled on ${runId}`, async () => (await world.chain(runId)).find((r) => r.type === 'run.scheduled'));
    expect(scheduled).toMatchObject({ worker_id: 'w-busybox' });
  });
});
