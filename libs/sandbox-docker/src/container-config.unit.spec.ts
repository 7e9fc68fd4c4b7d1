import { parseSandboxSpec } from '@cairn/sandbox';
import { describe, expect, it } from 'vitest';
import { hardenedContainerOptions, MASKED_PATHS, READONLY_PATHS, tmpfsOptions } from './container-config.js';
import { sandboxSeccomp } from './seccomp-profile.js';

const spec = parseSandboxSpec({
  image: 'cairn/sandbox-busybox:1',
  caps: { wallSeconds: 60, memoryMiB: 256, pids: 64, diskMiB: 256, cpus: 1.5 },
  labels: { workerId: 'w1', chainId: 'run_abc', pool: 'warm' },
  instance: 2,
  lifetimeSeconds: 3600,
});
const options = hardenedContainerOptions(spec, 'sha256:' + 'f'.repeat(64));
const host = options.HostConfig!;
const MiB = 1024 * 1024;

describe('hardenedContainerOptions', () => {
  it('locks the container down', () => {
    expect(host).toMatchObject({
      ReadonlyRootfs: true,
      CapDrop: ['ALL'],
      CapAdd: [],
      Privileged: false,
      // Docker's default seccomp profile, tightened (seccomp-profile.ts), as the JSON itself.
      SecurityOpt: ['no-new-privileges', sandboxSeccomp().securityOpt],
      Init: true,
      NetworkMode: 'none',
      IpcMode: 'private',
      PidMode: '',
      UTSMode: '',
      UsernsMode: '',
      CgroupParent: '',
      RestartPolicy: { Name: 'no' },
      Binds: [],
      Mounts: [],
      Devices: [],
    });
    expect(JSON.stringify(options)).not.toContain('unconfined');
    expect(options.User).toBe('65520:65520');
    expect((host.SecurityOpt as string[])[1]).toMatch(/^seccomp=\{"defaultAction":"SCMP_ACT_ERRNO"/);
  });

  it('masks and write-protects the same /proc and /sys paths whatever the engine defaults to', () => {
    const explicit = host as typeof host & { MaskedPaths: string[]; ReadonlyPaths: string[] };
    expect(explicit.MaskedPaths).toEqual([...MASKED_PATHS]);
    expect(explicit.MaskedPaths).toEqual(expect.arrayContaining(['/proc/kcore', '/proc/keys', '/sys/firmware', '/sys/devices/virtual/powercap']));
    expect(explicit.ReadonlyPaths).toEqual([...READONLY_PATHS]);
    expect(explicit.ReadonlyPaths).toContain('/proc/sys');
  });

  it('sets memory = swap = memoryMiB + diskMiB, pids, CPU and the tmpfs sizes from the caps', () => {
    expect(host.Memory).toBe(512 * MiB);
    expect(host.MemorySwap).toBe(512 * MiB);
    expect(host.PidsLimit).toBe(64);
    expect(host.NanoCpus).toBe(1_500_000_000);
    expect(host.Tmpfs).toEqual({
      '/tmp': 'rw,noexec,nosuid,nodev,size=32m,nr_inodes=4096',
      '/work': 'rw,exec,nosuid,nodev,size=128m,nr_inodes=16384,uid=65520,gid=65520,mode=0755',
      '/out': 'rw,exec,nosuid,nodev,size=64m,nr_inodes=8192,uid=65520,gid=65520,mode=0755',
      '/dev/shm': 'rw,noexec,nosuid,nodev,size=32m,nr_inodes=4096',
      // Secrets: root's, readable by the sandbox user's group only, never writable by the sandbox.
      '/run/secrets': 'rw,noexec,nosuid,nodev,size=2m,nr_inodes=64,uid=0,gid=65520,mode=0750',
    });
    expect(host.ShmSize).toBe(32 * MiB);
  });

  it('names and labels the container from its chain, and idles PID 1 for the lifetime', () => {
    expect(options.name).toBe('cairn-run_abc-2');
    expect(options.Labels).toEqual({ 'io.cairn.managed': '1', 'io.cairn.worker': 'w1', 'io.cairn.chain': 'run_abc', 'io.cairn.pool': 'warm' });
    expect(options.Image).toBe('sha256:' + 'f'.repeat(64));
    expect([options.Entrypoint, options.Cmd]).toEqual([['sleep'], ['3600']]);
  });

  it('refuses to run the sandbox as root, as -1, or as an id that is no integer', () => {
    for (const user of [
      { uid: 0, gid: 0 },
      { uid: 65520, gid: 0 },
      { uid: 65535, gid: 65520 },
      { uid: 4294967295, gid: 65520 },
      { uid: 1.5, gid: 65520 },
      { uid: -1, gid: 65520 },
    ]) {
      expect(() => hardenedContainerOptions(spec, 'x', user), JSON.stringify(user)).toThrow(RangeError);
    }
    expect(hardenedContainerOptions(spec, 'x', { uid: 70000, gid: 70001 }).User).toBe('70000:70001');
  });

  it('gives program mounts to the sandbox user and leaves the others sticky', () => {
    expect(tmpfsOptions({ path: '/work', sizeMiB: 1, inodes: 128, exec: true }, { uid: 1234, gid: 99 })).toBe(
      'rw,exec,nosuid,nodev,size=1m,nr_inodes=128,uid=1234,gid=99,mode=0755',
    );
  });
});

describe('hardenedContainerOptions on an egress network', () => {
  const network = { name: 'cairn-egress-run_abc-2', env: ['HTTP_PROXY=http://172.18.0.1:40123'] };
  const attached = hardenedContainerOptions(spec, 'sha256:' + 'f'.repeat(64), undefined, network);

  it('joins only that network, with no resolver, and names the proxy in the environment', () => {
    expect(attached.HostConfig).toMatchObject({ NetworkMode: 'cairn-egress-run_abc-2', Dns: ['0.0.0.0'], DnsOptions: [], DnsSearch: [] });
    expect(attached.NetworkingConfig).toEqual({ EndpointsConfig: { 'cairn-egress-run_abc-2': {} } });
    expect(attached.Env).toContain('HTTP_PROXY=http://172.18.0.1:40123');
  });

  it('changes nothing else of the hardening', () => {
    const { NetworkMode: _a, Dns: _b, DnsOptions: _c, DnsSearch: _d, ...rest } = attached.HostConfig!;
    const { NetworkMode: _e, ...plain } = host;
    expect(rest).toEqual(plain);
    expect(host.Dns).toBeUndefined();
    expect(options.NetworkingConfig).toBeUndefined();
  });
});
