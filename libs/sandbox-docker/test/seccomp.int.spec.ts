import type { SandboxHandle } from '@cairn/sandbox';
import { uniqueName } from '@cairn/testing';
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { rm, writeFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BUSYBOX_IMAGE_TAG, REFUSED_SYSCALLS, SECCOMP_PROBE_BINARY, sandboxSeccomp } from '../src/index.js';
import { sandboxFixture, text } from './sandbox.fixture.js';

/*
 * Cairn's seccomp profile (seccomp/README.md) against the real engine and kernel: the probe
 * (agent/seccomp-probe.c) calls each refused syscall in a sandbox the driver made and every one is
 * refused; ordinary programs still run. The same probe in containers this test makes shows that the
 * refusals are the profile's doing: unconfined, the kernel answers most of them otherwise; under
 * Docker's own profile io_uring and ptrace go through; with CAP_SYS_ADMIN, Docker's profile lets
 * the mount calls through and Cairn's does not.
 */
const run = promisify(execFile);
const fx = sandboxFixture('scmp');
const label = `io.cairn.test=${uniqueName('seccomp')}`;
let sandbox: SandboxHandle;
let profileFile = '';

/** The probe's report, call → answer (`EPERM`, `ENOSYS`, `ok`, …). */
function answers(stdout: string): Record<string, string> {
  const lines = stdout.trim().split('\n');
  expect(lines.at(-1)).toBe('done');
  return Object.fromEntries(lines.slice(0, -1).map((line) => line.split(' ') as [string, string]));
}

/** The probe in a plain container of this test's own (not a sandbox): `options` are `docker run` flags. */
async function probeIn(options: string[]): Promise<Record<string, string>> {
  const { stdout } = await run('docker', [
    'run', '--rm', '--label', label, '--network', 'none', '--read-only', '--cap-drop', 'ALL', '--security-opt', 'no-new-privileges',
    '-v', `${SECCOMP_PROBE_BINARY}:/probe:ro`, ...options, BUSYBOX_IMAGE_TAG, '/probe',
  ]);
  return answers(stdout);
}

/** The calls the kernel answers by checking its arguments first: EPERM from them is seccomp's alone. */
const ARGUMENT_CHECKED = [
  'io_uring_enter', 'io_uring_register', 'ptrace', 'keyctl', 'add_key', 'request_key', 'bpf', 'userfaultfd',
  'perf_event_open', 'mount', 'umount2', 'mount_setattr', 'open_tree', 'fsconfig',
];
/** The calls the kernel refuses without CAP_SYS_ADMIN before it looks at anything else. */
const CAPABILITY_CHECKED = ['fsopen', 'fsmount', 'move_mount', 'fspick', 'pivot_root'];
/** Calls, named as the probe reports them, Cairn's profile must refuse; and how. */
const REFUSED: Record<string, string> = {
  ...Object.fromEntries([...ARGUMENT_CHECKED, ...CAPABILITY_CHECKED, 'io_uring_setup'].map((name) => [name, 'EPERM'])),
  clone_newuser: 'EPERM',
  clone3_newuser: 'ENOSYS',
  unshare_newuser: 'EPERM',
};

beforeAll(async () => {
  expect(existsSync(SECCOMP_PROBE_BINARY), `npm run build compiles the probe (needs gcc) at ${SECCOMP_PROBE_BINARY}`).toBe(true);
  await fx.ready();
  sandbox = await fx.driver.create(fx.spec());
  await fx.driver.putFiles(sandbox, [{ path: '/work/seccomp-probe', content: readFileSync(SECCOMP_PROBE_BINARY), mode: 0o755 }]);
  // The profile as a file, for `docker run --security-opt seccomp=<file>` (the CLI sends its contents, as the driver does).
  profileFile = `/tmp/${uniqueName('cairn-seccomp')}.json`;
  await writeFile(profileFile, sandboxSeccomp().json);
});

