import { containerName, memoryLimitMiB, poolLabels, sandboxLabels, tmpfsLayout, type SandboxSpec, type TmpfsMount } from '@cairn/sandbox';
import type Docker from 'dockerode';
import { sandboxSeccomp } from './seccomp-profile.js';

/** The unprivileged identity every sandbox process runs as; never root. */
export interface SandboxUser {
  uid: number;
  gid: number;
}

/**
 * 65520:65520, an id nothing on a Debian/systemd host hands out (docs/sandbox-hardening.md, "The
 * sandbox user"): Debian reserves 65000–65533, systemd leaves 65520–65533 unused (its dynamic users
 * end at 65519, and those never appear in /etc/passwd), so a breakout owns no one's files. Below
 * 65536, so it maps into the 65536 ids an engine's `userns-remap=default` range gives a container;
 * below 65534 (nobody) and 65535 (16-bit -1). The runtime refuses one its host's passwd or group names.
 */
export const DEFAULT_SANDBOX_USER: SandboxUser = Object.freeze({ uid: 65520, gid: 65520 });

/** The largest id: 2^32 - 1 is `(uid_t) -1`, "no change" to the kernel. */
const MAX_ID = 4_294_967_294;

/** Why `user` cannot be the sandbox's, or null: root, -1 (32- or 16-bit) and non-integers are refused. */
export function sandboxUserProblem(user: SandboxUser): string | null {
  for (const [what, id] of [['uid', user.uid], ['gid', user.gid]] as const) {
    if (!Number.isInteger(id) || id < 1 || id > MAX_ID) return `the sandbox ${what} must be an integer from 1 to ${MAX_ID}, not ${id}`;
    if (id === 65_535) return `the sandbox ${what} may not be 65535 ((uint16_t) -1 to older tools)`;
  }
  return null;
}

/**
 * What runc masks (bind-mounts /dev/null or an empty read-only tmpfs over) and makes read-only in
 * /proc and /sys: Docker 20.10's defaults (moby oci/defaults.go), set explicitly so that they do not
 * depend on the engine, plus the RAPL energy counters (CVE-2020-8694, a power side channel).
 */
export const MASKED_PATHS = Object.freeze([
  '/proc/asound',
  '/proc/acpi',
  '/proc/kcore',
  '/proc/keys',
  '/proc/latency_stats',
  '/proc/timer_list',
  '/proc/timer_stats',
  '/proc/sched_debug',
  '/proc/scsi',
  '/sys/firmware',
  '/sys/devices/virtual/powercap',
]);
export const READONLY_PATHS = Object.freeze(['/proc/bus', '/proc/fs', '/proc/irq', '/proc/sys', '/proc/sysrq-trigger']);

const MiB = 1024 * 1024;

/** The sandbox's host name: the container id does not leak into it. */
export const SANDBOX_HOSTNAME = 'sandbox';

export const SANDBOX_ENV = Object.freeze([
  'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
  // The root is read-only: tools that write to $HOME or $TMPDIR must land on tmpfs.
  'HOME=/work',
  'TMPDIR=/tmp',
]);

/** Options of one tmpfs mount. Docker's tmpfs default is `noexec`, so exec is said explicitly. */
export function tmpfsOptions(mount: TmpfsMount, user: SandboxUser): string {
  const options = ['rw', mount.exec ? 'exec' : 'noexec', 'nosuid', 'nodev', `size=${mount.sizeMiB}m`, `nr_inodes=${mount.inodes}`];
  // Program mounts belong to the sandbox user; /tmp and /dev/shm keep tmpfs's sticky 1777.
  if (mount.exec) options.push(`uid=${user.uid}`, `gid=${user.gid}`, 'mode=0755');
  return options.join(',');
}

/**
 * An egress network a sandbox joins instead of `none` (egress-network.ts): an internal bridge whose
 * only way out is the proxy that `env` names.
 */
export interface SandboxNetwork {
  name: string;
  /** `HTTP_PROXY=…` and friends. */
  env: readonly string[];
}

/**
 * The resolver an egress sandbox is given: Docker's embedded DNS forwards what it cannot answer to
 * this address from inside the sandbox's own network namespace, where nothing listens — so no name
 * resolves, and no query leaves (CVE-2024-29018: never a loopback resolver, which the engine would
 * query from the host's namespace). Names are the egress proxy's to resolve.
 */
export const NO_RESOLVER = '0.0.0.0';

/** Where a run's secrets are mounted, one file each (`/run/secrets/NAME`). */
export const SECRETS_DIR = '/run/secrets';
/** Room for the most a run may have: 32 secrets of at most 32 KiB each. */
export const SECRETS_TMPFS_MIB = 2;

/**
 * The secrets tmpfs: owned by root with the sandbox user's group, `0750`, so the sandbox's
 * processes may read what the runtime writes there (as root, files `0440`) but never add, change,
 * remove or re-mode anything, nor fill it; not executable. Empty in a run without secrets. Its few
 * pages are charged to the sandbox's memory like the other tmpfs mounts.
 */
export function secretsTmpfsOptions(user: SandboxUser): string {
  return ['rw', 'noexec', 'nosuid', 'nodev', `size=${SECRETS_TMPFS_MIB}m`, 'nr_inodes=64', 'uid=0', `gid=${user.gid}`, 'mode=0750'].join(',');
}

