import type { SandboxHandle } from '@cairn/sandbox';
import { existsSync } from 'node:fs';
import { chmod, chown, lstat, mkdir, readdir, rm, symlink } from 'node:fs/promises';
import { connect } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BUNDLED_AGENT_BINARY, DEFAULT_SANDBOX_USER, DockerSandboxDriver } from '../src/index.js';
import { codeOf, sandboxFixture, text } from './sandbox.fixture.js';

/*
 * The in-sandbox exec agent (docs/adr/0005-exec-agent.md) against the real engine: steps go over
 * its socket, behave as they do over `docker exec`, and nothing else can take the agent's place.
 */

const fx = sandboxFixture('agt');
const socketRoot = join('/tmp', `cairn-agent-test-${process.pid}`);
const driver = new DockerSandboxDriver({ docker: fx.docker, execAgent: { binary: BUNDLED_AGENT_BINARY, socketRoot } });
const plain = new DockerSandboxDriver({ docker: fx.docker, execAgent: null });
let sandbox: SandboxHandle;

const run = (
  on: DockerSandboxDriver,
  handle: SandboxHandle,
  argv: string[],
  extra: { stdin?: Uint8Array; env?: Record<string, string>; workdir?: string; timeoutMs?: number; interruptAfterMs?: number } = {},
) =>
  on.exec(handle, { argv, timeoutMs: extra.timeoutMs ?? 20_000, maxOutputBytes: 1 << 20, ...extra });

beforeAll(async () => {
  expect(existsSync(BUNDLED_AGENT_BINARY), `npm run build compiles the agent (needs gcc) at ${BUNDLED_AGENT_BINARY}`).toBe(true);
  await fx.ready();
  sandbox = await driver.create(fx.spec());
});

afterAll(async () => {
  await fx.removeLabelled([fx.workerId]);
  // This file's own socket root: nothing of it outlives the run.
  await rm(socketRoot, { recursive: true, force: true });
});

