import { agentBinds, DEFAULT_SANDBOX_USER, hardenedContainerOptions, sandboxSeccomp } from '@cairn/sandbox-docker';
import { parseSandboxSpec } from '@cairn/sandbox';
import { describe, expect, it } from 'vitest';
import { confirmedHardening, hardeningOf, hardeningProblems, tmpfsSizeBytes } from './sandbox-hardening.js';
import type { InspectedSandbox } from './sandbox-hardening.js';

const MIB = 1024 * 1024;
const caps = { wallSeconds: 30, memoryMiB: 32, pids: 32, diskMiB: 8, cpus: 0.5 };
const ENGINE = ['name=seccomp,profile=default'];
const IMAGE = `sha256:${'c'.repeat(64)}`;
const AGENT = { binary: '/opt/cairn/dist/agent/cairn-agent', socketDirs: '/run/cairn-agent/w1' };
const SOCKET_DIR = `${AGENT.socketDirs}/cairn-run_unit1-1`;
const NETWORK = { name: 'cairn-egress-run_unit1-1', env: ['HTTP_PROXY', 'HTTPS_PROXY', 'http_proxy', 'https_proxy'].map((n) => `${n}=http://172.18.0.1:3128`) };

type Mutable = Record<string, unknown>;

/**
 * What `docker inspect` reports for a sandbox the Docker driver created with its exec agent: the
 * options as sent, the agent's binds as the engine lists them, the image's id.
 */
function inspected(options: { network?: typeof NETWORK } = {}): InspectedSandbox {
  const spec = parseSandboxSpec({ image: 'cairn/sandbox-busybox:1', caps, labels: { workerId: 'w1', chainId: 'run_unit1' } });
  const created = hardenedContainerOptions(spec, IMAGE, DEFAULT_SANDBOX_USER, options.network);
  const { HostConfig, ...config } = created;
  return {
    hostConfig: { ...HostConfig, Binds: agentBinds(AGENT.binary, SOCKET_DIR) },
    config: { ...config, Entrypoint: ['/.cairn/agent'], Cmd: ['/.cairn/run/a.sock', '86400'], OpenStdin: true, StdinOnce: true, AttachStdin: true },
    mounts: [
      { Type: 'bind', Source: AGENT.binary, Destination: '/.cairn/agent', Mode: 'ro', RW: false, Propagation: 'rprivate' },
      { Type: 'bind', Source: SOCKET_DIR, Destination: '/.cairn/run', Mode: 'ro', RW: false, Propagation: 'rprivate' },
    ],
    image: IMAGE,
    appArmorProfile: '',
    engineSecurityOptions: ENGINE,
    promised: { user: DEFAULT_SANDBOX_USER, imageId: IMAGE, agent: AGENT, requireUserns: false },
  };
}

/** `inspected()` with `change` applied to a copy of its HostConfig (and the rest). */
function changed(change: (x: { host: Mutable; config: Mutable; mounts: Mutable[]; whole: Mutable }) => void): InspectedSandbox {
  const base = inspected();
  const host = structuredClone(base.hostConfig) as Mutable;
  const config = structuredClone(base.config) as Mutable;
  const mounts = structuredClone(base.mounts) as Mutable[];
  const whole: Mutable = { ...base, hostConfig: host, config, mounts };
  change({ host, config, mounts, whole });
  return whole as unknown as InspectedSandbox;
}

const tmpfsOf = (host: Mutable) => host.Tmpfs as Record<string, string>;
const ours = sandboxSeccomp();

