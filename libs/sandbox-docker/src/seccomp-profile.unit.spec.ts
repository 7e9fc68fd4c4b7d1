import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  deriveSandboxProfile,
  FLAG_FILTERED_SYSCALLS,
  formatProfile,
  REFUSED_SYSCALLS,
  SANDBOX_PROFILE_FILE,
  sandboxSeccomp,
  UPSTREAM_PROFILE_FILE,
  type SeccompProfile,
  type SeccompRule,
} from './seccomp-profile.js';

const upstreamText = readFileSync(UPSTREAM_PROFILE_FILE, 'utf8');
const upstream = JSON.parse(upstreamText) as SeccompProfile;
const derived = deriveSandboxProfile(upstream);

/** Every capability a container could be granted (the engine's list; what `--cap-add ALL` gives). */
const ALL_CAPS = [
  'CAP_AUDIT_CONTROL', 'CAP_AUDIT_READ', 'CAP_AUDIT_WRITE', 'CAP_BLOCK_SUSPEND', 'CAP_BPF', 'CAP_CHECKPOINT_RESTORE', 'CAP_CHOWN',
  'CAP_DAC_OVERRIDE', 'CAP_DAC_READ_SEARCH', 'CAP_FOWNER', 'CAP_FSETID', 'CAP_IPC_LOCK', 'CAP_IPC_OWNER', 'CAP_KILL', 'CAP_LEASE',
  'CAP_LINUX_IMMUTABLE', 'CAP_MAC_ADMIN', 'CAP_MAC_OVERRIDE', 'CAP_MKNOD', 'CAP_NET_ADMIN', 'CAP_NET_BIND_SERVICE', 'CAP_NET_BROADCAST',
  'CAP_NET_RAW', 'CAP_PERFMON', 'CAP_SETFCAP', 'CAP_SETGID', 'CAP_SETPCAP', 'CAP_SETUID', 'CAP_SYSLOG', 'CAP_SYS_ADMIN', 'CAP_SYS_BOOT',
  'CAP_SYS_CHROOT', 'CAP_SYS_MODULE', 'CAP_SYS_NICE', 'CAP_SYS_PACCT', 'CAP_SYS_PTRACE', 'CAP_SYS_RAWIO', 'CAP_SYS_RESOURCE',
  'CAP_SYS_TIME', 'CAP_SYS_TTY_CONFIG', 'CAP_WAKE_ALARM',
];
const ARCHES = ['amd64', 'arm64', 's390x'];
const CONDITIONS = ARCHES.flatMap((arch) => [
  { arch, caps: [] as string[] },
  { arch, caps: ['CAP_SYS_ADMIN'] },
  { arch, caps: ALL_CAPS },
]);

/**
 * Whether a rule applies to a container with these capabilities on this architecture, as the
 * engine decides it (moby profiles/seccomp/seccomp_linux.go: every included capability must be
 * there, no excluded one may be; kernels here are all past any `minKernel`).
 */
function applies(rule: SeccompRule, condition: { arch: string; caps: readonly string[] }): boolean {
  const { includes = {}, excludes = {} } = rule;
  if ((includes.caps ?? []).some((cap) => !condition.caps.includes(cap))) return false;
  if ((excludes.caps ?? []).some((cap) => condition.caps.includes(cap))) return false;
  if ((includes.arches ?? []).length > 0 && !(includes.arches ?? []).includes(condition.arch)) return false;
  if ((excludes.arches ?? []).includes(condition.arch)) return false;
  return true;
}

/** `name` → the argument filters under which it is allowed (`''`: always), for one condition. */
function allowed(profile: SeccompProfile, condition: { arch: string; caps: readonly string[] }): Map<string, Set<string>> {
  const out = new Map<string, Set<string>>();
  for (const rule of profile.syscalls) {
    if (rule.action !== 'SCMP_ACT_ALLOW' || !applies(rule, condition)) continue;
    const args = JSON.stringify(rule.args ?? []);
    for (const name of rule.names) {
      const filters = out.get(name) ?? new Set<string>();
      filters.add(args === '[]' ? '' : args);
      out.set(name, filters);
    }
  }
  return out;
}

