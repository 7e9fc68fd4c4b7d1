import type { ExecResult, SandboxHandle } from '@cairn/sandbox';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DockerSandboxDriver } from '../src/index.js';
import { pidAlive, sandboxFixture } from './sandbox.fixture.js';

/*
 * Each cap hit for real on the real engine, detected from the kernel's counters (never from the
 * exit code), and each followed by a sandbox the engine no longer knows.
 */

const fx = sandboxFixture('lim');
const fromInside = new DockerSandboxDriver({ docker: fx.docker, probes: 'sandbox' });

beforeAll(async () => {
  await fx.ready();
});

afterAll(async () => {
  await fx.removeLabelled([fx.workerId]);
});

async function expectGone(handle: SandboxHandle, result: ExecResult): Promise<void> {
  expect(result.teardown).toEqual({ verifiedGone: true });
  expect(await fx.engineKnows(handle.id)).toBe(false);
}

describe.concurrent('caps, hit for real', () => {
  it('E_TIMEOUT: a busy loop is stopped at the deadline and its sandbox destroyed', async () => {
    const handle = await fx.driver.create(fx.spec());
    const result = await fx.driver.exec(handle, { argv: ['sh', '-c', 'while :; do :; done'], timeoutMs: 1000, maxOutputBytes: 1024 });
    expect(result).toMatchObject({ limitHit: 'E_TIMEOUT', exitCode: null });
    expect(result.durationMs).toBeGreaterThanOrEqual(1000);
    expect(result.durationMs).toBeLessThan(10_000);
    await expectGone(handle, result);
  });

  it('E_TIMEOUT: a TERM-ignoring child in its own session (out of reach of a group kill) dies with the sandbox', async () => {
    const handle = await fx.driver.create(fx.spec());
    const step = fx.driver.exec(handle, {
      argv: ['sh', '-c', `setsid sh -c 'trap "" TERM HUP INT; while :; do :; done' & sleep 60`],
      timeoutMs: 3000,
      maxOutputBytes: 1024,
    });
    let escaped: number | undefined;
    for (let i = 0; i < 40 && escaped === undefined; i++) {
      await sleep(50);
      const top = (await fx.docker.getContainer(handle.id).top({ ps_args: '-o pid,sid,args' })) as { Processes: string[][] };
      // A session leader (pid == sid) running the trap: setsid took it out of the step's group.
      const rows = top.Processes;
      const row = rows.find((p) => p[0] === p[1] && (p[2] ?? '').includes('trap'));
      if (row !== undefined) escaped = Number(row[0]);
    }
    expect(escaped).toBeDefined();
    const result = await step;
    expect(result).toMatchObject({ limitHit: 'E_TIMEOUT', exitCode: null });
    await expectGone(handle, result);
    expect(await pidAlive(escaped!)).toBe(false);
  });

  it('E_MEM_LIMIT: a memory balloon is OOM-killed, seen in the cgroup’s oom_kill counter', async () => {
    const handle = await fx.driver.create(fx.spec({ caps: { memoryMiB: 16, diskMiB: 8 } }));
    const result = await fx.driver.exec(handle, {
      argv: ['sh', '-c', 'x=aaaaaaaaaaaaaaaa; while :; do x="$x$x"; done'],
      timeoutMs: 20_000,
      maxOutputBytes: 1024,
    });
    expect(result.limitHit).toBe('E_MEM_LIMIT');
    expect(result.limits[0]?.evidence).toMatch(/^oom_kill \d+→\d+$/);
    expect(result.durationMs).toBeLessThan(15_000);
    await expectGone(handle, result);
  });

  it('E_PROC_LIMIT: a fork bomb is stopped as soon as the pids cap refuses a fork', async () => {
    const handle = await fx.driver.create(fx.spec({ caps: { pids: 16 } }));
    const result = await fx.driver.exec(handle, { argv: ['sh', '-c', 'f(){ f|f& }; f; wait'], timeoutMs: 20_000, maxOutputBytes: 1024 });
    expect(result.limitHit).toBe('E_PROC_LIMIT');
    expect(result.limits[0]?.evidence).toMatch(/^pids\.events max \d+→\d+$/);
    expect(result.durationMs).toBeLessThan(15_000);
    await expectGone(handle, result);
  });

  it('E_DISK_LIMIT: filling /work meets ENOSPC at its tmpfs size', async () => {
    const handle = await fx.driver.create(fx.spec({ caps: { diskMiB: 8 } }));
    const result = await fx.driver.exec(handle, {
      argv: ['dd', 'if=/dev/zero', 'of=/work/fill', 'bs=1M', 'count=64'],
      timeoutMs: 20_000,
      maxOutputBytes: 4096,
    });
    expect(result.limitHit).toBe('E_DISK_LIMIT');
    expect(result.limits[0]?.evidence).toBe('/work: 0 free blocks');
    await expectGone(handle, result);
  });

  it('E_DISK_LIMIT: a flood of empty files meets the inode cap', async () => {
    const handle = await fx.driver.create(fx.spec({ caps: { diskMiB: 8 } }));
    const result = await fx.driver.exec(handle, {
      argv: ['sh', '-c', 'i=0; while touch /work/f$i 2>/dev/null; do i=$((i+1)); done'],
      timeoutMs: 20_000,
      maxOutputBytes: 4096,
    });
    expect(result.limitHit).toBe('E_DISK_LIMIT');
    expect(result.limits[0]?.evidence).toBe('/work: 0 free inodes');
    await expectGone(handle, result);
  });

  it('E_TIMEOUT: an endless stdout is bounded until the deadline', async () => {
    const handle = await fx.driver.create(fx.spec());
    const result = await fx.driver.exec(handle, { argv: ['yes'], timeoutMs: 1000, maxOutputBytes: 4096 });
    expect(result).toMatchObject({ limitHit: 'E_TIMEOUT', truncated: true });
    expect(result.stdout.length).toBe(4096);
    expect(result.stdoutBytes).toBeGreaterThan(4096);
    await expectGone(handle, result);
  });
});