/** One promised field each: changed as a weaker engine (or a careless driver) would report it, and the problem that names it. */
const MISMATCHES: [string, (x: { host: Mutable; config: Mutable; mounts: Mutable[]; whole: Mutable }) => void, RegExp][] = [
  ['privileged', ({ host }) => (host.Privileged = true), /^HostConfig\.Privileged is true, not false$/],
  ['a writable root', ({ host }) => (host.ReadonlyRootfs = false), /^HostConfig\.ReadonlyRootfs is false, not true$/],
  ['no init', ({ host }) => (host.Init = false), /^HostConfig\.Init is false, not true$/],
  ['another pids limit', ({ host }) => (host.PidsLimit = 0), /^HostConfig\.PidsLimit is 0, not 32$/],
  ['another memory limit', ({ host }) => (host.Memory = 64 * MIB), /^HostConfig\.Memory is 67108864, not 41943040$/],
  ['swap', ({ host }) => (host.MemorySwap = -1), /^HostConfig\.MemorySwap is -1, not 41943040$/],
  ['the OOM killer off', ({ host }) => (host.OomKillDisable = true), /^HostConfig\.OomKillDisable is true, not false$/],
  ['no OOM score raise', ({ host }) => (host.OomScoreAdj = 0), /^HostConfig\.OomScoreAdj is 0, not 500$/],
  ['no CPU cap', ({ host }) => (host.NanoCpus = 0), /^HostConfig\.NanoCpus is 0, not 500000000$/],
  ['a bigger /dev/shm', ({ host }) => (host.ShmSize = 64 * MIB), /^HostConfig\.ShmSize is 67108864, not 1048576$/],
  ['a network', ({ host }) => (host.NetworkMode = 'bridge'), /^HostConfig\.NetworkMode is "bridge", not "none"$/],
  ['the host network', ({ host }) => (host.NetworkMode = 'host'), /^HostConfig\.NetworkMode is "host", not "none"$/],
  ['shared IPC', ({ host }) => (host.IpcMode = 'host'), /^HostConfig\.IpcMode is "host", not "private"$/],
  ["the host's cgroup namespace", ({ host }) => (host.CgroupnsMode = 'host'), /^HostConfig\.CgroupnsMode is "host", not "private"$/],
  ["the host's pids", ({ host }) => (host.PidMode = 'host'), /^HostConfig\.PidMode is "host", not ""$/],
  ["the host's UTS namespace", ({ host }) => (host.UTSMode = 'host'), /^HostConfig\.UTSMode is "host", not ""$/],
  ['no userns remapping for this container', ({ host }) => (host.UsernsMode = 'host'), /^HostConfig\.UsernsMode is "host", not ""$/],
  ['another cgroup parent', ({ host }) => (host.CgroupParent = '/system.slice'), /^HostConfig\.CgroupParent is "\/system\.slice", not ""$/],
  ['published ports', ({ host }) => (host.PublishAllPorts = true), /^HostConfig\.PublishAllPorts is true, not false$/],
  ['auto-remove', ({ host }) => (host.AutoRemove = true), /^HostConfig\.AutoRemove is true, not false$/],
  ['a restart policy', ({ host }) => (host.RestartPolicy = { Name: 'always', MaximumRetryCount: 0 }), /^the restart policy is "always", not no$/],
  ['a log file', ({ host }) => (host.LogConfig = { Type: 'json-file', Config: {} }), /^the log driver is "json-file", not none$/],
  ['capabilities kept', ({ host }) => (host.CapDrop = ['NET_RAW']), /^the capabilities dropped are \["NET_RAW"\], not ALL$/],
  ['capabilities added', ({ host }) => (host.CapAdd = ['CAP_SYS_ADMIN']), /^capabilities added: SYS_ADMIN$/],
  ['a device', ({ host }) => (host.Devices = [{ PathOnHost: '/dev/kmsg', PathInContainer: '/dev/kmsg', CgroupPermissions: 'rwm' }]), /^HostConfig\.Devices is .*kmsg.*, not empty$/],
  ['a device cgroup rule', ({ host }) => (host.DeviceCgroupRules = ['c 1:3 rwm']), /^HostConfig\.DeviceCgroupRules is \["c 1:3 rwm"\], not empty$/],
  ['a GPU', ({ host }) => (host.DeviceRequests = [{ Driver: 'nvidia', Count: -1 }]), /^HostConfig\.DeviceRequests is .*nvidia.*, not empty$/],
  ['a mount', ({ host }) => (host.Mounts = [{ Type: 'bind', Source: '/', Target: '/host' }]), /^HostConfig\.Mounts is .*, not empty$/],
  ["another container's volumes", ({ host }) => (host.VolumesFrom = ['db']), /^HostConfig\.VolumesFrom is \["db"\], not empty$/],
  ['a supplementary group', ({ host }) => (host.GroupAdd = ['0']), /^HostConfig\.GroupAdd is \["0"\], not empty$/],
  ['a sysctl', ({ host }) => (host.Sysctls = { 'net.ipv4.ip_forward': '1' }), /^HostConfig\.Sysctls is .*ip_forward.*, not empty$/],
  ['a port binding', ({ host }) => (host.PortBindings = { '80/tcp': [{ HostPort: '8080' }] }), /^HostConfig\.PortBindings is .*, not empty$/],
  ['a link', ({ host }) => (host.Links = ['/db:/sbx/db']), /^HostConfig\.Links is .*, not empty$/],
  ['an extra host', ({ host }) => (host.ExtraHosts = ['metadata:169.254.169.254']), /^HostConfig\.ExtraHosts is .*, not empty$/],
  ['a resolver', ({ host }) => (host.Dns = ['8.8.8.8']), /^the sandbox's DNS is \["8\.8\.8\.8"\], not none$/],
  ['no ulimits', ({ host }) => (host.Ulimits = []), /^the ulimits are \[\], not core=0 and nofile=8192$/],
  ['core dumps', ({ host }) => (host.Ulimits = [{ Name: 'core', Soft: -1, Hard: -1 }, { Name: 'nofile', Soft: 8192, Hard: 8192 }]), /^the ulimits are .*core=-1:-1.*$/],
  ['no masked paths (systempaths=unconfined)', ({ host }) => (host.MaskedPaths = []), /^the masked paths are \[\], not /],
  ['a masked path fewer', ({ host }) => (host.MaskedPaths = (host.MaskedPaths as string[]).filter((p) => p !== '/proc/kcore')), /^the masked paths are /],
  ['no read-only paths', ({ host }) => (host.ReadonlyPaths = []), /^the read-only paths are \[\], not /],
  ['privileges may be gained', ({ host }) => (host.SecurityOpt = [ours.securityOpt]), /^no-new-privileges is off$/],
  ['seccomp unconfined', ({ host }) => (host.SecurityOpt = ['no-new-privileges', 'seccomp=unconfined']), /^seccomp is unconfined$/],
  ["the engine's default seccomp profile", ({ host }) => (host.SecurityOpt = ['no-new-privileges']), /^the seccomp profile is the engine's default, not Cairn's$/],
  ['another seccomp profile', ({ host }) => (host.SecurityOpt = ['no-new-privileges', 'seccomp={"defaultAction":"SCMP_ACT_ALLOW"}']), /^the seccomp profile is another one \(sha256 [0-9a-f]{64}\), not Cairn's/],
  ['AppArmor off by option', ({ host }) => (host.SecurityOpt = [...(host.SecurityOpt as string[]), 'apparmor=unconfined']), /^unexpected security options: \["apparmor=unconfined"\]$/],
  ['SELinux labels off', ({ host }) => (host.SecurityOpt = [...(host.SecurityOpt as string[]), 'label=disable']), /^unexpected security options: \["label=disable"\]$/],
  ['an engine without seccomp', ({ whole }) => (whole.engineSecurityOptions = []), /^the engine applies no seccomp profile at all$/],
  ['AppArmor unconfined', ({ whole }) => (whole.appArmorProfile = 'unconfined'), /^AppArmor is unconfined$/],
  ['no AppArmor profile where the engine has AppArmor', ({ whole }) => (whole.engineSecurityOptions = [...ENGINE, 'name=apparmor']), /^the engine has AppArmor, and the sandbox has no profile$/],
  ['an executable /tmp', ({ host }) => (tmpfsOf(host)['/tmp'] = tmpfsOf(host)['/tmp']!.replace('noexec', 'exec')), /^the tmpfs at \/tmp is "rw,exec,/],
  ['setuid on /work', ({ host }) => (tmpfsOf(host)['/work'] = tmpfsOf(host)['/work']!.replace(',nosuid', '')), /^the tmpfs at \/work is "rw,exec,nodev,/],
  ['devices on /out', ({ host }) => (tmpfsOf(host)['/out'] = tmpfsOf(host)['/out']!.replace(',nodev', '')), /^the tmpfs at \/out is /],
  ['a bigger /dev/shm tmpfs', ({ host }) => (tmpfsOf(host)['/dev/shm'] = tmpfsOf(host)['/dev/shm']!.replace('size=1m', 'size=64m')), /^the tmpfs at \/dev\/shm is .*size=64m/],
  ['more inodes', ({ host }) => (tmpfsOf(host)['/work'] = tmpfsOf(host)['/work']!.replace('nr_inodes=512', 'nr_inodes=1000000')), /^the tmpfs at \/work is .*nr_inodes=1000000/],
  ["/work another user's", ({ host }) => (tmpfsOf(host)['/work'] = tmpfsOf(host)['/work']!.replace('uid=65520', 'uid=0')), /^the tmpfs at \/work is .*uid=0/],
  ["/out another group's", ({ host }) => (tmpfsOf(host)['/out'] = tmpfsOf(host)['/out']!.replace('gid=65520', 'gid=0')), /^the tmpfs at \/out is .*gid=0/],
  ['/work world-writable', ({ host }) => (tmpfsOf(host)['/work'] = tmpfsOf(host)['/work']!.replace('mode=0755', 'mode=1777')), /^the tmpfs at \/work is .*mode=1777/],
  ['secrets writable by the sandbox', ({ host }) => (tmpfsOf(host)['/run/secrets'] = tmpfsOf(host)['/run/secrets']!.replace('mode=0750', 'mode=0770')), /^the tmpfs at \/run\/secrets is .*mode=0770/],
  ['executable secrets', ({ host }) => (tmpfsOf(host)['/run/secrets'] = tmpfsOf(host)['/run/secrets']!.replace('noexec', 'exec')), /^the tmpfs at \/run\/secrets is /],
  ['no secrets tmpfs', ({ host }) => delete tmpfsOf(host)['/run/secrets'], /^\/run\/secrets is not a tmpfs$/],
  ['no /work tmpfs', ({ host }) => delete tmpfsOf(host)['/work'], /^\/work is not a tmpfs$/],
  ['another tmpfs', ({ host }) => (tmpfsOf(host)['/var/tmp'] = 'rw,exec'), /^an unexpected tmpfs at \/var\/tmp$/],
  ['a host directory bound in', ({ host }) => (host.Binds = [...(host.Binds as string[]), '/etc:/host-etc:ro']), /^the binds are .*, not /],
  ['the agent writable', ({ host }) => (host.Binds = [`${AGENT.binary}:/.cairn/agent:rw`, `${SOCKET_DIR}:/.cairn/run:ro`]), /^the binds are /],
  ['a socket directory of elsewhere', ({ host }) => (host.Binds = [`${AGENT.binary}:/.cairn/agent:ro`, '/var/run:/.cairn/run:ro']), /^the binds are /],
  ['the Docker socket', ({ host }) => (host.Binds = [`${AGENT.binary}:/.cairn/agent:ro`, '/var/run/docker.sock:/.cairn/run:ro']), /^the binds are /],
  ["an image's volume", ({ mounts }) => mounts.push({ Type: 'volume', Name: 'x', Source: '/var/lib/docker/volumes/x/_data', Destination: '/data', RW: true }), /^the mounts are .*volume.*, not only the agent's read-only binds$/],
  ['a bind mounted writable', ({ mounts }) => (mounts[1]!.RW = true), /^the mounts are .*\/\.cairn\/run:rw/],
  ['a shared bind', ({ mounts }) => (mounts[0]!.Propagation = 'rshared'), /^the mounts are /],
  ['root', ({ config }) => (config.User = '0:0'), /^the user is "0:0", not 65520:65520$/],
  ["the image's user", ({ config }) => (config.User = ''), /^the user is "", not 65520:65520$/],
  ['another user', ({ config }) => (config.User = '1000:1000'), /^the user is "1000:1000", not 65520:65520$/],
  ['another host name', ({ config }) => (config.Hostname = '0123456789ab'), /^the host name is "0123456789ab", not sandbox$/],
  ['another working directory', ({ config }) => (config.WorkingDir = '/'), /^the working directory is "\/", not \/work$/],
  ['a terminal', ({ config }) => (config.Tty = true), /^Config\.Tty is on$/],
  ['no stdin for the agent’s token', ({ config }) => (config.OpenStdin = false), /^Config\.OpenStdin is off: the agent's token has no way in$/],
  ['stdin kept open after the token', ({ config }) => (config.StdinOnce = false), /^Config\.StdinOnce is off: the sandbox's stdin would stay open after the token$/],
  ['exposed ports', ({ config }) => (config.ExposedPorts = { '22/tcp': {} }), /^ports are exposed: /],
  ['declared volumes', ({ config }) => (config.Volumes = { '/data': {} }), /^volumes are declared: /],
  ['another image', ({ whole }) => (whole.image = `sha256:${'d'.repeat(64)}`), /^the image is "sha256:d+", not sha256:c+$/],
  ['no HOME on tmpfs', ({ config }) => (config.Env = (config.Env as string[]).filter((e) => !e.startsWith('HOME='))), /^the environment lacks HOME=\/work$/],
  ['a second HOME', ({ config }) => (config.Env = [...(config.Env as string[]), 'HOME=/']), /^the environment sets HOME more than once$/],
  ['a proxy without a network', ({ config }) => (config.Env = [...(config.Env as string[]), 'HTTP_PROXY=http://10.0.0.1:3128']), /^a sandbox without network has proxy variables/],
  ["Cairn's own variables", ({ config }) => (config.Env = [...(config.Env as string[]), 'CAIRN_SECRETS_KEY_FILE=/etc/cairn/key']), /^the environment carries Cairn's own variables: \["CAIRN_SECRETS_KEY_FILE"\]$/],
  ['another main process', ({ config }) => ((config.Entrypoint = ['sh']), (config.Cmd = ['-c', 'sleep 1d'])), /^the main process is \["sh","-c","sleep 1d"\], not \/\.cairn\/agent/],
];

describe('the hardening check at start compares every promised field', () => {
  it('finds nothing wrong with a sandbox as the Docker driver creates it', () => {
    expect(hardeningProblems(inspected(), caps)).toEqual([]);
  });

  it.each(MISMATCHES)('refuses (E_SANDBOX_START) %s', (_what, change, problem) => {
    const weak = changed(change);
    const problems = hardeningProblems(weak, caps);
    expect(problems, JSON.stringify(problems)).toEqual(expect.arrayContaining([expect.stringMatching(problem)]));
    expect(() => confirmedHardening(weak, caps)).toThrow(expect.objectContaining({ code: 'E_SANDBOX_START' }) as Error);
  });

  it('has a case for every field it compares', () => {
    expect(MISMATCHES.length).toBeGreaterThanOrEqual(80);
    expect(new Set(MISMATCHES.map(([what]) => what)).size).toBe(MISMATCHES.length);
  });

  it('holds a sandbox without the exec agent to its idle `sleep` and no binds at all', () => {
    const base = inspected();
    const plain: InspectedSandbox = {
      ...base,
      hostConfig: { ...base.hostConfig, Binds: [] },
      config: { ...base.config, Entrypoint: ['sleep'], Cmd: ['86400'], OpenStdin: false, StdinOnce: false, AttachStdin: false },
      mounts: [],
      promised: { ...base.promised, agent: null },
    };
    expect(hardeningProblems(plain, caps)).toEqual([]);
    // Without an agent there is no token to send: an open stdin is refused.
    expect(hardeningProblems({ ...plain, config: { ...plain.config, OpenStdin: true } }, caps)).toEqual(['Config.OpenStdin is on']);
    expect(hardeningProblems({ ...plain, hostConfig: base.hostConfig, mounts: base.mounts }, caps)).toEqual([
      expect.stringMatching(/^the binds are .*, not none$/),
      expect.stringMatching(/^the mounts are .*, not only the agent's read-only binds$/),
    ]);
  });

  it('refuses every sandbox of a worker that must remap user namespaces on an engine that does not, and passes it on one that does', () => {
    const base = inspected();
    const strict = { ...base, promised: { ...base.promised, requireUserns: true } };
    expect(hardeningProblems(strict, caps)).toEqual(['the engine does not remap user namespaces, and this worker must (CAIRN_SANDBOX_REQUIRE_USERNS)']);
    expect(hardeningProblems({ ...strict, engineSecurityOptions: [...ENGINE, 'name=userns'] }, caps)).toEqual([]);
  });

  it('checks an egress sandbox against its own network: one resolver that answers nothing, and the proxy in its environment', () => {
    const attached = inspected({ network: NETWORK });
    expect(hardeningProblems(attached, caps, NETWORK.name)).toEqual([]);
    expect(confirmedHardening(attached, caps, NETWORK.name).network).toBe(NETWORK.name);
    expect(() => confirmedHardening(attached, caps)).toThrow(/HostConfig\.NetworkMode is "cairn-egress-run_unit1-1", not "none"/);
    const host = attached.hostConfig as Mutable;
    expect(hardeningProblems({ ...attached, hostConfig: { ...host, Dns: [] } }, caps, NETWORK.name)).toEqual([expect.stringMatching(/DNS is \[\], not only 0\.0\.0\.0/)]);
    expect(hardeningProblems({ ...attached, hostConfig: { ...host, Dns: ['127.0.0.53'] } }, caps, NETWORK.name)).toEqual([expect.stringMatching(/DNS/)]);
    const env = (attached.config as Mutable).Env as string[];
    const noProxy = { ...attached, config: { ...attached.config, Env: env.filter((e) => !e.startsWith('https_proxy=')) } };
    expect(hardeningProblems(noProxy, caps, NETWORK.name)).toEqual([expect.stringMatching(/^an egress sandbox's proxy variables are/)]);
    expect(() => confirmedHardening(inspected(), caps, NETWORK.name)).toThrow(/the network is|NetworkMode is "none", not "cairn-egress-run_unit1-1"/);
  });
});

describe('the hardening sandbox.created records', () => {
  it('reads what the engine reports: read-only root, no capabilities, no-new-privileges, the user, init, limits, tmpfs, no network, which seccomp profile, no remapping', () => {
    expect(confirmedHardening(inspected(), caps)).toEqual({
      read_only_root: true,
      cap_drop: ['ALL'],
      cap_add: [],
      no_new_privileges: true,
      user: '65520:65520',
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
      seccomp: 'custom',
      seccomp_profile_sha256: ours.sha256.slice('sha256:'.length),
      userns_remap: false,
    });
  });

  it('tells the seccomp profile in force: a custom one, the engine default, or none', () => {
    expect(hardeningOf(changed(({ host }) => (host.SecurityOpt = ['no-new-privileges', 'seccomp=unconfined']))).seccomp).toBe('unconfined');
    expect(hardeningOf(changed(({ host }) => (host.SecurityOpt = ['no-new-privileges']))).seccomp).toBe('default');
    expect(hardeningOf(changed(({ whole }) => (whole.engineSecurityOptions = ['name=apparmor']))).seccomp).toBe('unconfined');
    const other = hardeningOf(changed(({ host }) => (host.SecurityOpt = ['no-new-privileges', 'seccomp={"defaultAction":"SCMP_ACT_ERRNO"}'])));
    expect(other).toMatchObject({ seccomp: 'custom' });
    expect(other.seccomp_profile_sha256).not.toBe(ours.sha256.slice(7));
    expect(hardeningOf(changed(({ host }) => (host.SecurityOpt = ['no-new-privileges']))).seccomp_profile_sha256).toBeUndefined();
  });

  it('records the remapping where the engine reports it', () => {
    expect(hardeningOf(changed(({ whole }) => (whole.engineSecurityOptions = [...ENGINE, 'name=userns']))).userns_remap).toBe(true);
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
