import { spawn } from 'node:child_process';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startOldNatsServer, testNatsUrl } from '@cairn/testing';
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

  it('refuses a NATS server older than 2.12, naming its version and how to install ours (E_UNAVAILABLE, exit 1)', async () => {
    const old = await startOldNatsServer('2.9.10');
    try {
      const run = await runCairn(['up', '--no-setup'], { CAIRN_HOME: join(home, 'old-nats'), CAIRN_NATS_URL: old.url });
      expect(run.code).toBe(1);
      const error = run.stderr.split('\n').find((line) => line.startsWith('error '))!;
      expect(error).toMatch(/^error E_UNAVAILABLE: cannot start the stack: /);
      expect(error).toContain(`the NATS server is 2.9.10; Cairn needs 2.12.0 or newer`);
      expect(error).toContain('deploy/nats/VERSION');
      expect(await readdir(join(home, 'old-nats')).catch(() => [])).not.toContain('stack.json');
    } finally {
      await old.close();
    }
  });

  it('refuses replicas the server cannot hold, or an even count, before starting anything', async () => {
    // The machine's NATS is one node: a stream of three replicas cannot be placed on it.
    const single = await runCairn(['up', '--no-setup'], { CAIRN_HOME: join(home, 'replicas'), CAIRN_NATS_URL: testNatsUrl(), CAIRN_NATS_REPLICAS: '3' });
    expect(single.code).toBe(1);
    const error = single.stderr.split('\n').find((line) => line.startsWith('error '))!;
    expect(error).toMatch(/^error E_UNAVAILABLE: cannot start the stack: /);
    expect(error).toContain(`CAIRN_NATS_REPLICAS is 3, but the NATS server at ${testNatsUrl()} (CAIRN_NATS_URL) is not part of a cluster`);
    expect(error).toContain('deploy/nats/cluster/');
    expect(await readdir(join(home, 'replicas')).catch(() => [])).not.toContain('stack.json');

    const even = await runCairn(['up', '--no-setup'], { CAIRN_HOME: join(home, 'replicas-even'), CAIRN_NATS_REPLICAS: '2' });
    expect(even.code).toBe(2);
    expect(even.stderr).toMatch(/error E_INPUT: invalid configuration: CAIRN_NATS_REPLICAS: CAIRN_NATS_REPLICAS is 1 \(one node\), 3 or 5/);
  });

  it('every service and gateway refuses it at start, exit 1, with the same message', async () => {
    const old = await startOldNatsServer('2.11.9');
    const keyFile = join(home, 'old-nats.key');
    await writeFile(keyFile, `${'07'.repeat(32)}\n`, { mode: 0o600 });
    try {
      const services = ['intake', 'policy', 'scheduler', 'runtime', 'kernel', 'verifier', 'grader', 'projector', 'webhooks', 'gateway'];
      const results = await Promise.all(
        services.map(
          (service) =>
            new Promise<{ service: string; code: number | null; output: string }>((resolve, reject) => {
              const main = fileURLToPath(new URL(`../../${service}/dist/main.js`, import.meta.url));
              const child = spawn(process.execPath, [main], {
                env: { PATH: process.env.PATH ?? '', NO_COLOR: '1', CAIRN_NATS_URL: old.url, CAIRN_SECRETS_KEY_FILE: keyFile, CAIRN_GATEWAY_PORT: '0', CAIRN_HOME: join(home, 'old-nats-svc') },
                stdio: ['ignore', 'pipe', 'pipe'],
              });
              const chunks: Buffer[] = [];
              child.stdout.on('data', (c: Buffer) => chunks.push(c));
              child.stderr.on('data', (c: Buffer) => chunks.push(c));
              // Ten Node processes booting at once on two busy cores take a while; the bound only catches a hang.
              const timer = setTimeout(() => child.kill('SIGKILL'), 90_000);
              child.on('error', reject);
              child.on('close', (code) => {
                clearTimeout(timer);
                resolve({ service, code, output: Buffer.concat(chunks).toString('utf8') });
              });
            }),
        ),
      );
      for (const { service, code, output } of results) {
        expect(code, `${service}: ${output.slice(-400)}`).toBe(1);
        expect(output, service).toContain('the NATS server is 2.11.9; Cairn needs 2.12.0 or newer');
      }
    } finally {
      await old.close();
    }
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
