import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closedLoopbackPort, runCairn } from './cli.harness.js';
import { isRunning, TestStack } from './stack.harness.js';

/* `cairn up` when it cannot or should not start a stack, and the commands that need one without it. */

let home: string;

beforeAll(async () => {
  home = await mkdtemp(join(tmpdir(), 'cairn-up-e2e-'));
});

afterAll(async () => {
  await rm(home, { recursive: true, force: true });
});

describe('cairn up, when something is missing', () => {
  it('names everything that does not answer, and what to run, exit 1 (E_UNAVAILABLE), starting nothing', async () => {
    const [nats, postgres] = [await closedLoopbackPort(), await closedLoopbackPort()];
    const run = await runCairn(['up', '--no-setup'], {
      CAIRN_HOME: join(home, 'missing'),
      CAIRN_NATS_URL: `nats://127.0.0.1:${nats}`,
      CAIRN_DATABASE_URL: `postgres://cairn:secret@127.0.0.1:${postgres}/cairn`,
      CAIRN_DOCKER_SOCKET: join(home, 'no-docker.sock'),
    });
    expect(run.code).toBe(1);
    expect(run.stdout).toBe('');
    const error = run.stderr.split('\n').find((line) => line.startsWith('error '))!;
    expect(error).toMatch(/^error E_UNAVAILABLE: cannot start the stack: /);
    expect(error).toContain(`the Docker engine does not answer on ${join(home, 'no-docker.sock')} (CAIRN_DOCKER_SOCKET)`);
    expect(error).toContain(`NATS does not answer at nats://127.0.0.1:${nats} (CAIRN_NATS_URL)`);
    expect(error).toContain(`PostgreSQL does not answer at postgres://127.0.0.1:${postgres}/cairn (CAIRN_DATABASE_URL)`);
    expect(error).toContain('bash tools/ensure-services.sh');
    expect(run.stderr).not.toContain('secret');
    expect(await readdir(join(home, 'missing'))).not.toContain('stack.json');
  });

  it('fails closed when a service does not start: its log tail is shown, and nothing is left running', async () => {
    const stack = await TestStack.create('up-fail', { CAIRN_WORKER_SLOTS: '0' });
    try {
      const run = await stack.cairn(['up', '--no-setup', '--timeout', '60']);
      expect(run.code).toBe(1);
      expect(run.stderr).toMatch(/error E_UNAVAILABLE: runtime exited while the stack was starting \(log .*runtime\.log\)/);
      expect(run.stderr).toContain('CAIRN_WORKER_SLOTS');
      expect(await readdir(stack.home)).not.toContain('stack.json');
      const started = [...run.stderr.matchAll(/started (\w+) \(pid (\d+)\)/g)].map((m) => Number(m[2]));
      expect(started.length).toBeGreaterThan(0);
      for (const pid of started) expect(isRunning(pid), `pid ${pid}`).toBe(false);
    } finally {
      await stack.dispose();
    }
  });
});

describe('commands that need a stack, without one', () => {
  it('say how to start one (E_UNAVAILABLE, exit 1); cairn down has nothing to do (exit 0)', async () => {
    const env = { CAIRN_HOME: join(home, 'empty') };
    const status = await runCairn(['status'], env);
    expect(status.code).toBe(1);
    expect(status.stderr).toMatch(/^error E_UNAVAILABLE: no Cairn stack was started from .*empty \(CAIRN_HOME\): start one with `npx --no-install cairn up`/);
    const down = await runCairn(['down'], env);
    expect(down.code).toBe(0);
    expect(down.stdout).toContain('no stack to stop');
  });

  it('refuses CAIRN_URL without CAIRN_API_KEY, and a bad run id, as usage errors (exit 2)', async () => {
    const noKey = await runCairn(['status'], { CAIRN_URL: 'http://127.0.0.1:1' });
    expect(noKey.code).toBe(2);
    expect(noKey.stderr).toContain('CAIRN_API_KEY');
    const badId = await runCairn(['events', 'RUN-1'], { CAIRN_HOME: join(home, 'empty') });
    expect(badId.code).toBe(2);
    expect(badId.stderr).toMatch(/^error E_INPUT: invalid run id "RUN-1"/);
  });

  it('reports a gateway that does not answer as E_UNAVAILABLE, exit 1', async () => {
    const port = await closedLoopbackPort();
    const run = await runCairn(['status', '--json'], { CAIRN_URL: `http://127.0.0.1:${port}`, CAIRN_API_KEY: 'cairn_abcdefgh_x' });
    expect(run.code).toBe(1);
    expect(JSON.parse(run.stdout)).toMatchObject({ ok: false, error: { code: 'E_UNAVAILABLE', message: expect.stringContaining(`cannot reach the Cairn gateway at http://127.0.0.1:${port}`) as string } });
  });
});
