import { buildBusyboxImage, createDockerClient, DEFAULT_SANDBOX_USER, ensureBusyboxImage, sandboxSeccomp } from '@cairn/sandbox-docker';
import type { SandboxHandle } from '@cairn/sandbox';
import { startSecondDockerEngine, uniqueName } from '@cairn/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SandboxEngine } from '../src/sandbox-engine.adapter.js';
import { confirmedHardening, hardeningProblems } from '../src/sandbox-hardening.js';

/*
 * The check at start against the real engine: a sandbox this worker creates passes every
 * comparison docs/sandbox-hardening.md promises (sandbox-hardening.unit.spec.ts shows each field's
 * mismatch refused); a worker required to remap user namespaces refuses one on this engine, which
 * does not remap, and passes one on a second engine of the test's own that does.
 */
const docker = createDockerClient();
const workerId = uniqueName('hardening-wrk').toLowerCase();
const caps = { wallSeconds: 30, memoryMiB: 32, pids: 32, diskMiB: 8, cpus: 0.5 };
const spec = () => ({ image: 'cairn/sandbox-busybox:1', caps, labels: { workerId, chainId: `run_${uniqueName('hardening').toLowerCase()}` } });

let engine: SandboxEngine;
const handles: SandboxHandle[] = [];

beforeAll(async () => {
  await ensureBusyboxImage({ docker });
  engine = new SandboxEngine({ socketPath: '/var/run/docker.sock', probes: 'auto' });
});

afterAll(async () => {
  for (const handle of handles) await engine.driver.destroy(handle).catch(() => undefined);
  await engine.closePool();
  const left = await docker.listContainers({ all: true, filters: { label: [`io.cairn.worker=${workerId}`] } });
  await Promise.all(left.map((c) => docker.getContainer(c.Id).remove({ force: true }).catch(() => undefined)));
});

describe('the hardening check at start, on this engine', () => {
  it('passes a sandbox this worker creates, and records what the engine reports', async () => {
    const handle = await engine.createSandbox(spec());
    handles.push(handle);
    const inspected = await engine.inspectSandbox(handle);
    expect(hardeningProblems(inspected, handle.caps)).toEqual([]);
    expect(confirmedHardening(inspected, handle.caps)).toMatchObject({
      user: `${DEFAULT_SANDBOX_USER.uid}:${DEFAULT_SANDBOX_USER.gid}`,
      seccomp: 'custom',
      seccomp_profile_sha256: sandboxSeccomp().sha256.slice('sha256:'.length),
      userns_remap: false,
      no_new_privileges: true,
    });
    // What the engine shows is what was checked: the agent's two binds, read-only and private.
    expect(inspected.mounts.map((m) => [(m as { Destination: string }).Destination, (m as { RW: boolean }).RW, (m as { Propagation: string }).Propagation]).sort()).toEqual([
      ['/.cairn/agent', false, 'rprivate'],
      ['/.cairn/run', false, 'rprivate'],
    ]);
  });

  it('passes a warm sandbox handed to a run too (its socket directory is named for its pool)', async () => {
    const pooled = new SandboxEngine({ socketPath: '/var/run/docker.sock', probes: 'auto', warmPool: { perProfile: 1, total: 1 } });
    try {
      const first = await pooled.createSandbox(spec());
      handles.push(first);
      await pooled.driver.destroy(first);
      for (let i = 0; i < 100 && pooled.warmCount === 0; i++) await new Promise((resolve) => setTimeout(resolve, 100));
      expect(pooled.warmCount).toBe(1);
      const claimed = await pooled.createSandbox(spec());
      handles.push(claimed);
      expect(pooled.warmCount).toBe(0);
      const inspected = await pooled.inspectSandbox(claimed);
      expect(hardeningProblems(inspected, claimed.caps)).toEqual([]);
      await pooled.driver.destroy(claimed);
    } finally {
      await pooled.closePool();
    }
  });

  it('refuses (E_SANDBOX_START) every sandbox of a worker required to remap user namespaces: this engine does not', async () => {
    const strict = new SandboxEngine({ socketPath: '/var/run/docker.sock', probes: 'auto', requireUserns: true });
    expect(await strict.userns()).toEqual({ remapped: false, base: null });
    const handle = await strict.createSandbox(spec());
    handles.push(handle);
    const inspected = await strict.inspectSandbox(handle);
    expect(hardeningProblems(inspected, handle.caps)).toEqual(['the engine does not remap user namespaces, and this worker must (CAIRN_SANDBOX_REQUIRE_USERNS)']);
    expect(() => confirmedHardening(inspected, handle.caps)).toThrow(expect.objectContaining({ code: 'E_SANDBOX_START' }) as Error);
    await strict.driver.destroy(handle);
  });

  it('refuses a sandbox whose user is not the one this worker promises', async () => {
    const other = new SandboxEngine({ socketPath: '/var/run/docker.sock', probes: 'auto', user: { uid: 65521, gid: 65521 } });
    const handle = await other.createSandbox(spec());
    handles.push(handle);
    const inspected = await other.inspectSandbox(handle);
    expect(hardeningProblems(inspected, handle.caps)).toEqual([]);
    // The same container, held to the default user's promise.
    const problems = hardeningProblems({ ...inspected, promised: { ...inspected.promised, user: DEFAULT_SANDBOX_USER } }, handle.caps);
    expect(problems).toEqual(
      expect.arrayContaining([
        `the user is "65521:65521", not ${DEFAULT_SANDBOX_USER.uid}:${DEFAULT_SANDBOX_USER.gid}`,
        expect.stringMatching(/^the tmpfs at \/work is/),
        expect.stringMatching(/^the tmpfs at \/run\/secrets is/),
      ]),
    );
    await other.driver.destroy(handle);
  });
});

describe('the hardening check at start, on an engine that remaps user namespaces', () => {
  it('passes a sandbox of a worker required to remap, and records the remapping', async () => {
    const second = await startSecondDockerEngine();
    try {
      await buildBusyboxImage({ docker: createDockerClient(second.socketPath) });
      const remapped = new SandboxEngine({ socketPath: second.socketPath, probes: 'auto', requireUserns: true });
      expect(await remapped.userns()).toEqual({ remapped: true, base: second.base });
      const handle = await remapped.createSandbox(spec());
      try {
        const inspected = await remapped.inspectSandbox(handle);
        expect(hardeningProblems(inspected, handle.caps)).toEqual([]);
        expect(confirmedHardening(inspected, handle.caps)).toMatchObject({ user: '65520:65520', seccomp: 'custom', userns_remap: true });
      } finally {
        expect(await remapped.driver.destroy(handle)).toEqual({ verifiedGone: true });
        await remapped.closePool();
      }
    } finally {
      await second.stop();
    }
  }, 180_000);
});