describe('the exec agent', () => {
  it('is the sandbox main process, not dumpable, running as the sandbox user', async () => {
    const comm = text((await run(driver, sandbox, ['cat', '/proc/1/cmdline'])).stdout);
    // PID 1 is the engine's init; the agent is its child.
    expect(comm).toContain('init');
    const ps = text((await run(driver, sandbox, ['ps', '-o', 'pid,user,args'])).stdout);
    expect(ps).toMatch(/\/\.cairn\/agent \/\.cairn\/run\/a\.sock \d+/);
    // Same uid, yet its memory is closed to the sandbox's processes (PR_SET_DUMPABLE 0).
    const agentPid = /^\s*(\d+)\s+\S+\s+\/\.cairn\/agent/m.exec(ps)?.[1];
    expect(agentPid).toBeDefined();
    const peek = await run(driver, sandbox, ['cat', `/proc/${agentPid}/environ`]);
    expect(peek.exitCode).not.toBe(0);
    expect(text(peek.stderr)).toMatch(/Permission denied/);
  });

  it('relays exit codes, signals, stdout and stderr apart, stdin, env and workdir', async () => {
    const result = await run(driver, sandbox, ['sh', '-c', 'echo out; echo err >&2; cat; echo "$GREETING"; pwd; exit 7'], {
      stdin: new TextEncoder().encode('from stdin\n'),
      env: { GREETING: 'hello agent' },
      workdir: '/out',
    });
    expect(result.exitCode).toBe(7);
    expect(text(result.stdout)).toBe('out\nfrom stdin\nhello agent\n/out\n');
    expect(text(result.stderr)).toBe('err\n');
    expect((await run(driver, sandbox, ['sh', '-c', 'kill -TERM $$'])).exitCode).toBe(143);
    const missing = await run(driver, sandbox, ['no-such-program']);
    expect(missing.exitCode).toBe(127);
    expect(text(missing.stderr)).toContain('no-such-program');
    expect((await run(driver, sandbox, ['true'], { workdir: '/work/absent' })).exitCode).toBe(126);
  });

  it('moves large stdin and stdout whole, and does not wait for a background child forever', async () => {
    const big = new Uint8Array(3 * 1024 * 1024).map((_, i) => i % 251);
    const echoed = await run(driver, sandbox, ['sh', '-c', 'cat > /work/big && wc -c < /work/big && cat /work/big'], { stdin: big });
    expect(echoed.exitCode).toBe(0);
    expect(echoed.stdoutBytes).toBe(big.length + `${big.length}\n`.length);
    const started = Date.now();
    const background = await run(driver, sandbox, ['sh', '-c', 'sleep 30 & echo started']);
    expect(background.exitCode).toBe(0);
    expect(text(background.stdout)).toBe('started\n');
    expect(Date.now() - started).toBeLessThan(5000);
    // Stdin the command never reads is taken off the connection, and the agent serves on.
    expect((await run(driver, sandbox, ['true'], { stdin: big })).exitCode).toBe(0);
    expect(text((await run(driver, sandbox, ['echo', 'still here'])).stdout)).toBe('still here\n');
  });

  it("kills the program's session at the caller's own deadline (interruptAfterMs) and keeps the sandbox, over the agent and docker exec", async () => {
    for (const [how, on] of [
      ['agent', driver],
      ['docker exec', plain],
    ] as const) {
      const kept = await on.create(fx.spec());
      try {
        const started = Date.now();
        const result = await run(on, kept, ['sh', '-c', 'echo begun; sleep 30 & sleep 31; :'], { interruptAfterMs: 500 });
        expect(result, how).toMatchObject({ interrupted: true, limitHit: null, teardown: null });
        expect(Date.now() - started, how).toBeLessThan(10_000);
        expect(text(result.stdout), how).toBe('begun\n');
        const left = await run(on, kept, ['sh', '-c', 'ps -o args | grep "sleep 3[01]" || echo none']);
        expect(text(left.stdout), how).toBe('none\n');
        expect(await fx.engineKnows(kept.id), how).toBe(true);
        // Not interrupted when it ends first; refused when not below the deadline.
        expect((await run(on, kept, ['true'], { interruptAfterMs: 5000 })).interrupted, how).toBeUndefined();
        await expect(run(on, kept, ['true'], { timeoutMs: 1000, interruptAfterMs: 1000 })).rejects.toMatchObject({ code: 'E_INPUT' });
      } finally {
        await on.destroy(kept);
      }
    }
  });

  it('stops a step at its deadline by destroying the sandbox, as over docker exec', async () => {
    const doomed = await driver.create(fx.spec());
    const result = await run(driver, doomed, ['sh', '-c', 'trap "" TERM; setsid sleep 60 & sleep 60'], { timeoutMs: 500 });
    expect(result.limitHit).toBe('E_TIMEOUT');
    expect(result.exitCode).toBeNull();
    expect(result.teardown?.verifiedGone).toBe(true);
    expect(await fx.engineKnows(doomed.id)).toBe(false);
    expect(existsSync(join(socketRoot, fx.workerId, doomed.name))).toBe(false);
  });

  it('refuses every connection but the agent’s own', async () => {
    const socket = join(socketRoot, fx.workerId, sandbox.name, 'a.sock');
    const closed = await new Promise<boolean>((resolve) => {
      const client = connect(socket);
      client.on('close', () => resolve(true));
      client.on('error', () => resolve(true));
      setTimeout(() => resolve(false), 3000);
    });
    expect(closed).toBe(true);
    // Inside, the socket's directory is read-only: nothing can be put beside or instead of it.
    const replace = await run(driver, sandbox, ['sh', '-c', 'rm -f /.cairn/run/a.sock || exit 3; touch /.cairn/run/x || exit 4']);
    expect(replace.exitCode).toBe(3);
    expect(text((await run(driver, sandbox, ['echo', 'served'])).stdout)).toBe('served\n');
  });

  it('hands the agent its token on stdin only: stdin is open once, then closed, and nothing else carries it', async () => {
    const info = await fx.docker.getContainer(sandbox.id).inspect();
    expect(info.Config).toMatchObject({ OpenStdin: true, StdinOnce: true });
    expect(info.Config.Cmd).toEqual(['/.cairn/run/a.sock', expect.stringMatching(/^\d+$/) as string]);
    expect((info.Config.Env ?? []).join('\n')).not.toMatch(/[0-9a-f]{64}/);
    // The init's stdin (the pipe the token came through) is at its end: there is nothing to read.
    const leftover = await run(driver, sandbox, ['sh', '-c', 'timeout 2 cat /proc/1/fd/0 | wc -c']);
    expect(text(leftover.stdout).trim()).toBe('0');
  });

  it('ends the step as gone when the sandbox kills its agent', async () => {
    const victim = await driver.create(fx.spec());
    expect(await codeOf(run(driver, victim, ['sh', '-c', 'kill -9 -1; sleep 5']))).toBe('E_NOT_FOUND');
    await driver.destroy(victim);
    expect(await fx.engineKnows(victim.id)).toBe(false);
  });

  it('does not start a sandbox whose agent cannot come up, and leaves nothing behind', async () => {
    // A static program that is not the agent: busybox exits at once on an applet it does not know.
    const broken = new DockerSandboxDriver({ docker: fx.docker, execAgent: { binary: '/bin/busybox', socketRoot, connectTimeoutMs: 1500 } });
    const spec = fx.spec();
    expect(await codeOf(broken.create(spec))).toBe('E_SANDBOX_START');
    const left = await fx.docker.listContainers({ all: true, filters: { label: [`io.cairn.chain=${spec.labels.chainId}`] } });
    expect(left).toEqual([]);
  });

  it('refuses a socket directory it did not just make: one already there, a link, or a parent of the wrong owner or mode', async () => {
    const refused = async (workerId: string, plant: (workerDir: string, name: string) => Promise<void>) => {
      const spec = fx.spec({ workerId });
      const name = `cairn-${spec.labels.chainId}-1`;
      await mkdir(socketRoot, { recursive: true, mode: 0o700 });
      await plant(join(socketRoot, workerId), name);
      const code = await codeOf(driver.create(spec));
      const left = await fx.docker.listContainers({ all: true, filters: { label: [`io.cairn.chain=${spec.labels.chainId}`] } });
      return { code, left: left.length };
    };
    // Its own directory, planted before the create: neither reused nor removed.
    const plantedWorker = `${fx.workerId}-p1`;
    expect(await refused(plantedWorker, async (dir, name) => mkdir(join(dir, name), { recursive: true, mode: 0o700 }).then(() => chmod(dir, 0o700)))).toEqual({ code: 'E_SANDBOX_START', left: 0 });
    expect((await readdir(join(socketRoot, plantedWorker))).length).toBe(1);
    // The worker's directory as a link elsewhere: nothing is made through it.
    const elsewhere = join(socketRoot, 'elsewhere');
    await mkdir(elsewhere, { recursive: true, mode: 0o700 });
    expect(await refused(`${fx.workerId}-p2`, (dir) => symlink(elsewhere, dir))).toEqual({ code: 'E_SANDBOX_START', left: 0 });
    expect(await readdir(elsewhere)).toEqual([]);
    expect((await lstat(join(socketRoot, `${fx.workerId}-p2`))).isSymbolicLink()).toBe(true);
    // The worker's directory open to others, or someone else's.
    expect(await refused(`${fx.workerId}-p3`, (dir) => mkdir(dir, { mode: 0o700 }).then(() => chmod(dir, 0o755)))).toEqual({ code: 'E_SANDBOX_START', left: 0 });
    expect(await refused(`${fx.workerId}-p4`, (dir) => mkdir(dir, { mode: 0o700 }).then(() => chown(dir, DEFAULT_SANDBOX_USER.uid, DEFAULT_SANDBOX_USER.gid)))).toEqual({ code: 'E_SANDBOX_START', left: 0 });
    // The socket root itself a link.
    const linkedRoot = join('/tmp', `cairn-agent-link-${process.pid}`);
    await symlink(socketRoot, linkedRoot);
    try {
      const linked = new DockerSandboxDriver({ docker: fx.docker, execAgent: { binary: BUNDLED_AGENT_BINARY, socketRoot: linkedRoot } });
      expect(await codeOf(linked.create(fx.spec()))).toBe('E_SANDBOX_START');
    } finally {
      await rm(linkedRoot, { force: true });
    }
    // The worker's own directory, made by the driver, is what it checks: 0700, this process's.
    const made = await lstat(join(socketRoot, fx.workerId));
    expect([made.mode & 0o777, made.uid]).toEqual([0o700, process.getuid?.()]);
    const sandboxDir = await lstat(join(socketRoot, fx.workerId, sandbox.name));
    expect([sandboxDir.mode & 0o777, sandboxDir.uid]).toEqual([0o700, DEFAULT_SANDBOX_USER.uid]);
  });

  it('does not start a sandbox when something else connects first and cannot show the token', async () => {
    const quick = new DockerSandboxDriver({ docker: fx.docker, execAgent: { binary: BUNDLED_AGENT_BINARY, socketRoot, connectTimeoutMs: 2000 } });
    const frame = (type: string, payload: string) => {
      const header = Buffer.alloc(5);
      header.write(type, 0, 'latin1');
      header.writeUInt32BE(Buffer.byteLength(payload), 1);
      return Buffer.concat([header, Buffer.from(payload, 'latin1')]);
    };
    for (const sent of [Buffer.concat([frame('H', 'cairn-agent/2'), frame('A', 'f'.repeat(64))]), frame('H', 'cairn-agent/1'), frame('H', 'cairn-agent/2')]) {
      const spec = fx.spec();
      const socket = join(socketRoot, fx.workerId, `cairn-${spec.labels.chainId}-1`, 'a.sock');
      const creating = codeOf(quick.create(spec));
      // In before the agent: the moment the socket exists.
      let impostor: ReturnType<typeof connect> | null = null;
      for (let i = 0; i < 5000 && impostor === null; i++) {
        if (existsSync(socket)) impostor = connect(socket, () => impostor?.write(sent));
        else await new Promise((resolve) => setTimeout(resolve, 1));
      }
      expect(impostor).not.toBeNull();
      impostor!.on('error', () => undefined);
      expect(await creating).toBe('E_SANDBOX_START');
      impostor!.destroy();
      expect(await fx.docker.listContainers({ all: true, filters: { label: [`io.cairn.chain=${spec.labels.chainId}`] } })).toEqual([]);
      expect(existsSync(join(socketRoot, fx.workerId, `cairn-${spec.labels.chainId}-1`))).toBe(false);
    }
  });

  it('gives a command the environment a docker exec would: the container’s, then its own', async () => {
    const viaExec = await plain.create(fx.spec());
    const env = async (on: DockerSandboxDriver, handle: SandboxHandle) =>
      text((await run(on, handle, ['env'], { env: { STEP_ONLY: 'yes', HOME: '/out' } })).stdout).trim().split('\n').sort();
    const [agentEnv, execEnv] = [await env(driver, sandbox), await env(plain, viaExec)];
    expect(agentEnv).toEqual(execEnv);
    expect(agentEnv).toEqual(expect.arrayContaining(['HOME=/out', 'STEP_ONLY=yes', 'TMPDIR=/tmp', 'HOSTNAME=sandbox']));
    await plain.destroy(viaExec);
  });

  it('hands output to onOutput as the program writes it, over the agent and over docker exec alike', async () => {
    const viaExec = await plain.create(fx.spec());
    for (const [on, handle] of [
      [driver, sandbox],
      [plain, viaExec],
    ] as const) {
      const heard: { at: number; stream: string; text: string }[] = [];
      const t0 = performance.now();
      const result = await on.exec(handle, {
        argv: ['sh', '-c', 'echo first; sleep 1; echo second >&2'],
        timeoutMs: 20_000,
        maxOutputBytes: 1 << 20,
        onOutput: (stream, chunk) => heard.push({ at: performance.now() - t0, stream, text: text(chunk) }),
      });
      const ended = performance.now() - t0;
      expect(heard.map((h) => `${h.stream}:${h.text}`)).toEqual(['stdout:first\n', 'stderr:second\n']);
      // Heard while the program slept, not once it had ended; the result is what it always was.
      expect(ended - heard[0]!.at).toBeGreaterThan(700);
      expect([text(result.stdout), text(result.stderr)]).toEqual(['first\n', 'second\n']);
    }
    // A listener that throws does not break the step.
    const thrown = await plain.exec(viaExec, {
      argv: ['echo', 'still'],
      timeoutMs: 20_000,
      maxOutputBytes: 1 << 20,
      onOutput: () => {
        throw new Error('listener failed');
      },
    });
    expect(text(thrown.stdout)).toBe('still\n');
    await plain.destroy(viaExec);
  });

  it('leaves docker exec as the path when no agent is configured', async () => {
    const handle = await plain.create(fx.spec());
    const info = await fx.docker.getContainer(handle.id).inspect();
    expect(info.HostConfig.Binds ?? []).toEqual([]);
    expect(info.Config.Entrypoint).toEqual(['sleep']);
    const result = await run(plain, handle, ['sh', '-c', 'echo via exec; exit 3']);
    expect(result.exitCode).toBe(3);
    expect(text(result.stdout)).toBe('via exec\n');
    await plain.destroy(handle);
  });
});
