import type { SandboxHandle } from '@cairn/sandbox';
import { existsSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BUNDLED_AGENT_BINARY, DockerSandboxDriver } from '../src/index.js';
import { codeOf, sandboxFixture, text } from './sandbox.fixture.js';

/*
 * `ExecRequest.stopAfterOutputBytes` against the real engine, over the exec agent and over
 * `docker exec`: a step whose stdout and stderr together pass the budget is stopped at once by
 * destroying its sandbox (as a cap stops it), reported as `outputBudgetHit` — never as a cap.
 */

const fx = sandboxFixture('obud');
const socketRoot = join('/tmp', `cairn-agent-obud-${process.pid}`);
const drivers = {
  'the exec agent': new DockerSandboxDriver({ docker: fx.docker, execAgent: { binary: BUNDLED_AGENT_BINARY, socketRoot } }),
  'docker exec': new DockerSandboxDriver({ docker: fx.docker, execAgent: null }),
};
const BUDGET = 65_536;

beforeAll(async () => {
  expect(existsSync(BUNDLED_AGENT_BINARY), `npm run build compiles the agent (needs gcc) at ${BUNDLED_AGENT_BINARY}`).toBe(true);
  await fx.ready();
});

afterAll(async () => {
  await fx.removeLabelled([fx.workerId]);
  // This file's own socket root: nothing of it outlives the run.
  await rm(socketRoot, { recursive: true, force: true });
});

describe.each(Object.entries(drivers))('an output budget, over %s', (_, driver) => {
  let sandbox: SandboxHandle;
  beforeAll(async () => {
    sandbox = await driver.create(fx.spec());
  });

  it('lets a step that stays within it run to its end (at the budget is within it)', async () => {
    const within = await driver.exec(sandbox, { argv: ['sh', '-c', `yes | head -c ${BUDGET - 10}; echo 123456789 >&2`], timeoutMs: 20_000, maxOutputBytes: 1 << 20, stopAfterOutputBytes: BUDGET });
    expect(within).toMatchObject({ exitCode: 0, outputBudgetHit: false, limitHit: null, teardown: null, stdoutBytes: BUDGET - 10, stderrBytes: 10 });
    const none = await driver.exec(sandbox, { argv: ['echo', 'no budget'], timeoutMs: 20_000, maxOutputBytes: 1024 });
    expect(none).toMatchObject({ exitCode: 0, outputBudgetHit: false });
    expect(text(none.stdout)).toBe('no budget\n');
  });

  it('stops an endless writer as soon as it passes, destroying the sandbox, long before its deadline', async () => {
    const started = Date.now();
    const result = await driver.exec(sandbox, { argv: ['yes', 'hostile'], timeoutMs: 20_000, maxOutputBytes: 4096, stopAfterOutputBytes: BUDGET });
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(result).toMatchObject({ exitCode: null, outputBudgetHit: true, limitHit: null, truncated: true, teardown: { verifiedGone: true } });
    expect(result.stdoutBytes).toBeGreaterThan(BUDGET);
    expect(text(result.stdout).startsWith('hostile\nhostile\n')).toBe(true);
    expect(result.stdout.length).toBe(4096);
    expect(await fx.engineKnows(sandbox.id)).toBe(false);
  });

  it('counts stderr with stdout, and leaves a cap that came first as the cause', async () => {
    const split = await driver.create(fx.spec());
    const both = await driver.exec(split, { argv: ['sh', '-c', 'while :; do echo out; echo err >&2; done'], timeoutMs: 20_000, maxOutputBytes: 1024, stopAfterOutputBytes: 4096 });
    expect(both).toMatchObject({ outputBudgetHit: true, limitHit: null, teardown: { verifiedGone: true } });
    expect(both.stderrBytes).toBeGreaterThan(0);
    expect(both.stdoutBytes + both.stderrBytes).toBeGreaterThan(4096);

    const quiet = await driver.create(fx.spec());
    const timedOut = await driver.exec(quiet, { argv: ['sleep', '30'], timeoutMs: 500, maxOutputBytes: 1024, stopAfterOutputBytes: 10 });
    expect(timedOut).toMatchObject({ outputBudgetHit: false, limitHit: 'E_TIMEOUT', exitCode: null });
  });

  it('refuses a budget that is not a non-negative integer, before anything runs', async () => {
    const fresh = await driver.create(fx.spec());
    for (const bad of [-1, 1.5, Number.NaN]) {
      expect(await codeOf(driver.exec(fresh, { argv: ['true'], timeoutMs: 1000, maxOutputBytes: 10, stopAfterOutputBytes: bad }))).toBe('E_INPUT');
    }
    expect((await driver.exec(fresh, { argv: ['true'], timeoutMs: 5000, maxOutputBytes: 10, stopAfterOutputBytes: 0 })).exitCode).toBe(0);
    await driver.destroy(fresh);
  });
});
