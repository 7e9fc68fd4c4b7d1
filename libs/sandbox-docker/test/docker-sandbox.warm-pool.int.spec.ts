import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultAgentSocketRoot, DockerSandboxDriver } from '../src/index.js';
import { sandboxFixture } from './sandbox.fixture.js';

/*
 * When the warm pool refills, on the real engine: not while the sandbox just handed out is about
 * to run its caller's first command, but once that has ended — or after a second at most.
 */
const fx = sandboxFixture('warm', { warmPool: { perProfile: 1, total: 1 } });

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Pool containers of this worker the engine has, idle or being made (never a claimed one). */
async function poolContainers(): Promise<number> {
  const listed = await fx.docker.listContainers({ all: true, filters: { label: [`io.cairn.worker=${fx.workerId}`, 'io.cairn.pool'] } });
  return listed.filter((c) => c.Names.some((name) => name.startsWith('/cairn-pool-'))).length;
}

async function untilWarm(timeoutMs: number): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  while (fx.driver.warmCount === 0 && Date.now() < deadline) await sleep(20);
  return fx.driver.warmCount;
}

const step = (handle: Parameters<typeof fx.driver.exec>[0]) => fx.driver.exec(handle, { argv: ['true'], timeoutMs: 10_000, maxOutputBytes: 1024 });

beforeAll(async () => {
  await fx.ready();
});

/** As long as a worker id may be (128): with a pool container's name its socket path is far past 107 bytes. */
const longWorkerId = `${fx.workerId}-${'w'.repeat(127 - fx.workerId.length)}`;

afterAll(async () => {
  await fx.driver.closePool();
  await fx.removeLabelled([fx.workerId, longWorkerId]);
});

describe('warm pool refills', () => {
  it('after the first step of the sandbox handed out, not beside it', async () => {
    // The profile's first sandbox is made cold; the pool fills behind its first step.
    const cold = await fx.driver.create(fx.spec());
    await step(cold);
    expect(await untilWarm(15_000)).toBe(1);

    const claimed = await fx.driver.create(fx.spec());
    expect(fx.driver.warmCount).toBe(0);
    // No step yet: nothing is being made for the pool.
    await sleep(400);
    expect(await poolContainers()).toBe(0);
    expect(fx.driver.warmCount).toBe(0);
    // Its first step ends: the pool is topped up.
    expect((await step(claimed)).exitCode).toBe(0);
    expect(await untilWarm(15_000)).toBe(1);

    await fx.driver.destroy(cold);
    await fx.driver.destroy(claimed);
  });

  it('a second after a hand-out whose sandbox runs nothing; closing the pool leaves no agent socket directory behind', async () => {
    expect(await untilWarm(15_000)).toBe(1);
    const idle = await fx.driver.create(fx.spec());
    const handedOut = Date.now();
    expect(await untilWarm(15_000)).toBe(1);
    expect(Date.now() - handedOut).toBeGreaterThanOrEqual(1000);
    await fx.driver.destroy(idle);
    const workerDir = join(defaultAgentSocketRoot(), fx.workerId);
    expect(existsSync(workerDir)).toBe(true);
    await fx.driver.closePool();
    expect(fx.driver.warmCount).toBe(0);
    expect(existsSync(workerDir)).toBe(false);
  });

  it('for a worker whose id is as long as ids may be: the agent socket is bound however long its path', async () => {
    await fx.driver.closePool();
    const long = new DockerSandboxDriver({ docker: fx.docker, warmPool: { perProfile: 1, total: 1 } });
    try {
      const cold = await long.create(fx.spec({ workerId: longWorkerId }));
      expect((await long.exec(cold, { argv: ['echo', 'cold'], timeoutMs: 10_000, maxOutputBytes: 1024 })).exitCode).toBe(0);
      const deadline = Date.now() + 15_000;
      while (long.warmCount === 0 && Date.now() < deadline) await sleep(20);
      expect(long.warmCount).toBe(1);
      const warm = await long.create(fx.spec({ workerId: longWorkerId }));
      expect(long.warmCount).toBe(0);
      expect((await long.exec(warm, { argv: ['echo', 'warm'], timeoutMs: 10_000, maxOutputBytes: 1024 })).exitCode).toBe(0);
      await long.destroy(cold);
      await long.destroy(warm);
    } finally {
      await long.closePool();
    }
  });
});
