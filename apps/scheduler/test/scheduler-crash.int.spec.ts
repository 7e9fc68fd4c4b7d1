import { jetstreamManager } from '@nats-io/jetstream';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSchedulerWorld, fakeWorker, killAll, sleep, startProcess, until } from './scheduler.harness.js';
import type { SchedulerWorld, ServiceProcess } from './scheduler.harness.js';

// The real process, built by `npm run build` (npm test builds first).
const MAIN = fileURLToPath(new URL('../dist/main.js', import.meta.url));

let world: SchedulerWorld;
const processes: ServiceProcess[] = [];

function startScheduler(): ServiceProcess {
  // A short ack wait, so a receipt the killed process held comes back quickly.
  const p = startProcess(MAIN, { ...world.env, CAIRN_SCHEDULER_ACK_WAIT_MS: '2000', CAIRN_LEASE_TTL_MS: '60000' });
  processes.push(p);
  return p;
}

beforeAll(async () => {
  if (!existsSync(MAIN)) throw new Error(`${MAIN} is missing: run npm run build first`);
  world = await createSchedulerWorld('crash');
});

afterAll(async () => {
  await killAll(processes);
  await world?.dispose();
});

describe('the scheduler process', () => {
  it('killed -9 while the run waits in its queue, then restarted, schedules the run exactly once', async () => {
    const first = startScheduler();
    const runId = await world.decidedRun();
    // No worker yet: the scheduler queues the run (waiting for a runtime) and acknowledges its receipt.
    const jsm = await jetstreamManager(world.nc);
    expect(await until('the run to be queued', () => world.queue.get(runId))).toMatchObject({ chain_id: runId, waiting_for: 'runtime', deadline_at: null, runnable_seq: 2 });
    await until('the decision to be acknowledged', async () => {
      const info = await jsm.consumers.info(world.env.CAIRN_EVIDENCE_STREAM!, 'cairn-scheduler').catch(() => null);
      return info !== null && info.num_ack_pending === 0 && info.num_pending === 0 ? info : null;
    });
    first.child.kill('SIGKILL');
    expect(await first.exited).toEqual({ code: null, signal: 'SIGKILL' });

    await world.registry.register(fakeWorker('w-crash'));
    await sleep(500);
    expect((await world.chain(runId)).map((r) => r.type)).toEqual(['run.submitted', 'policy.decided']);
    expect(await world.leases.get(runId)).toBeNull();

    const second = startScheduler();
    const scheduled = await until('run.scheduled', async () => (await world.chain(runId)).find((r) => r.type === 'run.scheduled'));
    expect(scheduled).toMatchObject({ actor: 'scheduler', worker_id: 'w-crash', attempt: 1, causation: `${runId}:2` });
    expect(await world.leases.get(runId)).toMatchObject({ worker_id: 'w-crash', lease_id: scheduled.lease_id });
    expect(await until('the queue to let it go', async () => ((await world.queue.get(runId)) === null ? true : null))).toBe(true);

    // Kill the second one too and start a third: the chain and the lease stay as they are.
    second.child.kill('SIGKILL');
    await second.exited;
    const third = startScheduler();
    await sleep(3000);
    expect((await world.chain(runId)).map((r) => r.type)).toEqual(['run.submitted', 'policy.decided', 'run.scheduled']);
    expect((await world.leases.list()).map((l) => l.run_id)).toEqual([runId]);

    third.child.kill('SIGTERM');
    const exit = await third.exited;
    expect(exit).toEqual({ code: 0, signal: null });
  });

  it('fails at boot, naming the variable, when the configuration is wrong', async () => {
    const p = startProcess(MAIN, { ...world.env, CAIRN_LEASE_TTL_MS: 'soon' });
    processes.push(p);
    expect((await p.exited).code).toBe(1);
    expect(p.output()).toContain('CAIRN_LEASE_TTL_MS');
  });
});
