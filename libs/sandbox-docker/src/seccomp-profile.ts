import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/*
 * The sandbox's seccomp profile: Docker's own default (moby v20.10.24, the engine's version,
 * committed verbatim as seccomp/moby-default-v20.10.24.json) tightened by `deriveSandboxProfile`
 * and committed as seccomp/cairn-sandbox.json (`npm run seccomp` writes it; a unit test fails when
 * it is stale). Every sandbox gets it as `SecurityOpt: ['seccomp=<json>']` (API 1.41 takes the
 * profile itself, not a path). See seccomp/README.md and docs/sandbox-hardening.md.
 */

/** Refused outright (EPERM) whatever capabilities or architecture the container has. */
export const REFUSED_SYSCALLS = Object.freeze([
  // io_uring: a second syscall surface the rest of the profile does not see, and a steady source of kernel bugs.
  'io_uring_setup',
  'io_uring_enter',
  'io_uring_register',
  // Another process's memory and registers.
  'ptrace',
  // The kernel keyring: not namespaced, shared with the host's users.
  'keyctl',
  'add_key',
  'request_key',
  'bpf',
  // Stalls the kernel at a page fault of the caller's choosing: the usual way to win a kernel race.
  'userfaultfd',
  'perf_event_open',
  // Namespaces: a new user namespace gives "root" over the kernel's namespaced code paths.
  'unshare',
  // Mounts, old and new API.
  'mount',
  'umount',
  'umount2',
  'mount_setattr',
  'fsopen',
  'fsmount',
  'move_mount',
  'open_tree',
  'fsconfig',
  'fspick',
  'pivot_root',
]);

/**
 * Filtered by their flags, not refused: `clone` is how every program forks, so it stays allowed
 * without the namespace flags (Docker's own rule, `CLONE_NEW*` masked); `clone3` passes its flags
 * in memory a filter cannot read, so it answers ENOSYS (libc then falls back to `clone`), as in
 * Docker's profile — but here also for a container granted CAP_SYS_ADMIN.
 */
export const FLAG_FILTERED_SYSCALLS = Object.freeze(['clone', 'clone3']);

export interface SeccompArg {
  index: number;
  value: number;
  valueTwo?: number;
  op: string;
}

export interface SeccompCondition {
  caps?: string[];
  arches?: string[];
  minKernel?: string;
}

export interface SeccompRule {
  names: string[];
  action: string;
  errnoRet?: number;
  args?: SeccompArg[] | null;
  comment?: string;
  includes?: SeccompCondition;
  excludes?: SeccompCondition;
}

export interface SeccompProfile {
  defaultAction: string;
  defaultErrnoRet?: number;
  archMap?: unknown[];
  syscalls: SeccompRule[];
}

const EPERM = 1;

function withoutCaps(condition: SeccompCondition | undefined): SeccompCondition {
  const { caps: _caps, ...rest } = condition ?? {};
  return rest;
}

/**
 * Docker's default profile, tightened: every refused syscall is taken out of every rule that
 * allows it (also those that apply only with a capability), the unconditional `clone`/`unshare`/
 * `clone3` that CAP_SYS_ADMIN would bring are taken out too, the flag filter on `clone` and the
 * ENOSYS for `clone3` apply whatever the capabilities, and one explicit rule refuses the list
 * (EPERM, the profile's default answer) so that the profile says so itself. Nothing is added that
 * Docker's profile refuses. Pure.
 */
export function deriveSandboxProfile(base: SeccompProfile): SeccompProfile {
  const refused = new Set<string>(REFUSED_SYSCALLS);
  const flagFiltered = new Set<string>(FLAG_FILTERED_SYSCALLS);
  const syscalls: SeccompRule[] = [];
  for (const rule of base.syscalls) {
    const onlyCloneCalls = rule.names.every((name) => flagFiltered.has(name));
    const filtered = (rule.args ?? []).length > 0;
    if (rule.action === 'SCMP_ACT_ALLOW') {
      // An allow without arguments for clone/clone3 is the CAP_SYS_ADMIN one: no namespace flags ever.
      const names = rule.names.filter((name) => !refused.has(name) && !(flagFiltered.has(name) && !filtered));
      if (names.length === 0) continue;
      syscalls.push({ ...rule, names, ...(onlyCloneCalls ? { excludes: withoutCaps(rule.excludes) } : {}) });
    } else if (onlyCloneCalls) {
      // clone3's ENOSYS, which Docker lifts for CAP_SYS_ADMIN.
      syscalls.push({ ...rule, excludes: withoutCaps(rule.excludes) });
    } else {
      syscalls.push(rule);
    }
  }
  syscalls.push({
    names: [...REFUSED_SYSCALLS],
    action: 'SCMP_ACT_ERRNO',
    errnoRet: EPERM,
    args: [],
    comment: 'cairn: refused whatever the capabilities (libs/sandbox-docker/seccomp/README.md)',
    includes: {},
    excludes: {},
  });
  return { ...base, syscalls };
}

/** The committed derived profile as written (tab-indented like Docker's, one trailing newline). */
export function formatProfile(profile: SeccompProfile): string {
  return `${JSON.stringify(profile, null, '\t')}\n`;
}

export const UPSTREAM_PROFILE_FILE = new URL('../seccomp/moby-default-v20.10.24.json', import.meta.url);
export const SANDBOX_PROFILE_FILE = new URL('../seccomp/cairn-sandbox.json', import.meta.url);

/**
 * A test tool `npm run build` compiles beside the agent (agent/seccomp-probe.c): run in a sandbox,
 * it calls each refused syscall and prints how it answered. Absent without a C compiler.
 */
export const SECCOMP_PROBE_BINARY = fileURLToPath(new URL('../dist/agent/seccomp-probe', import.meta.url));

export interface SandboxSeccomp {
  profile: SeccompProfile;
  /** The profile as the engine is given it (compact JSON), and as `docker inspect` reports it back. */
  json: string;
  /** `SecurityOpt` entry: `seccomp=<json>`. */
  securityOpt: string;
  /** `sha256:` of `json`: what `sandbox.created` records. */
  sha256: string;
}

let loaded: SandboxSeccomp | null = null;

/** The committed sandbox profile (read once). */
export function sandboxSeccomp(): SandboxSeccomp {
  if (loaded !== null) return loaded;
  const profile = JSON.parse(readFileSync(SANDBOX_PROFILE_FILE, 'utf8')) as SeccompProfile;
  const json = JSON.stringify(profile);
  loaded = Object.freeze({ profile, json, securityOpt: `seccomp=${json}`, sha256: `sha256:${createHash('sha256').update(json).digest('hex')}` });
  return loaded;
}
