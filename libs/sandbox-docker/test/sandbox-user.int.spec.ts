import type { SandboxHandle } from '@cairn/sandbox';
import { uniqueName } from '@cairn/testing';
import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildBusyboxImage, DEFAULT_SANDBOX_USER, defaultAgentSocketRoot, DockerSandboxDriver } from '../src/index.js';
import { sandboxFixture, text } from './sandbox.fixture.js';

/*
 * The sandbox's own uid/gid (docs/sandbox-hardening.md, "The sandbox user"): every process of a
 * sandbox — its init, the exec agent, every step — runs as it, on the host as inside; what the host
 * makes for the sandbox is its; and a sandbox works whether or not its image names the user.
 */
const fx = sandboxFixture('usr');
// An image of this file's own, built with the default user in its passwd (the shared tag is never rebuilt here).
const tag = `cairn-test/${uniqueName('usr-busybox').toLowerCase()}:1`;
const OTHER = { uid: 65525, gid: 65526 };
const other = new DockerSandboxDriver({ docker: fx.docker, user: OTHER });
const handles: { driver: DockerSandboxDriver; handle: SandboxHandle }[] = [];

async function created(driver: DockerSandboxDriver): Promise<SandboxHandle> {
  const handle = await driver.create({ ...fx.spec(), image: tag });
  handles.push({ driver, handle });
  return handle;
}

const run = async (driver: DockerSandboxDriver, handle: SandboxHandle, argv: string[]) => {
  const result = await driver.exec(handle, { argv, timeoutMs: 20_000, maxOutputBytes: 1 << 20 });
  return { exitCode: result.exitCode, stdout: text(result.stdout), stderr: text(result.stderr) };
};

/** Uid and gid (real, effective, saved, fs) of a host process, from /proc. */
async function hostIds(pid: number): Promise<{ uid: string; gid: string }> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  return { uid: /^Uid:\s+(.*)$/m.exec(status)?.[1]?.trim() ?? '', gid: /^Gid:\s+(.*)$/m.exec(status)?.[1]?.trim() ?? '' };
}

/** Host pids of every process in a container's cgroup (its init, the agent, whatever runs). */
async function containerPids(id: string): Promise<number[]> {
  const top = (await fx.docker.getContainer(id).top({ ps_args: '-o pid' })) as { Processes: string[][] };
  return top.Processes.map((row) => Number(row[0]));
}

beforeAll(async () => {
  await buildBusyboxImage({ docker: fx.docker, tag });
});

afterAll(async () => {
  for (const { driver, handle } of handles) await driver.destroy(handle).catch(() => undefined);
  await fx.removeLabelled([fx.workerId]);
  await fx.docker
    .getImage(tag)
    .remove({ force: true })
    .catch(() => undefined);
});

describe('the sandbox user', () => {
  it('is 65520:65520 by default: no account of this host, and the name the image gives it', async () => {
    const passwd = await readFile('/etc/passwd', 'utf8');
    const group = await readFile('/etc/group', 'utf8');
    expect(passwd.split('\n').some((line) => line.split(':')[2] === String(DEFAULT_SANDBOX_USER.uid))).toBe(false);
    expect(group.split('\n').some((line) => line.split(':')[2] === String(DEFAULT_SANDBOX_USER.gid))).toBe(false);

    const handle = await created(fx.driver);
    expect(await run(fx.driver, handle, ['id'])).toMatchObject({ exitCode: 0, stdout: 'uid=65520(sandbox) gid=65520(sandbox) groups=65520(sandbox)\n' });
    expect((await run(fx.driver, handle, ['whoami'])).stdout).toBe('sandbox\n');
  });

  it('is every process of the sandbox on the host too, and owns what the host made for it', async () => {
    const handle = await created(fx.driver);
    // A step still running when the host looks.
    const step = fx.driver.exec(handle, { argv: ['sleep', '2'], timeoutMs: 20_000, maxOutputBytes: 1024 });
    await new Promise((resolve) => setTimeout(resolve, 500));
    const pids = await containerPids(handle.id);
    // The init, the exec agent and the step (at least).
    expect(pids.length).toBeGreaterThanOrEqual(3);
    for (const pid of pids) expect(await hostIds(pid), `pid ${pid}`).toEqual({ uid: '65520\t65520\t65520\t65520', gid: '65520\t65520\t65520\t65520' });
    expect((await step).exitCode).toBe(0);
    // The agent's socket directory on the host is the sandbox user's and no one else's.
    const info = await fx.docker.getContainer(handle.id).inspect();
    const dir = (info.HostConfig.Binds ?? []).find((bind) => bind.endsWith(':/.cairn/run:ro'))?.split(':')[0] ?? '';
    expect(dir.startsWith(join(defaultAgentSocketRoot(), fx.workerId))).toBe(true);
    const owner = await stat(dir);
    expect([owner.uid, owner.gid]).toEqual([65520, 65520]);
  });

  it('need not be in the image: a worker configured with another uid/gid runs on the same image', async () => {
    const handle = await created(other);
    // `id` names no one; the tools that look the user up say so and go on.
    expect(await run(other, handle, ['id'])).toMatchObject({ exitCode: 0, stdout: 'uid=65525 gid=65526 groups=65526\n' });
    expect(await run(other, handle, ['whoami'])).toMatchObject({ exitCode: 1, stderr: 'whoami: unknown uid 65525\n' });
    expect((await run(other, handle, ['sh', '-c', 'echo "$HOME"; cd && pwd && echo made > x && ls -ln x'])).stdout).toMatch(/^\/work\n\/work\n-rw-r--r-- +1 65525 +65526 .* x\n$/);
    // The writable mounts are its (the tmpfs uid=/gid= options), the secrets tmpfs its group's.
    expect((await run(other, handle, ['stat', '-c', '%n %u %g %a', '/work', '/out', '/run/secrets'])).stdout).toBe('/work 65525 65526 755\n/out 65525 65526 755\n/run/secrets 0 65526 750\n');
    // Files in and out, and secrets, as for the default user.
    await other.putFiles(handle, [{ path: '/work/in.txt', content: new TextEncoder().encode('in\n') }]);
    expect((await run(other, handle, ['stat', '-c', '%u %g', '/work/in.txt'])).stdout).toBe('65525 65526\n');
    const [out] = await other.getFiles(handle, ['/work/in.txt'], 1024);
    expect(text(out!.content)).toBe('in\n');
    await other.putSecrets(handle, [{ name: 'TOKEN', value: new TextEncoder().encode('s3cret') }]);
    expect(await run(other, handle, ['cat', '/run/secrets/TOKEN'])).toMatchObject({ exitCode: 0, stdout: 's3cret' });
    expect((await run(other, handle, ['stat', '-c', '%u %g %a', '/run/secrets/TOKEN'])).stdout).toBe('0 65526 440\n');
  });
});
