import type { SandboxHandle } from '@cairn/sandbox';
import { startSecondDockerEngine, uniqueName } from '@cairn/testing';
import type { SecondDockerEngine } from '@cairn/testing';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  BUNDLED_AGENT_BINARY,
  buildBusyboxImage,
  createDockerClient,
  DEFAULT_SANDBOX_USER,
  DockerSandboxDriver,
  engineUserns,
  SECCOMP_PROBE_BINARY,
} from '../src/index.js';
import { text } from './sandbox.fixture.js';

/*
 * User-namespace remapping where the engine has it: this machine's engine does not remap, so the
 * test starts a second `dockerd --userns-remap=default` of its own (@cairn/testing) and runs a
 * sandbox there with the driver as it is: the sandbox user is 65520 inside and the remapped uid
 * outside, its exec agent still connects (its socket is owned by the remapped uid), and the
 * seccomp profile holds. Everything of the second engine is removed afterwards.
 */
let engine: SecondDockerEngine;
let driver: DockerSandboxDriver;
let socketRoot = '';
let sandbox: SandboxHandle;
const workerId = uniqueName('userns-wrk');

const run = async (argv: string[]) => {
  const result = await driver.exec(sandbox, { argv, timeoutMs: 20_000, maxOutputBytes: 1 << 20 });
  return { exitCode: result.exitCode, stdout: text(result.stdout), stderr: text(result.stderr) };
};

let docker0Before = false;

beforeAll(async () => {
  docker0Before = existsSync('/sys/class/net/docker0');
  engine = await startSecondDockerEngine();
  const docker = createDockerClient(engine.socketPath);
  socketRoot = await mkdtemp(join(tmpdir(), 'cairn-agent-userns-'));
  await buildBusyboxImage({ docker });
  driver = new DockerSandboxDriver({ docker, execAgent: { binary: BUNDLED_AGENT_BINARY, socketRoot } });
  sandbox = await driver.create({
    image: 'cairn/sandbox-busybox:1',
    caps: { wallSeconds: 30, memoryMiB: 32, pids: 32, diskMiB: 8, cpus: 0.5 },
    labels: { workerId, chainId: `run_${uniqueName('userns').toLowerCase()}` },
  });
}, 180_000);

afterAll(async () => {
  if (sandbox !== undefined) await driver.destroy(sandbox).catch(() => undefined);
  await driver?.closePool();
  await engine?.stop();
  if (socketRoot !== '') await rm(socketRoot, { recursive: true, force: true });
}, 120_000);