afterAll(async () => {
  await fx.removeLabelled([fx.workerId]);
  const { stdout } = await run('docker', ['ps', '-aq', '--filter', `label=${label}`]);
  for (const id of stdout.split('\n').filter((line) => line !== '')) await run('docker', ['rm', '-f', id]).catch(() => undefined);
  if (profileFile !== '') await rm(profileFile, { force: true });
});

describe("Cairn's seccomp profile", () => {
  it('refuses every listed call in a sandbox, and ordinary programs still run', async () => {
    const probe = await fx.driver.exec(sandbox, { argv: ['/work/seccomp-probe'], timeoutMs: 20_000, maxOutputBytes: 1 << 16 });
    expect(probe.exitCode).toBe(0);
    const seen = answers(text(probe.stdout));
    expect(seen).toEqual({ ...REFUSED, clone_plain: 'ok', getpid: 'ok' });
    // Every syscall the profile refuses by name is one the probe called (umount is umount2 on this architecture).
    const called = new Set(Object.keys(REFUSED).map((name) => name.replace(/_newuser$/, '')));
    expect(REFUSED_SYSCALLS.filter((name) => !called.has(name) && name !== 'umount')).toEqual([]);

    const ordinary = await fx.driver.exec(sandbox, {
      argv: ['sh', '-c', 'echo hello | sha256sum && (sleep 0.1 & wait) && tar -cf /tmp/w.tar -C /work . && tar -tf /tmp/w.tar | grep -c seccomp-probe && ps -o pid | wc -l'],
      timeoutMs: 20_000,
      maxOutputBytes: 1 << 16,
    });
    expect(ordinary.exitCode).toBe(0);
    expect(text(ordinary.stdout)).toMatch(/^5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03 {2}-\n1\n\d+\n$/);
  });

  it('is the reason: unconfined, the kernel answers the argument-checked calls otherwise (the probe can tell)', async () => {
    const seen = await probeIn(['--security-opt', 'seccomp=unconfined', '--user', '65520:65520']);
    for (const name of ARGUMENT_CHECKED) expect(seen[name], name).not.toBe('EPERM');
    // Without CAP_SYS_ADMIN these five are refused by the kernel before anything else.
    for (const name of CAPABILITY_CHECKED) expect(seen[name], name).toBe('EPERM');
    expect(seen.clone_plain).toBe('ok');
  });

  it("refuses what Docker's own profile lets an unprivileged process do: io_uring and ptrace", async () => {
    const seen = await probeIn(['--user', '65520:65520']);
    expect(seen.io_uring_enter).not.toBe('EPERM');
    expect(seen.io_uring_register).not.toBe('EPERM');
    expect(seen.ptrace).not.toBe('EPERM');
    // The rest Docker's profile refuses too (without capabilities), and clone3 answers ENOSYS.
    for (const name of ['keyctl', 'add_key', 'request_key', 'bpf', 'userfaultfd', 'perf_event_open', 'mount', 'umount2', 'open_tree', 'fsconfig', 'clone_newuser', 'unshare_newuser']) {
      expect(seen[name], name).toBe('EPERM');
    }
    expect(seen.clone3_newuser).toBe('ENOSYS');
  });

  it('refuses them with CAP_SYS_ADMIN and CAP_SYS_PTRACE too, where Docker’s profile lets the mount calls and new namespaces through', async () => {
    const privileged = ['--user', '0:0', '--cap-add', 'SYS_ADMIN', '--cap-add', 'SYS_PTRACE'];
    const docker = await probeIn(privileged);
    for (const name of ['mount', 'umount2', 'open_tree', 'fsconfig', 'fsopen', 'fsmount', 'move_mount', 'fspick', 'bpf', 'perf_event_open', 'clone_newuser', 'clone3_newuser', 'unshare_newuser']) {
      expect(docker[name], name).not.toBe('EPERM');
    }
    const ours = await probeIn([...privileged, '--security-opt', `seccomp=${profileFile}`]);
    expect(ours).toEqual({ ...REFUSED, clone_plain: 'ok', getpid: 'ok' });
  });
});