describe.concurrent('caps, read from inside the sandbox (when the host cannot look)', () => {
  it('says where each cap is read from', async () => {
    const handle = await fromInside.create(fx.spec());
    expect(await fromInside.coverage(handle)).toEqual({ memory: 'sandbox', pids: 'sandbox', disk: 'sandbox' });
    expect(await fromInside.destroy(handle)).toEqual({ verifiedGone: true });
  });

  it('E_MEM_LIMIT from the container’s own oom_kill counter', async () => {
    const handle = await fromInside.create(fx.spec({ caps: { memoryMiB: 16, diskMiB: 8 } }));
    const result = await fromInside.exec(handle, {
      argv: ['sh', '-c', 'x=aaaaaaaaaaaaaaaa; while :; do x="$x$x"; done'],
      timeoutMs: 20_000,
      maxOutputBytes: 1024,
    });
    expect(result.limitHit).toBe('E_MEM_LIMIT');
    await expectGone(handle, result);
  });

  it('E_PROC_LIMIT from the container’s own pids.events, once the bomb has burnt out', async () => {
    const handle = await fromInside.create(fx.spec({ caps: { pids: 16 } }));
    const result = await fromInside.exec(handle, { argv: ['sh', '-c', 'f(){ f|f& }; f; wait'], timeoutMs: 20_000, maxOutputBytes: 1024 });
    expect(result.limitHit).toBe('E_PROC_LIMIT');
    await expectGone(handle, result);
  });

  it('E_DISK_LIMIT from stat -f inside the sandbox after the step', async () => {
    const handle = await fromInside.create(fx.spec({ caps: { diskMiB: 8 } }));
    const result = await fromInside.exec(handle, {
      argv: ['dd', 'if=/dev/zero', 'of=/out/fill', 'bs=1M', 'count=64'],
      timeoutMs: 20_000,
      maxOutputBytes: 4096,
    });
    expect(result.limitHit).toBe('E_DISK_LIMIT');
    expect(result.limits[0]?.evidence).toBe('/out: 0 free blocks');
    await expectGone(handle, result);
  });
});
