import { createHash, randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { expect } from 'vitest';
import { SINK_PORT } from './egress-sink.js';
import type { EgressSink } from './egress-sink.js';

// Loaded lazily, as everywhere in the CLI: the sandbox user, Cairn's seccomp profile and the probe's path.
const { DEFAULT_SANDBOX_USER, SECCOMP_PROBE_BINARY, sandboxSeccomp } = await import('@cairn/sandbox-docker');

/*
 * The hostile workloads, one row each: what a user (or an agent) submits, and what Cairn must do
 * with it. `hostile.hostile.spec.ts` submits every row through the REST gateway of one isolated
 * stack, together, and checks each against its row. A new attack is a new row; a feature that
 * changes an outcome (an output-bytes budget, the egress proxy, the secret store) changes its row.
 */

export const BUSYBOX = 'cairn/sandbox-busybox:1';
/** Small caps, so every limit is reached in well under a second. */
export const CAPS = { wallSeconds: 5, memoryMiB: 32, pids: 32, diskMiB: 8, cpus: 0.5 };
/** What the stack keeps of each stream of a step's output (CAIRN_STEP_OUTPUT_MAX_BYTES). */
export const OUTPUT_KEEP_BYTES = 65_536;
/** The policy's output budget: stdout and stderr of one step together. */
export const OUTPUT_BUDGET_BYTES = 1_048_576;

/** The stack's policy (CAIRN_POLICY_FILE): the built-in default, with an output budget per step. */
export const HOSTILE_POLICY = {
  version: 1,
  defaultImage: BUSYBOX,
  images: { allow: [{ name: BUSYBOX }, { name: 'cairn/sandbox-debian:1' }] },
  caps: {
    defaults: { wallSeconds: 60, memoryMiB: 256, pids: 64, diskMiB: 256, cpus: 1 },
    max: { wallSeconds: 600, memoryMiB: 4096, pids: 256, diskMiB: 8192, cpus: 4 },
  },
  network: { egress: 'deny' },
  approvals: { rules: [{ when: 'apply_step' }] },
  budgets: { runsPerJob: 6, jobMinutes: 90, outputBytesPerStep: OUTPUT_BUDGET_BYTES },
};

/** What the test gives a row's own checks. */
export interface WorkloadContext {
  runId: string;
  /** Every receipt of the run, in seq order. */
  receipts: Record<string, unknown>[];
  /** The stored bytes of an artifact (a step's kept stdout or stderr) by its sha256. */
  artifact: (sha256: string) => Promise<Buffer>;
  /** The stack's admin API key: it must never reach a sandbox. */
  apiKey: string;
  /** What `hostFacts` read before the run was submitted. */
  hostBefore: Record<string, string>;
  /** The TCP sink the suite runs; `{{SINK_IP}}` in a spec is its address. */
  sink: EgressSink;
}

/** The step receipt (`step.completed`) of the step that carries the attack. */
export interface StepExpectation {
  index: number;
  /** `null`: the step never exited by itself (killed with its sandbox). Absent: not asserted. */
  exitCode?: number | null;
  /** The kept stderr (read back by the hash the receipt names) must match. */
  stderr?: RegExp;
  stdout?: RegExp;
  /** The cap that stopped the step (`error_code` on its receipt). */
  errorCode?: string;
  /** `limits_hit` must contain these. */
  limits?: string[];
  truncated?: boolean;
}

export interface RunExpectation {
  kind: 'run';
  state: 'SEALED' | 'ROLLBACK' | 'FAILED';
  errorCode: string | null;
  step?: StepExpectation;
  /** How many `step.completed` receipts the run has (steps after a stopped one never start). */
  stepsCompleted?: number;
  /** Anything else the row must show, from the run's receipts and artifacts. */
  check?: (ctx: WorkloadContext) => Promise<void> | void;
}

/** Refused at the door: the gateway answers 400 naming the field, and no run exists. */
export interface RefusedExpectation {
  kind: 'refused';
  status: number;
  code: string;
  field: string;
}

export interface HostileWorkload {
  id: string;
  title: string;
  /** The RunSpec without its name (the suite names each run after its row); `{{SINK_IP}}` is the sink's address. */
  spec: Record<string, unknown>;
  expect: RunExpectation | RefusedExpectation;
  /** Host facts read before submission, handed to `check` (to show the host did not change). */
  hostFacts?: Record<string, () => Promise<string>>;
}

function steps(...argvs: string[][]): { argv: string[] }[] {
  return argvs.map((argv) => ({ argv }));
}

function sh(script: string): string[] {
  return ['sh', '-c', script];
}

function run(stepList: unknown[], more: Record<string, unknown> = {}): Record<string, unknown> {
  return { image: BUSYBOX, network: 'none', caps: CAPS, steps: stepList, ...more };
}

const hostFile = (path: string) => async () => (await readFile(path, 'utf8')).trim();

/** A step the sandbox refuses: it exits non-zero with the kernel's answer on stderr, and the run goes on to its seal. */
function refusedBySandbox(stderr: RegExp, exitCode = 1): RunExpectation {
  return { kind: 'run', state: 'SEALED', errorCode: null, step: { index: 0, exitCode, stderr }, stepsCompleted: 2 };
}

/**
 * The workload ended its own sandbox during step `index` (docs/testing.md, "A workload that ends its
 * own sandbox"): the step has its receipt (it never exited), no later step started, nothing was
 * collected, and the run is executed — verified, graded and sealed on what it did, not failed.
 */
function endedOwnSandbox(index: number, exitCodes: (number | null)[]): RunExpectation {
  return {
    kind: 'run',
    state: 'SEALED',
    errorCode: null,
    step: { index, exitCode: null, limits: [] },
    stepsCompleted: index + 1,
    check: ({ receipts }) => {
      expect(receipts.find((r) => r.type === 'run.executed')).toMatchObject({ steps_completed: index + 1, exit_codes: exitCodes, artifact_hashes: {} });
      expect(receipts.filter((r) => r.type === 'step.started').map((r) => r.step_index)).toEqual(exitCodes.map((_, i) => i));
      expect(receipts.find((r) => r.type === 'sandbox.destroyed')).toMatchObject({ reason: 'failed', verified_gone: true });
      expect(receipts.some((r) => r.type === 'run.failed')).toBe(false);
      const verification = receipts.find((r) => r.type === 'verification.completed') as { chain_ok: boolean; invariants: { id: string; ok: boolean }[] } | undefined;
      expect(verification?.chain_ok).toBe(true);
      expect(verification?.invariants.find((i) => i.id === 'every_started_step_completed')?.ok).toBe(true);
    },
  };
}

/** A second step after every refused attack: the sandbox is still usable and unchanged. */
const STILL_THERE = ['echo', 'still here'];
/** Written beside an output that is refused: it must reach the artifact store neither. */
const BESIDE_REFUSED = `beside-a-refused-output-${randomBytes(8).toString('hex')}\n`;
const BESIDE_REFUSED_SHA256 = createHash('sha256').update(BESIDE_REFUSED).digest('hex');

/** No `run.executed` and nothing of the outputs stored: a refused collection keeps nothing. */
async function nothingCollected({ receipts, artifact }: WorkloadContext): Promise<void> {
  expect(receipts.find((r) => r.type === 'run.executed')).toBeUndefined();
  await expect(artifact(BESIDE_REFUSED_SHA256)).rejects.toThrow();
}

/**
 * The seccomp probe (libs/sandbox-docker/agent/seccomp-probe.c, built by `npm run build` with the
 * host's C compiler): a few kilobytes, sent as an input file of the RunSpec like any user's program.
 */
function seccompProbe(): string {
  if (!existsSync(SECCOMP_PROBE_BINARY)) throw new Error(`npm run build compiles the seccomp probe (needs gcc) at ${SECCOMP_PROBE_BINARY}`);
  return readFileSync(SECCOMP_PROBE_BINARY).toString('base64');
}

/** What the probe must report for each call in a sandbox: refused (ENOSYS for clone3, as Docker's profile has it). */
const PROBE_REFUSED: Readonly<Record<string, string>> = {
  ...Object.fromEntries(
    [
      'io_uring_setup', 'io_uring_enter', 'io_uring_register', 'ptrace', 'keyctl', 'add_key', 'request_key', 'bpf', 'userfaultfd', 'perf_event_open',
      'mount', 'umount2', 'mount_setattr', 'open_tree', 'fsconfig', 'fsopen', 'fsmount', 'move_mount', 'fspick', 'pivot_root',
    ].map((name) => [name, 'EPERM']),
  ),
  clone_newuser: 'EPERM',
  clone3_newuser: 'ENOSYS',
  unshare_newuser: 'EPERM',
};

/** The `sandbox.created` receipt's hardening. */
function createdHardening(receipts: readonly Record<string, unknown>[]): Record<string, unknown> {
  return (receipts.find((r) => r.type === 'sandbox.created')?.hardening ?? {}) as Record<string, unknown>;
}

const MEMORY_BALLOON = 'x=aaaaaaaaaaaaaaaa; while :; do x="$x$x"; done';

export const HOSTILE_WORKLOADS: readonly HostileWorkload[] = [
  // ── Caps: each stops the run ROLLBACK with its code, and destroys the sandbox ──────────────
  {
    id: 'fork-bomb',
    title: 'a fork bomb',
    spec: run(steps(sh('f(){ f|f& }; f; wait'), ['echo', 'never'])),
    expect: { kind: 'run', state: 'ROLLBACK', errorCode: 'E_PROC_LIMIT', step: { index: 0, errorCode: 'E_PROC_LIMIT', limits: ['pids'] }, stepsCompleted: 1 },
  },
  {
    id: 'memory-main',
    title: 'a memory balloon in the main process',
    spec: run(steps(sh(MEMORY_BALLOON), ['echo', 'never'])),
    expect: { kind: 'run', state: 'ROLLBACK', errorCode: 'E_MEM_LIMIT', step: { index: 0, errorCode: 'E_MEM_LIMIT', limits: ['memory'] }, stepsCompleted: 1 },
  },
  {
    // The OOM killer takes the child; the parent would carry on and exit 0 — the cgroup's
    // counter, not the exit code, says a cap was hit.
    id: 'memory-child',
    title: 'a memory balloon in a child whose parent survives it',
    spec: run(steps(sh(`sh -c '${MEMORY_BALLOON}'; echo parent survived; sleep 1; exit 0`), ['echo', 'never'])),
    expect: { kind: 'run', state: 'ROLLBACK', errorCode: 'E_MEM_LIMIT', step: { index: 0, errorCode: 'E_MEM_LIMIT', limits: ['memory'] }, stepsCompleted: 1 },
  },
  {
    // PRODUCT.md: /dev/shm is one of the tmpfs mounts whose sizes add up to diskMiB, so filling it
    // meets ENOSPC (E_DISK_LIMIT) before the OOM killer.
    id: 'memory-dev-shm',
    title: 'a memory balloon through /dev/shm',
    spec: run(steps(['dd', 'if=/dev/zero', 'of=/dev/shm/balloon', 'bs=1048576', 'count=64'], ['echo', 'never'])),
    expect: { kind: 'run', state: 'ROLLBACK', errorCode: 'E_DISK_LIMIT', step: { index: 0, errorCode: 'E_DISK_LIMIT', limits: ['disk'] }, stepsCompleted: 1 },
  },
  {
    id: 'disk-fill-work',
    title: 'a disk fill of /work',
    spec: run(steps(['dd', 'if=/dev/zero', 'of=/work/fill', 'bs=1048576', 'count=64'], ['echo', 'never'])),
    expect: { kind: 'run', state: 'ROLLBACK', errorCode: 'E_DISK_LIMIT', step: { index: 0, errorCode: 'E_DISK_LIMIT', limits: ['disk'] }, stepsCompleted: 1 },
  },
  {
    id: 'disk-fill-tmp',
    title: 'a disk fill of /tmp',
    spec: run(steps(['dd', 'if=/dev/zero', 'of=/tmp/fill', 'bs=1048576', 'count=64'], ['echo', 'never'])),
    expect: { kind: 'run', state: 'ROLLBACK', errorCode: 'E_DISK_LIMIT', step: { index: 0, errorCode: 'E_DISK_LIMIT', limits: ['disk'] }, stepsCompleted: 1 },
  },
  {
    // No fork per file (a shell redirection): the inodes run out long before the blocks.
    id: 'inode-exhaustion',
    title: 'inode exhaustion with empty files',
    spec: run(steps(sh('i=0; while : > /work/f$i; do i=$((i+1)); done; echo stopped at $i'), ['echo', 'never'])),
    expect: { kind: 'run', state: 'ROLLBACK', errorCode: 'E_DISK_LIMIT', step: { index: 0, errorCode: 'E_DISK_LIMIT', limits: ['disk'] }, stepsCompleted: 1 },
  },
  {
    id: 'busy-loop',
    title: 'a busy loop past its timeout',
    spec: run([{ argv: sh('while :; do :; done'), timeoutSeconds: 2 }, { argv: ['echo', 'never'] }]),
    expect: { kind: 'run', state: 'ROLLBACK', errorCode: 'E_TIMEOUT', step: { index: 0, exitCode: null, errorCode: 'E_TIMEOUT', limits: ['wall_time'] }, stepsCompleted: 1 },
  },
  {
    // A child in its own session, ignoring SIGTERM: a process-group kill misses it; destroying
    // the sandbox does not.
    id: 'setsid-term-ignoring-child',
    title: 'a TERM-ignoring setsid child past the timeout',
    spec: run([{ argv: sh(`setsid sh -c 'trap "" TERM; while :; do sleep 1; done' & wait`), timeoutSeconds: 2 }, { argv: ['echo', 'never'] }]),
    expect: { kind: 'run', state: 'ROLLBACK', errorCode: 'E_TIMEOUT', step: { index: 0, exitCode: null, errorCode: 'E_TIMEOUT', limits: ['wall_time'] }, stepsCompleted: 1 },
  },
  {
    // The stack's policy sets an output budget (HOSTILE_POLICY): the driver stops the step the
    // moment its output passes it, destroying the sandbox — long before its 4 s timeout. The
    // first OUTPUT_KEEP_BYTES are kept, the rest counted and dropped.
    id: 'endless-stdout',
    title: 'an endless stdout',
    spec: run([{ argv: ['yes', 'hostile'], timeoutSeconds: 4 }, { argv: ['echo', 'never'] }]),
    expect: {
      kind: 'run',
      state: 'ROLLBACK',
      errorCode: 'E_BUDGET',
      step: { index: 0, exitCode: null, errorCode: 'E_BUDGET', limits: ['output_bytes'], truncated: true },
      stepsCompleted: 1,
      check: async ({ receipts, artifact }) => {
        const step = stepReceipt(receipts, 0);
        expect(step.stdout_bytes as number).toBeGreaterThan(OUTPUT_BUDGET_BYTES);
        expect(step.limits_hit).not.toContain('wall_time');
        // Stopped when the budget was passed, not at the timeout.
        expect(step.duration_ms as number).toBeLessThan(3000);
        const kept = await artifact(step.stdout_sha256 as string);
        expect(kept.length).toBe(OUTPUT_KEEP_BYTES);
        expect(kept.toString('utf8').startsWith('hostile\nhostile\n')).toBe(true);
        expect(receipts.find((r) => r.type === 'policy.decided')).toMatchObject({ budget: { output_bytes_per_step: OUTPUT_BUDGET_BYTES } });
      },
    },
  },

  // ── The sandbox refuses: the step fails, the run is sealed, the receipt shows it ──────────
  {
    id: 'write-root',
    title: 'a write to /',
    spec: run(steps(sh('echo pwned > /hostile-root'), sh('test ! -e /hostile-root && echo still here'))),
    expect: { ...refusedBySandbox(/can't create \/hostile-root: Read-only file system/), check: async (ctx) => expectStdout(ctx, 1, 'still here\n') },
  },
  {
    // No trojaned binary for a later step: the image is read-only.
    id: 'trojan-binary',
    title: 'overwriting /bin/sh for the next step',
    spec: run(steps(sh('echo "echo trojan" > /bin/sh'), ['sh', '-c', 'echo intact'])),
    expect: { ...refusedBySandbox(/can't create \/bin\/sh: Read-only file system/), check: async (ctx) => expectStdout(ctx, 1, 'intact\n') },
  },
  {
    // A harmless kernel setting, so a failure of this test changes nothing that matters.
    id: 'write-proc-sys',
    title: 'a write to /proc/sys',
    spec: run(steps(sh('echo 7 > /proc/sys/vm/stat_interval'), STILL_THERE)),
    hostFacts: { statInterval: hostFile('/proc/sys/vm/stat_interval') },
    expect: {
      ...refusedBySandbox(/can't create \/proc\/sys\/vm\/stat_interval: Read-only file system/),
      check: async ({ hostBefore }) => expect(await hostFile('/proc/sys/vm/stat_interval')()).toBe(hostBefore.statInterval),
    },
  },
  {
    // `h` only prints the SysRq help to the kernel log, should it ever get through.
    id: 'write-sysrq-trigger',
    title: 'a write to /proc/sysrq-trigger',
    spec: run(steps(sh('echo h > /proc/sysrq-trigger'), STILL_THERE)),
    expect: refusedBySandbox(/can't create \/proc\/sysrq-trigger/),
  },
  {
    id: 'cgroup-release-agent',
    title: "a write to the cgroup's release_agent",
    spec: run(steps(sh('echo /work/escape > /sys/fs/cgroup/memory/release_agent'), STILL_THERE)),
    hostFacts: { releaseAgent: hostFile('/sys/fs/cgroup/memory/release_agent') },
    expect: {
      ...refusedBySandbox(/can't create \/sys\/fs\/cgroup\/memory\/release_agent: Read-only file system/),
      check: async ({ hostBefore }) => expect(await hostFile('/sys/fs/cgroup/memory/release_agent')()).toBe(hostBefore.releaseAgent),
    },
  },
  {
    id: 'mount',
    title: 'mount',
    spec: run(steps(['busybox', 'mount', '-t', 'tmpfs', 'none', '/work'], STILL_THERE)),
    expect: refusedBySandbox(/mount: permission denied/),
  },
  {
    id: 'unshare-userns',
    title: 'unshare into a new user namespace (root inside)',
    spec: run(steps(['busybox', 'unshare', '-U', '-r', 'id'], STILL_THERE)),
    expect: refusedBySandbox(/unshare: unshare\(0x10000000\): Operation not permitted/),
  },
  {
    id: 'unshare-mountns',
    title: 'unshare into a new mount namespace',
    spec: run(steps(['busybox', 'unshare', '-m', 'id'], STILL_THERE)),
    expect: refusedBySandbox(/unshare: unshare\(0x20000\): Operation not permitted/),
  },
  {
    // ICMP over a raw socket needs CAP_NET_RAW (dropped); with network none it would reach only lo.
    id: 'raw-socket-icmp',
    title: 'a raw socket (ping)',
    spec: run(steps(['busybox', 'ping', '-c', '1', '-W', '1', '127.0.0.1'], STILL_THERE)),
    expect: refusedBySandbox(/ping: permission denied/),
  },
  {
    id: 'packet-socket',
    title: 'a packet socket (arping on lo)',
    spec: run(steps(['busybox', 'arping', '-c', '1', '-I', 'lo', '127.0.0.1'], STILL_THERE)),
    expect: refusedBySandbox(/arping: socket: Operation not permitted/),
  },
  {
    id: 'mknod',
    title: 'mknod of a device',
    spec: run(steps(['busybox', 'mknod', '/work/null', 'c', '1', '3'], STILL_THERE)),
    expect: refusedBySandbox(/mknod: \/work\/null: Operation not permitted/),
  },
  {
    id: 'chroot',
    title: 'chroot',
    spec: run(steps(['busybox', 'chroot', '/', 'true'], STILL_THERE)),
    expect: refusedBySandbox(/chroot: can't change root directory to '\/': Operation not permitted/),
  },
  {
    id: 'nsenter-pid1',
    title: "nsenter into PID 1's mount namespace",
    spec: run(steps(['busybox', 'nsenter', '-t', '1', '-m', 'true'], STILL_THERE)),
    expect: refusedBySandbox(/nsenter: setns\(\): can't reassociate to namespace 'mnt': Operation not permitted/),
  },
  {
    id: 'net-admin',
    title: 'taking the loopback interface down',
    spec: run(steps(['busybox', 'ifconfig', 'lo', 'down'], STILL_THERE)),
    expect: refusedBySandbox(/ifconfig: SIOCSIFFLAGS: Operation not permitted/),
  },
  {
    id: 'sethostname',
    title: 'sethostname',
    spec: run(steps(['busybox', 'hostname', 'evil'], ['busybox', 'hostname'])),
    expect: { ...refusedBySandbox(/hostname: sethostname: Operation not permitted/), check: async (ctx) => expectStdout(ctx, 1, 'sandbox\n') },
  },
  {
    // No network at all (`network: 'none'`): a host the test runs is there (the test reaches it
    // from the host before and after), and the sandbox has no route to it.
    id: 'egress-direct-network-none',
    title: 'a direct connection out of a sandbox without network',
    spec: run(steps(['busybox', 'nc', '-w', '2', '{{SINK_IP}}', String(SINK_PORT)], STILL_THERE)),
    expect: {
      ...refusedBySandbox(/nc: can't connect to remote host \([0-9.]+\): Network is unreachable/),
      check: async ({ sink }) => {
        expect(await sink.connections()).toBe(1);
        await sink.touch();
        expect(await sink.connections()).toBe(2);
      },
    },
  },
  {
    // A static program calling each syscall Cairn's seccomp profile refuses, and printing the
    // errno it got: EPERM (ENOSYS for clone3); a plain fork still works, and so does the next step.
    id: 'seccomp-refused-syscalls',
    title: 'io_uring, ptrace, keyrings, bpf, userfaultfd, perf events, new user namespaces and every mount call',
    spec: run(
      steps(['/work/seccomp-probe'], sh('echo hello | sha256sum && (sleep 0.1 & wait) && tar -cf /tmp/w.tar -C /work . && tar -tf /tmp/w.tar | grep -c seccomp-probe')),
      { files: [{ path: '/work/seccomp-probe', content: seccompProbe(), encoding: 'base64', mode: 0o755 }] },
    ),
    expect: {
      kind: 'run',
      state: 'SEALED',
      errorCode: null,
      step: { index: 0, exitCode: 0, stdout: /\ndone\n$/ },
      stepsCompleted: 2,
      check: async (ctx) => {
        const report = (await ctx.artifact(stepReceipt(ctx.receipts, 0).stdout_sha256 as string)).toString('utf8').trim().split('\n');
        expect(report.pop()).toBe('done');
        expect(Object.fromEntries(report.map((line) => line.split(' ')))).toEqual({ ...PROBE_REFUSED, clone_plain: 'ok', getpid: 'ok' });
        await expectStdout(ctx, 1, '5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03  -\n1\n');
        // The profile in force is Cairn's, by its hash, as the engine reported it.
        expect(createdHardening(ctx.receipts)).toMatchObject({ seccomp: 'custom', seccomp_profile_sha256: sandboxSeccomp().sha256.slice('sha256:'.length) });
      },
    },
  },
  {
    // The sandbox's own uid and gid: no account of the host; the image need not name it (the
    // shared image may predate it, and then `id` shows numbers only).
    id: 'sandbox-user',
    title: "who the workload runs as, and what it owns",
    spec: run(steps(['id'], sh('echo "$HOME"; stat -c "%n %u %g %a" /work /out /run/secrets; touch /work/mine && stat -c "%u %g" /work/mine'))),
    expect: {
      kind: 'run',
      state: 'SEALED',
      errorCode: null,
      step: { index: 0, exitCode: 0, stdout: /^uid=65520(\(sandbox\))? gid=65520(\(sandbox\))? groups=65520(\(sandbox\))?\n$/ },
      stepsCompleted: 2,
      check: async (ctx) => {
        await expectStdout(ctx, 1, '/work\n/work 65520 65520 755\n/out 65520 65520 755\n/run/secrets 0 65520 750\n65520 65520\n');
        const passwd = await readFile('/etc/passwd', 'utf8');
        expect(passwd.split('\n').some((line) => line.split(':')[2] === String(DEFAULT_SANDBOX_USER.uid))).toBe(false);
        // This engine does not remap user namespaces: the receipt says so.
        expect(createdHardening(ctx.receipts)).toMatchObject({ user: '65520:65520', userns_remap: false, no_new_privileges: true });
      },
    },
  },
  {
    id: 'docker-socket',
    title: 'looking for the Docker socket',
    spec: run(steps(['ls', '/var/run/docker.sock', '/run/docker.sock', '/run/containerd/containerd.sock'], STILL_THERE)),
    expect: refusedBySandbox(/docker\.sock: No such file or directory/),
  },

  // ── Reads and leftovers: nothing to find, nothing outlives the run ────────────────────────
  {
    // No secret store exists yet (issue 4): what must not be there today is anything of Cairn's.
    id: 'proc-1-environ',
    title: 'reading /proc/1/environ and every other environment for secrets',
    spec: run(steps(sh('cat /proc/1/environ | tr "\\0" "\\n"'), sh('cat /proc/[0-9]*/environ | tr "\\0" "\\n" | sort -u'))),
    expect: {
      kind: 'run',
      state: 'SEALED',
      errorCode: null,
      step: { index: 0, exitCode: 0 },
      stepsCompleted: 2,
      check: async (ctx) => {
        const init = (await ctx.artifact(stepReceipt(ctx.receipts, 0).stdout_sha256 as string)).toString('utf8');
        expect(init.trim().split('\n').map((line) => line.split('=')[0]).sort()).toEqual(['HOME', 'HOSTNAME', 'PATH', 'TMPDIR']);
        const all = (await ctx.artifact(stepReceipt(ctx.receipts, 1).stdout_sha256 as string)).toString('utf8');
        for (const text of [init, all]) {
          expect(text).not.toContain(ctx.apiKey);
          expect(text).not.toMatch(/CAIRN_|cairn_[a-z0-9]{8}_|postgres:|nats:/i);
        }
      },
    },
  },
  {
    id: 'kill-init',
    title: 'SIGKILL to the sandbox init',
    spec: run(steps(sh('kill -9 1; echo sent'), STILL_THERE)),
    expect: { kind: 'run', state: 'SEALED', errorCode: null, step: { index: 0, exitCode: 0 }, stepsCompleted: 2, check: async (ctx) => expectStdout(ctx, 1, 'still here\n') },
  },
  {
    // The step returns at once; the sleeper would live on in the sandbox, and goes with it.
    id: 'background-survivor',
    title: 'a background process outliving its step',
    spec: run(steps(sh('sleep 600 > /dev/null 2>&1 & echo started'), sh('ps | grep -q "[s]leep 600" && echo sleeper alive'))),
    expect: {
      kind: 'run',
      state: 'SEALED',
      errorCode: null,
      step: { index: 0, exitCode: 0, stdout: /^started\n$/ },
      stepsCompleted: 2,
      check: async (ctx) => expectStdout(ctx, 1, 'sleeper alive\n'),
    },
  },
  {
    // The init passes TERM on to the sandbox's main process (the exec agent), and the sandbox stops.
    id: 'kill-term-init',
    title: 'SIGTERM to the sandbox init (the sandbox stops under its step)',
    spec: run(steps(sh('echo made > /out/made.txt; kill -TERM 1; sleep 10'), ['echo', 'never']), { outputs: ['/out'] }),
    expect: endedOwnSandbox(0, [null]),
  },
  {
    // `kill -9 -1` reaches every process of the sandbox user, the exec agent included (docs/adr/0005).
    id: 'kill-all-processes',
    title: 'SIGKILL to every process it may signal, the exec agent too',
    spec: run(steps(sh('kill -9 -1; sleep 10'), ['echo', 'never'])),
    expect: endedOwnSandbox(0, [null]),
  },
  {
    // A step that returns at once, leaving a process behind that stops the sandbox under the next one.
    id: 'sandbox-ended-by-leftover',
    title: 'a background process that stops the sandbox during the next step',
    spec: run(steps(sh('(sleep 1; kill -TERM 1) > /dev/null 2>&1 & echo armed'), ['sleep', '10'], ['echo', 'never'])),
    expect: endedOwnSandbox(1, [0, null]),
  },
  {
    // Output names are the workload's to choose and become keys of `artifact_hashes`: those a
    // receipt cannot hold as they are (control characters, bytes that are not UTF-8, a path over
    // 1024 characters) are not collected, and `run.executed` counts them; the rest are.
    id: 'unrecordable-output-names',
    title: 'output file names with control characters, invalid UTF-8 and over-long paths',
    spec: run(
      steps(
        sh(
          [
            'cd /out',
            `touch "a$(printf '\\nb')" "esc$(printf '\\033')[31m" "del$(printf '\\177')" "$(printf '\\377\\376')" "$(printf '\\377\\375')"`,
            'd=$(printf "%0250d" 0); mkdir -p "$d/$d/$d/$d/$d" && echo deep > "$d/$d/$d/$d/$d/f.txt"',
            'echo ok > ok.txt; echo fine > "résumé 😀.txt"; echo \'back\\slash\' > "back\\nslash"',
          ].join('; '),
        ),
      ),
      { outputs: ['/out'] },
    ),
    expect: {
      kind: 'run',
      state: 'SEALED',
      errorCode: null,
      step: { index: 0, exitCode: 0 },
      stepsCompleted: 1,
      check: ({ receipts }) => {
        const executed = receipts.find((r) => r.type === 'run.executed');
        expect(Object.keys((executed?.artifact_hashes ?? {}) as Record<string, string>).sort()).toEqual(['/out/back\\nslash', '/out/ok.txt', '/out/résumé 😀.txt']);
        expect(executed?.outputs_skipped).toBe(6);
      },
    },
  },
  {
    // The receipt names a step's program by argv[0]'s base name, cut to 256 characters: a cut
    // through a surrogate pair would leave a lone surrogate, which canonical JSON refuses.
    id: 'tool-name-split-surrogate',
    title: 'a program name whose 256th character is half an emoji',
    spec: run(steps([`${'a'.repeat(255)}😀`], STILL_THERE)),
    expect: {
      kind: 'run',
      state: 'SEALED',
      errorCode: null,
      stepsCompleted: 2,
      check: ({ receipts }) => {
        const step = stepReceipt(receipts, 0);
        expect(step.tool).toBe('a'.repeat(255));
        expect(step.exit_code as number).toBeGreaterThanOrEqual(126);
        expect(stepReceipt(receipts, 1).exit_code).toBe(0);
      },
    },
  },
  {
    // Outputs are collected as regular files only: a symlink cannot smuggle a sandbox (or host)
    // file into the evidence.
    id: 'symlink-outputs',
    title: 'symlinks in the collected outputs',
    spec: run(steps(sh('ln -s /proc/1/environ /out/environ; ln -s /etc/passwd /out/passwd; echo real > /out/real.txt')), { outputs: ['/out'] }),
    expect: {
      kind: 'run',
      state: 'SEALED',
      errorCode: null,
      step: { index: 0, exitCode: 0 },
      stepsCompleted: 1,
      check: ({ receipts }) => {
        const executed = receipts.find((r) => r.type === 'run.executed');
        expect(Object.keys((executed?.artifact_hashes ?? {}) as Record<string, string>)).toEqual(['/out/real.txt']);
      },
    },
  },

  {
    // A 1 TiB sparse file (busybox's truncate takes bytes): the exec agent measures it before the
    // archive starts and the collection is refused at once — never streamed for minutes.
    id: 'sparse-1tib-output',
    title: 'a 1 TiB sparse file in the collected outputs',
    spec: run(steps(sh(`printf %s '${BESIDE_REFUSED.trim()}' > /out/small.txt; echo >> /out/small.txt; truncate -s 1099511627776 /out/big && echo planted`)), { outputs: ['/out'] }),
    expect: {
      kind: 'run',
      state: 'ROLLBACK',
      errorCode: 'E_BUDGET',
      stepsCompleted: 1,
      check: async (ctx) => {
        // The step itself went well; the refusal is the collection's, at no step.
        expect(stepReceipt(ctx.receipts, 0).exit_code).toBe(0);
        const failed = ctx.receipts.find((r) => r.type === 'run.failed');
        expect(failed?.step_index).toBeUndefined();
        expect(failed?.message).toMatch(/collecting the outputs: .*come to 109951162\d{4} bytes/);
        await nothingCollected(ctx);
      },
    },
  },
  {
    // What tar would carry but Cairn does not collect: a fifo (and, in the int tests, hard links).
    id: 'fifo-output',
    title: 'a fifo among the collected outputs',
    spec: run(steps(sh(`printf %s '${BESIDE_REFUSED.trim()}' > /out/small.txt; echo >> /out/small.txt; mkfifo /out/pipe && echo planted`)), { outputs: ['/out'] }),
    expect: {
      kind: 'run',
      state: 'FAILED',
      errorCode: 'E_INPUT',
      step: { index: 0, exitCode: 0 },
      stepsCompleted: 1,
      check: async (ctx) => {
        const failed = ctx.receipts.find((r) => r.type === 'run.failed');
        expect(failed?.message).toMatch(/\/out\/pipe.* is a fifo/);
        await nothingCollected(ctx);
      },
    },
  },

  // ── Refused at the door: 400 E_INPUT naming the field, no run ─────────────────────────────
  {
    id: 'workdir-proc-fd',
    title: 'workdir /proc/self/fd/3',
    spec: run([{ argv: ['ls'], workdir: '/proc/self/fd/3' }]),
    expect: { kind: 'refused', status: 400, code: 'E_INPUT', field: 'steps[0].workdir' },
  },
  {
    id: 'argv-nul',
    title: 'argv with a NUL byte',
    spec: run([{ argv: ['sh', '-c\u0000rm -rf /work'] }]),
    expect: { kind: 'refused', status: 400, code: 'E_INPUT', field: 'steps[0].argv[1]' },
  },
];

/** The `step.completed` receipt of step `index`. */
export function stepReceipt(receipts: readonly Record<string, unknown>[], index: number): Record<string, unknown> {
  const step = receipts.find((r) => r.type === 'step.completed' && r.step_index === index);
  if (step === undefined) throw new Error(`no step.completed for step ${index}: ${receipts.map((r) => String(r.type)).join(', ')}`);
  return step;
}

async function expectStdout(ctx: WorkloadContext, index: number, text: string): Promise<void> {
  const step = stepReceipt(ctx.receipts, index);
  expect(step.exit_code).toBe(0);
  expect((await ctx.artifact(step.stdout_sha256 as string)).toString('utf8')).toBe(text);
}