describe("the sandbox's seccomp profile", () => {
  it("starts from Docker's own default profile of the engine's version, unchanged", () => {
    // moby v20.10.24 profiles/seccomp/default.json, from the Go module proxy (seccomp/README.md).
    expect(createHash('sha256').update(upstreamText).digest('hex')).toBe('ce3585b856aa4a193671fd8280d0d0612a998bd3f10bdb2f8530dfa958c6197f');
    expect(upstream.defaultAction).toBe('SCMP_ACT_ERRNO');
  });

  it('is committed as derived (run `npm run build && npm run seccomp` after changing the derivation)', () => {
    expect(readFileSync(SANDBOX_PROFILE_FILE, 'utf8')).toBe(formatProfile(derived));
    expect(sandboxSeccomp().profile).toEqual(derived);
    expect(sandboxSeccomp().securityOpt).toBe(`seccomp=${JSON.stringify(derived)}`);
    expect(sandboxSeccomp().sha256).toBe(`sha256:${createHash('sha256').update(JSON.stringify(derived)).digest('hex')}`);
  });

  it.each(CONDITIONS)('allows none of the refused syscalls on $arch with $caps.length capabilities', (condition) => {
    const allow = allowed(derived, condition);
    for (const name of REFUSED_SYSCALLS) expect(allow.has(name), name).toBe(false);
    // clone: only with every namespace flag masked out (flags are the 2nd argument on s390).
    const index = condition.arch === 's390x' ? 1 : 0;
    expect([...(allow.get('clone') ?? [])]).toEqual([JSON.stringify([{ index, value: 0x7e020000, op: 'SCMP_CMP_MASKED_EQ' }])]);
    // clone3: never allowed, answered ENOSYS (libc falls back to clone).
    expect(allow.has('clone3')).toBe(false);
    const clone3 = derived.syscalls.filter((rule) => rule.names.includes('clone3') && applies(rule, condition));
    expect(clone3).toEqual([expect.objectContaining({ action: 'SCMP_ACT_ERRNO', errnoRet: 38 })]);
  });

  it("only ever tightens Docker's profile: whatever it allows, Docker's allows too, under the same or no argument filter", () => {
    for (const condition of CONDITIONS) {
      const ours = allowed(derived, condition);
      const theirs = allowed(upstream, condition);
      for (const [name, filters] of ours) {
        for (const filter of filters) {
          const covered = theirs.get(name)?.has('') === true || theirs.get(name)?.has(filter) === true;
          expect(covered, `${name} ${filter} on ${condition.arch} with ${condition.caps.length} caps`).toBe(true);
        }
      }
      expect(derived.defaultAction).toBe(upstream.defaultAction);
    }
  });

  it("refuses what Docker's profile allowed unprivileged (io_uring, ptrace) and what it allowed with a capability (mounts, bpf, perf, unshare)", () => {
    const unprivileged = allowed(upstream, { arch: 'amd64', caps: [] });
    expect(['io_uring_setup', 'io_uring_enter', 'io_uring_register', 'ptrace'].filter((n) => unprivileged.has(n))).toHaveLength(4);
    const admin = allowed(upstream, { arch: 'amd64', caps: ALL_CAPS });
    expect(['mount', 'umount2', 'fsopen', 'fsmount', 'move_mount', 'open_tree', 'fsconfig', 'fspick', 'bpf', 'perf_event_open', 'unshare', 'clone3'].filter((n) => admin.get(n)?.has('') === true)).toHaveLength(12);
  });

  it('says so itself: one rule refuses the list with EPERM', () => {
    const explicit = derived.syscalls.at(-1)!;
    expect(explicit).toMatchObject({ action: 'SCMP_ACT_ERRNO', errnoRet: 1, names: [...REFUSED_SYSCALLS] });
    expect(REFUSED_SYSCALLS.filter((n) => FLAG_FILTERED_SYSCALLS.includes(n))).toEqual([]);
    expect(new Set(REFUSED_SYSCALLS).size).toBe(REFUSED_SYSCALLS.length);
  });
});