describe('a sandbox on an engine that remaps user namespaces', () => {
  it("leaves the host's network as it was: the machine engine's docker0 bridge is still there", () => {
    // A dockerd with --bridge=none in the host's namespace deletes docker0 as it starts (moby's removeDefaultBridgeInterface).
    expect(docker0Before).toBe(true);
    expect(existsSync('/sys/class/net/docker0')).toBe(true);
  });

  it('is told by `docker info` (and its data root names the ids)', async () => {
    expect(await engineUserns(createDockerClient(engine.socketPath))).toEqual({ remapped: true, base: engine.base });
    // This machine's own engine does not remap.
    expect(await engineUserns(createDockerClient())).toEqual({ remapped: false, base: null });
  });

  it('runs as the sandbox user inside and as the remapped uid on the host, its exec agent included', async () => {
    expect(await run(['id'])).toMatchObject({ exitCode: 0, stdout: expect.stringMatching(/^uid=65520(\(sandbox\))? gid=65520(\(sandbox\))? /) as string });
    const inside = (await run(['cat', '/proc/self/uid_map'])).stdout.trim().split(/\s+/).map(Number);
    expect(inside).toEqual([0, engine.base.uid, 65536]);

    const docker = createDockerClient(engine.socketPath);
    const step = driver.exec(sandbox, { argv: ['sleep', '2'], timeoutMs: 20_000, maxOutputBytes: 1024 });
    await new Promise((resolve) => setTimeout(resolve, 500));
    const top = (await docker.getContainer(sandbox.id).top({ ps_args: '-o pid,args' })) as { Processes: string[][] };
    const pids = top.Processes.map((row) => Number(row[0]));
    expect(top.Processes.some((row) => (row[1] ?? '').includes('/.cairn/agent'))).toBe(true);
    const hostUid = String(engine.base.uid + DEFAULT_SANDBOX_USER.uid);
    const hostGid = String(engine.base.gid + DEFAULT_SANDBOX_USER.gid);
    for (const pid of pids) {
      const status = await readFile(`/proc/${pid}/status`, 'utf8');
      expect(/^Uid:\s+(.*)$/m.exec(status)?.[1]?.split(/\s+/), `pid ${pid}`).toEqual([hostUid, hostUid, hostUid, hostUid]);
      expect(/^Gid:\s+(.*)$/m.exec(status)?.[1]?.split(/\s+/), `pid ${pid}`).toEqual([hostGid, hostGid, hostGid, hostGid]);
    }
    expect((await step).exitCode).toBe(0);

    // What the host made for it is the remapped uid's: the agent's socket directory; and the tmpfs mounts it was given.
    const info = await docker.getContainer(sandbox.id).inspect();
    const dir = (info.HostConfig.Binds ?? []).find((bind) => bind.endsWith(':/.cairn/run:ro'))?.split(':')[0] ?? '';
    expect(dir.startsWith(join(socketRoot, workerId))).toBe(true);
    const owner = await stat(dir);
    expect([owner.uid, owner.gid]).toEqual([Number(hostUid), Number(hostGid)]);
    const work = await stat(`/proc/${info.State.Pid}/root/work`);
    expect([work.uid, work.gid]).toEqual([Number(hostUid), Number(hostGid)]);
    expect((await run(['stat', '-c', '%u %g', '/work', '/run/secrets'])).stdout).toBe('65520 65520\n0 65520\n');
  });

  it('keeps the seccomp profile and the rest of the hardening', async () => {
    await driver.putFiles(sandbox, [{ path: '/work/seccomp-probe', content: readFileSync(SECCOMP_PROBE_BINARY), mode: 0o755 }]);
    const probe = await run(['/work/seccomp-probe']);
    expect(probe.exitCode).toBe(0);
    const lines = probe.stdout.trim().split('\n');
    expect(lines.pop()).toBe('done');
    const seen = Object.fromEntries(lines.map((line) => line.split(' ') as [string, string]));
    expect(Object.entries(seen).filter(([, answer]) => answer !== 'EPERM').sort()).toEqual([
      ['clone3_newuser', 'ENOSYS'],
      ['clone_plain', 'ok'],
      ['getpid', 'ok'],
    ]);
    const status = (await run(['cat', '/proc/self/status'])).stdout;
    expect(status).toMatch(/CapEff:\s+0{16}\n/);
    expect(status).toMatch(/NoNewPrivs:\s+1\n/);
    expect(status).toMatch(/Seccomp:\s+2\n/);
  });

  it('cannot run a sandbox user outside the 65536 ids the remapping gives a container: E_SANDBOX_START, nothing left', async () => {
    const docker = createDockerClient(engine.socketPath);
    const outside = new DockerSandboxDriver({ docker, user: { uid: 65536, gid: 65536 }, execAgent: { binary: BUNDLED_AGENT_BINARY, socketRoot } });
    const chainId = `run_${uniqueName('userns-out').toLowerCase()}`;
    await expect(
      outside.create({ image: 'cairn/sandbox-busybox:1', caps: { wallSeconds: 30, memoryMiB: 32, pids: 32, diskMiB: 8, cpus: 0.5 }, labels: { workerId, chainId } }),
    ).rejects.toMatchObject({ code: 'E_SANDBOX_START' });
    expect(await docker.listContainers({ all: true, filters: { label: [`io.cairn.chain=${chainId}`] } })).toEqual([]);
  });

  it('leaves nothing behind once destroyed', async () => {
    expect(await driver.destroy(sandbox)).toEqual({ verifiedGone: true });
  });
});
