import { DEFAULT_SANDBOX_USER, hardenedContainerOptions } from '@cairn/sandbox-docker';
import { parseSandboxSpec } from '@cairn/sandbox';
import { describe, expect, it } from 'vitest';
import { confirmedHardening, hardeningOf, hardeningProblems, tmpfsSizeBytes } from './sandbox-hardening.js';
import type { InspectedSandbox } from './sandbox-hardening.js';

const MIB = 1024 * 1024;
const caps = { wallSeconds: 30, memoryMiB: 32, pids: 32, diskMiB: 8, cpus: 0.5 };
const ENGINE = ['name=seccomp,profile=default'];

/** What `docker inspect` reports for a sandbox the Docker driver created: its HostConfig as sent. */
function inspected(overrides: Partial<InspectedSandbox['hostConfig']> = {}, user = `${DEFAULT_SANDBOX_USER.uid}:${DEFAULT_SANDBOX_USER.gid}`): InspectedSandbox {
  const spec = parseSandboxSpec({ image: 'cairn/sandbox-busybox:1', caps, labels: { workerId: 'w1', chainId: 'run_unit1' } });
  const options = hardenedContainerOptions(spec, `sha256:${'c'.repeat(64)}`);
  return { hostConfig: { ...options.HostConfig, ...overrides }, user, engineSecurityOptions: ENGINE };
}

describe('the hardening sandbox.created records', () => {
  it('reads what the Docker driver sets: read-only root, no capabilities, no-new-privileges, non-root, init, limits, tmpfs, no network, default seccomp', () => {
    expect(hardeningOf(inspected())).toEqual({
      read_only_root: true,
      cap_drop: ['ALL'],
      cap_add: [],
      no_new_privileges: true,
      user: '1000:1000',
      init: true,
      pids_limit: 32,
      memory_bytes: 40 * MIB,
      network: 'none',
      tmpfs: {
        '/tmp': { size_bytes: 1 * MIB, exec: false },
        '/work': { size_bytes: 4 * MIB, exec: true },
        '/out': { size_bytes: 2 * MIB, exec: true },
        '/dev/shm': { size_bytes: 1 * MIB, exec: false },
        '/run/secrets': { size_bytes: 2 * MIB, exec: false },
      },
      seccomp: 'default',
    });
    expect(hardeningProblems(hardeningOf(inspected()), caps)).toEqual([]);
  });

  it('tells the seccomp profile in force: the engine default, a custom one, or none', () => {
    expect(hardeningOf(inspected({ SecurityOpt: ['no-new-privileges', 'seccomp=unconfined'] })).seccomp).toBe('unconfined');
    expect(hardeningOf(inspected({ SecurityOpt: ['no-new-privileges', 'seccomp={"defaultAction":"SCMP_ACT_ERRNO"}'] })).seccomp).toBe('custom');
    expect(hardeningOf({ ...inspected(), engineSecurityOptions: ['name=apparmor'] }).seccomp).toBe('unconfined');
  });

  it('refuses (E_SANDBOX_START) a sandbox the engine did not harden as asked, naming each shortfall', () => {
    const weak = inspected({ ReadonlyRootfs: false, CapDrop: [], CapAdd: ['NET_ADMIN'], SecurityOpt: ['seccomp=unconfined'], Init: false, PidsLimit: 0, NetworkMode: 'bridge', Tmpfs: {} }, '');
    expect(() => confirmedHardening(weak, caps)).toThrow(expect.objectContaining({ code: 'E_SANDBOX_START' }) as Error);
    expect(hardeningProblems(hardeningOf(weak), caps)).toEqual(
      expect.arrayContaining([
        'the root file system is writable',
        'not every capability is dropped',
        'capabilities added: NET_ADMIN',
        'no-new-privileges is off',
        'the user is "", not a non-root uid:gid',
        'no init is PID 1',
        'the pids limit is 0, not 32',
        'the network is "bridge", not none',
        'no seccomp profile applies',
        '/work is not a size-capped tmpfs',
        '/run/secrets is not a size-capped, non-executable tmpfs',
      ]),
    );
    const secretsExec = inspected();
    const tmpfs = { ...secretsExec.hostConfig.Tmpfs, '/run/secrets': 'rw,exec,size=2m' };
    expect(hardeningProblems(hardeningOf({ ...secretsExec, hostConfig: { ...secretsExec.hostConfig, Tmpfs: tmpfs } }), caps)).toEqual([
      '/run/secrets is not a size-capped, non-executable tmpfs',
    ]);
    expect(hardeningProblems(hardeningOf(inspected({ Memory: 64 * MIB })), caps)).toEqual([`the memory limit is ${64 * MIB} bytes, not ${40 * MIB}`]);
    expect(hardeningProblems(hardeningOf(inspected({}, '0:0')), caps)).toEqual(['the user is "0:0", not a non-root uid:gid']);
  });

  it('checks an egress sandbox against its own network, and refuses one that has a resolver', () => {
    const spec = parseSandboxSpec({ image: 'cairn/sandbox-busybox:1', caps, labels: { workerId: 'w1', chainId: 'run_unit1' } });
    const network = { name: 'cairn-egress-run_unit1-1', env: ['HTTP_PROXY=http://172.18.0.1:3128'] };
    const attached: InspectedSandbox = { hostConfig: hardenedContainerOptions(spec, `sha256:${'c'.repeat(64)}`, undefined, network).HostConfig!, user: '1000:1000', engineSecurityOptions: ENGINE };
    expect(confirmedHardening(attached, caps, network.name).network).toBe(network.name);
    expect(() => confirmedHardening(attached, caps)).toThrow(/the network is "cairn-egress-run_unit1-1", not none/);
    expect(() => confirmedHardening({ ...attached, hostConfig: { ...attached.hostConfig, Dns: [] } }, caps, network.name)).toThrow(/DNS is \[\], not only 0\.0\.0\.0/);
    expect(() => confirmedHardening({ ...attached, hostConfig: { ...attached.hostConfig, Dns: ['127.0.0.53'] } }, caps, network.name)).toThrow(/DNS/);
    expect(() => confirmedHardening(inspected(), caps, network.name)).toThrow(/the network is "none", not cairn-egress-run_unit1-1/);
  });

  it('returns the hardening to record when it holds', () => {
    expect(confirmedHardening(inspected(), caps)).toMatchObject({ read_only_root: true, seccomp: 'default' });
  });

  it('reads tmpfs sizes in bytes, k, m and g', () => {
    expect(tmpfsSizeBytes('rw,noexec,size=8m,nr_inodes=1024')).toBe(8 * MIB);
    expect(tmpfsSizeBytes('size=512k')).toBe(512 * 1024);
    expect(tmpfsSizeBytes('size=1G')).toBe(1024 * MIB);
    expect(tmpfsSizeBytes('size=4096')).toBe(4096);
    expect(tmpfsSizeBytes('rw,exec')).toBe(0);
    expect(tmpfsSizeBytes('size=50%')).toBe(0);
  });
});