/** What the engine is told beyond `HostConfig`'s typed fields (API 1.41 knows them; the types lag). */
type HostConfig = NonNullable<Docker.ContainerCreateOptions['HostConfig']> & {
  CgroupnsMode: 'private' | 'host';
  MaskedPaths: string[];
  ReadonlyPaths: string[];
};

/**
 * The container every sandbox is: read-only root, no capabilities, no privilege gain, Cairn's
 * seccomp profile, a non-root user of its own, an init as PID 1 reaping an idle `sleep`, hard memory/pids/CPU caps,
 * size-capped tmpfs for everything writable, no network, no IPC, no binds, no devices.
 * Each setting is explained in docs/sandbox-hardening.md.
 */
export function hardenedContainerOptions(
  spec: SandboxSpec,
  imageId: string,
  user: SandboxUser = DEFAULT_SANDBOX_USER,
  network?: SandboxNetwork,
): Docker.ContainerCreateOptions {
  return { name: containerName(spec.labels.chainId, spec.instance), Labels: sandboxLabels(spec.labels), ...hardenedBody(spec, imageId, user, network) };
}

/**
 * A warm-pool container: the very same hardened container as `hardenedContainerOptions`, named
 * and labelled for its pool instead of a chain (a run claims it later, as it is).
 */
export function warmContainerOptions(
  spec: Pick<SandboxSpec, 'caps' | 'lifetimeSeconds'>,
  imageId: string,
  identity: { name: string; workerId: string; poolId: string },
  user: SandboxUser = DEFAULT_SANDBOX_USER,
): Docker.ContainerCreateOptions {
  return { name: identity.name, Labels: poolLabels(identity.workerId, identity.poolId), ...hardenedBody(spec, imageId, user) };
}

function hardenedBody(spec: Pick<SandboxSpec, 'caps' | 'lifetimeSeconds'>, imageId: string, user: SandboxUser, network?: SandboxNetwork): Docker.ContainerCreateOptions {
  const problem = sandboxUserProblem(user);
  if (problem !== null) throw new RangeError(problem);
  const { caps } = spec;
  const layout = tmpfsLayout(caps.diskMiB);
  const tmpfs: Record<string, string> = {};
  for (const mount of layout) tmpfs[mount.path] = tmpfsOptions(mount, user);
  tmpfs[SECRETS_DIR] = secretsTmpfsOptions(user);
  const shm = layout.find((m) => m.path === '/dev/shm');
  const memoryBytes = memoryLimitMiB(caps) * MiB;

  const hostConfig: HostConfig = {
    ReadonlyRootfs: true,
    CapDrop: ['ALL'],
    CapAdd: [],
    Privileged: false,
    // Docker's default seccomp profile, tightened (seccomp-profile.ts); never `unconfined`.
    SecurityOpt: ['no-new-privileges', sandboxSeccomp().securityOpt],
    MaskedPaths: [...MASKED_PATHS],
    ReadonlyPaths: [...READONLY_PATHS],
    Init: true,
    PidsLimit: caps.pids,
    Memory: memoryBytes,
    MemorySwap: memoryBytes,
    OomKillDisable: false,
    // Under host-wide memory pressure, a sandbox dies before the services that watch it.
    OomScoreAdj: 500,
    NanoCpus: Math.round(caps.cpus * 1e9),
    Tmpfs: tmpfs,
    // The /dev/shm tmpfs above takes precedence; ShmSize caps it the same should it not.
    ShmSize: (shm?.sizeMiB ?? 1) * MiB,
    NetworkMode: network?.name ?? 'none',
    ...(network === undefined ? {} : { Dns: [NO_RESOLVER], DnsOptions: [], DnsSearch: [] }),
    IpcMode: 'private',
    CgroupnsMode: 'private',
    // The sandbox's own pid and UTS namespaces, the engine's remapping (if any), the engine's cgroup tree.
    PidMode: '',
    UTSMode: '',
    UsernsMode: '',
    CgroupParent: '',
    RestartPolicy: { Name: 'no', MaximumRetryCount: 0 },
    AutoRemove: false,
    Binds: [],
    Mounts: [],
    Devices: [],
    PublishAllPorts: false,
    Ulimits: [
      { Name: 'core', Soft: 0, Hard: 0 },
      { Name: 'nofile', Soft: 8192, Hard: 8192 },
    ],
    // Step output is read over exec and bounded there; PID 1 writes nothing worth a log file.
    LogConfig: { Type: 'none', Config: {} },
  };

  return {
    Image: imageId,
    Hostname: SANDBOX_HOSTNAME,
    User: `${user.uid}:${user.gid}`,
    WorkingDir: '/work',
    Env: [...SANDBOX_ENV, ...(network?.env ?? [])],
    // PID 1 (under the init) idles for the sandbox's lifetime; every step is an exec.
    Entrypoint: ['sleep'],
    Cmd: [String(spec.lifetimeSeconds)],
    Tty: false,
    OpenStdin: false,
    AttachStdin: false,
    AttachStdout: false,
    AttachStderr: false,
    HostConfig: hostConfig,
    ...(network === undefined ? {} : { NetworkingConfig: { EndpointsConfig: { [network.name]: {} } } }),
  };
}
