import { CairnError, SandboxHardeningSchema } from '@cairn/contracts';
import type { SandboxHardening } from '@cairn/contracts';
import { memoryLimitMiB, tmpfsLayout } from '@cairn/sandbox';
import type { SandboxCaps } from '@cairn/sandbox';
import {
  AGENT_DIR_IN_SANDBOX,
  AGENT_PATH_IN_SANDBOX,
  AGENT_SOCKET_IN_SANDBOX,
  MASKED_PATHS,
  NO_RESOLVER,
  READONLY_PATHS,
  SANDBOX_ENV,
  SANDBOX_HOSTNAME,
  sandboxSeccomp,
  SECRETS_DIR,
  SECRETS_TMPFS_MIB,
} from '@cairn/sandbox-docker';
import { createHash } from 'node:crypto';

/*
 * The check at start (docs/sandbox-hardening.md): before any step runs, what the engine reports
 * of the sandbox (`docker inspect`, `docker info`) is compared field by field with every setting
 * the docs promise; one that differs fails the run E_SANDBOX_START, and the sandbox is destroyed.
 * The expectations are written out here from the caps and the worker's configuration, not taken
 * from the options the driver sent: a driver that asked for less is caught too.
 */

/** What this worker gives every sandbox beyond its caps: its configuration, not the engine's word. */
export interface SandboxPromise {
  readonly user: { readonly uid: number; readonly gid: number };
  /** The image id the sandbox was created from. */
  readonly imageId: string;
  /** The exec agent's binary on the host, and the directory its sandboxes' socket directories are made in; null: no agent. */
  readonly agent: { readonly binary: string; readonly socketDirs: string } | null;
  /** The worker must run sandboxes user-namespace-remapped (CAIRN_SANDBOX_REQUIRE_USERNS). */
  readonly requireUserns: boolean;
}

/** What the engine reports about a started sandbox, as plain data, and what was promised of it. */
export interface InspectedSandbox {
  /** `docker inspect`: `HostConfig`, `Config`, `Mounts`, `Image`, `AppArmorProfile`. */
  readonly hostConfig: object;
  readonly config: object;
  readonly mounts: readonly unknown[];
  readonly image: string;
  readonly appArmorProfile: string;
  /** `docker info`'s `SecurityOptions` (`name=seccomp,profile=default`, `name=userns`, …). */
  readonly engineSecurityOptions: readonly string[];
  readonly promised: SandboxPromise;
}

type Caps = Pick<SandboxCaps, 'pids' | 'memoryMiB' | 'diskMiB' | 'cpus'>;

const MIB = 1024 * 1024;
const SIZE_UNITS: Readonly<Record<string, number>> = { '': 1, k: 1024, m: MIB, g: 1024 * MIB };
/** What every sandbox's OOM score is raised by: it dies before the services watching it. */
const OOM_SCORE_ADJ = 500;
const ULIMITS = [
  { Name: 'core', Soft: 0, Hard: 0 },
  { Name: 'nofile', Soft: 8192, Hard: 8192 },
];
const PROXY_VARIABLES = ['HTTP_PROXY', 'HTTPS_PROXY', 'http_proxy', 'https_proxy'];

function get(value: unknown, key: string): unknown {
  return typeof value === 'object' && value !== null ? (value as Record<string, unknown>)[key] : undefined;
}

function strings(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : [];
}

/** null, undefined, `[]` and `{}` alike: the engine reports an unset list either way. */
function isEmpty(value: unknown): boolean {
  if (value === null || value === undefined) return true;
  if (Array.isArray(value)) return value.length === 0;
  return typeof value === 'object' && Object.keys(value).length === 0;
}

function show(value: unknown, max = 120): string {
  const text = JSON.stringify(value) ?? String(value);
  return text.length > max ? `${text.slice(0, max - 3)}...` : text;
}

function sameSet(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && [...a].sort().join('\n') === [...b].sort().join('\n');
}

/** `ALL`, `CAP_NET_RAW` → `ALL`, `NET_RAW`: the engine takes either spelling. */
function capability(name: string): string {
  return name.toUpperCase().replace(/^CAP_/, '');
}

/** `size=` of a tmpfs option string (`rw,noexec,size=8m,…`) in bytes; 0 when absent or not a size. */
export function tmpfsSizeBytes(options: string): number {
  for (const option of options.split(',')) {
    const match = /^size=(\d+)([kmg]?)$/i.exec(option.trim());
    if (match !== null) return Number(match[1]) * (SIZE_UNITS[(match[2] ?? '').toLowerCase()] ?? 0);
  }
  return 0;
}

/** The seccomp profile named in `SecurityOpt` (the text after `seccomp=`), or null for none. */
function seccompOption(securityOpt: readonly string[]): string | null {
  const chosen = securityOpt.find((opt) => /^seccomp[=:]/.test(opt));
  return chosen === undefined ? null : chosen.slice('seccomp='.length);
}

function engineHas(inspected: InspectedSandbox, name: string): boolean {
  return inspected.engineSecurityOptions.some((opt) => opt.split(',').includes(`name=${name}`));
}

function sha256Hex(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/** The hardening `sandbox.created` records, from what the engine reports (not from what was asked). */
export function hardeningOf(inspected: InspectedSandbox): SandboxHardening {
  const host = inspected.hostConfig;
  const securityOpt = strings(get(host, 'SecurityOpt'));
  const tmpfs: SandboxHardening['tmpfs'] = {};
  const mounts = get(host, 'Tmpfs');
  for (const [path, options] of Object.entries(typeof mounts === 'object' && mounts !== null ? mounts : {})) {
    if (typeof options !== 'string') continue;
    const flags = options.split(',').map((o) => o.trim());
    tmpfs[path] = { size_bytes: tmpfsSizeBytes(options), exec: !flags.includes('noexec') };
  }
  const profile = seccompOption(securityOpt);
  // No profile named: the engine's default applies — if the engine has seccomp at all.
  const seccomp: SandboxHardening['seccomp'] = !engineHas(inspected, 'seccomp') || profile === 'unconfined' ? 'unconfined' : profile === null ? 'default' : 'custom';
  const number = (key: string): number => {
    const value = get(host, key);
    return typeof value === 'number' ? value : 0;
  };
  const network = get(host, 'NetworkMode');
  const user = get(inspected.config, 'User');
  return {
    read_only_root: get(host, 'ReadonlyRootfs') === true,
    cap_drop: strings(get(host, 'CapDrop')).map(capability),
    cap_add: strings(get(host, 'CapAdd')).map(capability),
    no_new_privileges: securityOpt.some((opt) => /^no-new-privileges([=:]true)?$/.test(opt)),
    user: typeof user === 'string' ? user : '',
    init: get(host, 'Init') === true,
    pids_limit: number('PidsLimit'),
    memory_bytes: number('Memory'),
    network: typeof network === 'string' ? network : '',
    tmpfs,
    seccomp,
    ...(seccomp === 'custom' && profile !== null ? { seccomp_profile_sha256: sha256Hex(profile) } : {}),
    userns_remap: engineHas(inspected, 'userns'),
  };
}

/** The tmpfs mounts every sandbox has, path → options as a set (docs/sandbox-hardening.md, "Settings"). */
function expectedTmpfs(caps: Caps, user: SandboxPromise['user']): Map<string, string[]> {
  const expected = new Map<string, string[]>();
  for (const mount of tmpfsLayout(caps.diskMiB)) {
    const options = ['rw', mount.exec ? 'exec' : 'noexec', 'nosuid', 'nodev', `size=${mount.sizeMiB}m`, `nr_inodes=${mount.inodes}`];
    if (mount.exec) options.push(`uid=${user.uid}`, `gid=${user.gid}`, 'mode=0755');
    expected.set(mount.path, options);
  }
  expected.set(SECRETS_DIR, ['rw', 'noexec', 'nosuid', 'nodev', `size=${SECRETS_TMPFS_MIB}m`, 'nr_inodes=64', 'uid=0', `gid=${user.gid}`, 'mode=0750']);
  return expected;
}

function tmpfsProblems(reported: unknown, caps: Caps, user: SandboxPromise['user']): string[] {
  const problems: string[] = [];
  const mounts: Record<string, unknown> = typeof reported === 'object' && reported !== null ? (reported as Record<string, unknown>) : {};
  const expected = expectedTmpfs(caps, user);
  for (const [path, want] of expected) {
    const options = mounts[path];
    if (typeof options !== 'string') {
      problems.push(`${path} is not a tmpfs`);
      continue;
    }
    const have = options.split(',').map((o) => o.trim());
    const missing = want.filter((o) => !have.includes(o));
    const extra = have.filter((o) => !want.includes(o));
    if (missing.length > 0 || extra.length > 0) {
      problems.push(`the tmpfs at ${path} is ${JSON.stringify(options)}, not ${JSON.stringify(want.join(','))}`);
    }
  }
  for (const path of Object.keys(mounts)) if (!expected.has(path)) problems.push(`an unexpected tmpfs at ${path}`);
  return problems;
}

/** The binds that give a sandbox its agent (`agentBinds`): the binary and the sandbox's own socket directory, both read-only. */
function bindProblems(inspected: InspectedSandbox): string[] {
  const problems: string[] = [];
  const binds = strings(get(inspected.hostConfig, 'Binds'));
  const { agent } = inspected.promised;
  const socketDir = new RegExp(`^${escapeRegExp(agent?.socketDirs ?? '')}/[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`);
  const expected: { source: (s: string) => boolean; destination: string }[] =
    agent === null
      ? []
      : [
          { source: (s) => s === agent.binary, destination: AGENT_PATH_IN_SANDBOX },
          { source: (s) => socketDir.test(s), destination: AGENT_DIR_IN_SANDBOX },
        ];
  const bindsOk =
    binds.length === expected.length &&
    expected.every((want) =>
      binds.some((bind) => {
        const parts = bind.split(':');
        return parts.length === 3 && want.source(parts[0]!) && parts[1] === want.destination && parts[2] === 'ro';
      }),
    );
  if (!bindsOk) {
    const wanted = agent === null ? 'none' : `${agent.binary}:${AGENT_PATH_IN_SANDBOX}:ro and ${agent.socketDirs}/<sandbox>:${AGENT_DIR_IN_SANDBOX}:ro`;
    problems.push(`the binds are ${show(binds, 600)}, not ${wanted}`);
  }
  // What is really mounted (binds, and volumes an image declares): exactly those binds, read-only, private.
  const mounted = inspected.mounts;
  const mountsOk =
    mounted.length === expected.length &&
    expected.every((want) =>
      mounted.some(
        (m) =>
          get(m, 'Type') === 'bind' &&
          want.source(String(get(m, 'Source'))) &&
          get(m, 'Destination') === want.destination &&
          get(m, 'RW') === false &&
          get(m, 'Propagation') === 'rprivate',
      ),
    );
  if (!mountsOk) {
    problems.push(`the mounts are ${show(mounted.map((m) => `${String(get(m, 'Type'))}:${String(get(m, 'Source'))}:${String(get(m, 'Destination'))}:${get(m, 'RW') === false ? 'ro' : 'rw'}`), 600)}, not only the agent's read-only binds`);
  }
  return problems;
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

function securityOptProblems(inspected: InspectedSandbox): string[] {
  const problems: string[] = [];
  const securityOpt = strings(get(inspected.hostConfig, 'SecurityOpt'));
  if (!securityOpt.some((opt) => /^no-new-privileges([=:]true)?$/.test(opt))) problems.push('no-new-privileges is off');
  const profile = seccompOption(securityOpt);
  const ours = sandboxSeccomp();
  if (!engineHas(inspected, 'seccomp')) problems.push('the engine applies no seccomp profile at all');
  if (profile === null) problems.push("the seccomp profile is the engine's default, not Cairn's");
  else if (profile === 'unconfined') problems.push('seccomp is unconfined');
  else if (profile !== ours.json) problems.push(`the seccomp profile is another one (sha256 ${sha256Hex(profile)}), not Cairn's (${ours.sha256})`);
  const others = securityOpt.filter((opt) => !/^no-new-privileges([=:]true)?$/.test(opt) && !/^seccomp[=:]/.test(opt));
  if (others.length > 0) problems.push(`unexpected security options: ${show(others)}`);
  const seccompCount = securityOpt.filter((opt) => /^seccomp[=:]/.test(opt)).length;
  if (seccompCount > 1) problems.push(`${seccompCount} seccomp options`);
  return problems;
}

function configProblems(inspected: InspectedSandbox, network: string): string[] {
  const problems: string[] = [];
  const { config, promised } = inspected;
  const user = `${promised.user.uid}:${promised.user.gid}`;
  if (get(config, 'User') !== user) problems.push(`the user is ${show(get(config, 'User'))}, not ${user}`);
  if (get(config, 'Hostname') !== SANDBOX_HOSTNAME) problems.push(`the host name is ${show(get(config, 'Hostname'))}, not ${SANDBOX_HOSTNAME}`);
  if (get(config, 'WorkingDir') !== '/work') problems.push(`the working directory is ${show(get(config, 'WorkingDir'))}, not /work`);
  if (get(config, 'Tty') === true) problems.push('Config.Tty is on');
  // With the agent its stdin is open once, for its token (ADR 0005, amendment), and closed after it; without it, never.
  const stdinOnce = promised.agent !== null;
  for (const key of ['OpenStdin', 'AttachStdin']) {
    if ((get(config, key) === true) !== stdinOnce) problems.push(stdinOnce ? `Config.${key} is off: the agent's token has no way in` : `Config.${key} is on`);
  }
  if (stdinOnce && get(config, 'StdinOnce') !== true) problems.push("Config.StdinOnce is off: the sandbox's stdin would stay open after the token");
  if (!isEmpty(get(config, 'ExposedPorts'))) problems.push(`ports are exposed: ${show(get(config, 'ExposedPorts'))}`);
  if (!isEmpty(get(config, 'Volumes'))) problems.push(`volumes are declared: ${show(get(config, 'Volumes'))}`);
  if (inspected.image !== promised.imageId) problems.push(`the image is ${show(inspected.image)}, not ${promised.imageId}`);

  const env = strings(get(config, 'Env'));
  for (const entry of SANDBOX_ENV) if (!env.includes(entry)) problems.push(`the environment lacks ${entry}`);
  const named = (name: string) => env.filter((e) => e.startsWith(`${name}=`));
  for (const entry of SANDBOX_ENV) {
    const name = entry.slice(0, entry.indexOf('='));
    if (named(name).length > 1) problems.push(`the environment sets ${name} more than once`);
  }
  const proxies = PROXY_VARIABLES.flatMap(named);
  if (network === 'none' && proxies.length > 0) problems.push(`a sandbox without network has proxy variables: ${show(proxies)}`);
  if (network !== 'none' && (proxies.length !== PROXY_VARIABLES.length || new Set(proxies.map((p) => p.slice(p.indexOf('=') + 1))).size !== 1)) {
    problems.push(`an egress sandbox's proxy variables are ${show(proxies)}, not the four naming its proxy`);
  }
  const leaked = env.filter((e) => e.startsWith('CAIRN_'));
  if (leaked.length > 0) problems.push(`the environment carries Cairn's own variables: ${show(leaked.map((e) => e.slice(0, e.indexOf('='))))}`);

  const entrypoint = strings(get(config, 'Entrypoint'));
  const cmd = strings(get(config, 'Cmd'));
  const lifetime = (value: string | undefined) => value !== undefined && /^[1-9][0-9]{0,9}$/.test(value);
  const mainOk =
    promised.agent === null
      ? sameList(entrypoint, ['sleep']) && cmd.length === 1 && lifetime(cmd[0])
      : sameList(entrypoint, [AGENT_PATH_IN_SANDBOX]) && cmd.length === 2 && cmd[0] === AGENT_SOCKET_IN_SANDBOX && lifetime(cmd[1]);
  if (!mainOk) problems.push(`the main process is ${show([...entrypoint, ...cmd])}, not ${promised.agent === null ? 'sleep <lifetime>' : `${AGENT_PATH_IN_SANDBOX} ${AGENT_SOCKET_IN_SANDBOX} <lifetime>`}`);
  return problems;
}

function sameList(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((v, i) => v === b[i]);
}

/**
 * Everything the engine reports that differs from what docs/sandbox-hardening.md promises every
 * sandbox for these caps and this worker's configuration; empty when it all holds. `network`:
 * `none`, or the egress network the sandbox must be on alone.
 */
export function hardeningProblems(inspected: InspectedSandbox, caps: Caps, network = 'none'): string[] {
  const host = inspected.hostConfig;
  const problems: string[] = [];
  const memory = memoryLimitMiB(caps) * MIB;
  const shm = tmpfsLayout(caps.diskMiB).find((m) => m.path === '/dev/shm')?.sizeMiB ?? 1;
  const exactly: [string, unknown][] = [
    ['Privileged', false],
    ['ReadonlyRootfs', true],
    ['Init', true],
    ['PidsLimit', caps.pids],
    ['Memory', memory],
    // Equal to Memory: no swap.
    ['MemorySwap', memory],
    ['OomKillDisable', false],
    ['OomScoreAdj', OOM_SCORE_ADJ],
    ['NanoCpus', Math.round(caps.cpus * 1e9)],
    ['ShmSize', shm * MIB],
    ['NetworkMode', network],
    ['IpcMode', 'private'],
    ['CgroupnsMode', 'private'],
    ['PidMode', ''],
    ['UTSMode', ''],
    // `host` would opt this container out of the engine's remapping.
    ['UsernsMode', ''],
    ['CgroupParent', ''],
    ['PublishAllPorts', false],
    ['AutoRemove', false],
  ];
  for (const [key, want] of exactly) {
    const have = get(host, key);
    if (have !== want) problems.push(`HostConfig.${key} is ${show(have)}, not ${show(want)}`);
  }
  const restart = get(get(host, 'RestartPolicy'), 'Name');
  if (restart !== 'no' && restart !== '') problems.push(`the restart policy is ${show(restart)}, not no`);
  const log = get(get(host, 'LogConfig'), 'Type');
  if (log !== 'none') problems.push(`the log driver is ${show(log)}, not none`);

  const capDrop = strings(get(host, 'CapDrop')).map(capability);
  if (!sameList(capDrop, ['ALL'])) problems.push(`the capabilities dropped are ${show(capDrop)}, not ALL`);
  const capAdd = get(host, 'CapAdd');
  if (!isEmpty(capAdd)) problems.push(`capabilities added: ${strings(capAdd).map(capability).join(', ') || show(capAdd)}`);

  for (const key of ['Devices', 'DeviceCgroupRules', 'DeviceRequests', 'Mounts', 'VolumesFrom', 'GroupAdd', 'Sysctls', 'PortBindings', 'Links', 'ExtraHosts', 'DnsOptions', 'DnsSearch']) {
    const have = get(host, key);
    if (!isEmpty(have)) problems.push(`HostConfig.${key} is ${show(have)}, not empty`);
  }
  const dns = strings(get(host, 'Dns'));
  const wantDns = network === 'none' ? [] : [NO_RESOLVER];
  if (!sameList(dns, wantDns)) problems.push(`the sandbox's DNS is ${show(dns)}, not ${network === 'none' ? 'none' : `only ${NO_RESOLVER} (no resolver)`}`);

  const ulimits = (Array.isArray(get(host, 'Ulimits')) ? (get(host, 'Ulimits') as unknown[]) : []).map((u) => `${String(get(u, 'Name'))}=${String(get(u, 'Soft'))}:${String(get(u, 'Hard'))}`);
  if (!sameSet(ulimits, ULIMITS.map((u) => `${u.Name}=${u.Soft}:${u.Hard}`))) problems.push(`the ulimits are ${show(ulimits)}, not core=0 and nofile=8192`);
  const masked = strings(get(host, 'MaskedPaths'));
  if (!sameSet(masked, MASKED_PATHS)) problems.push(`the masked paths are ${show(masked)}, not ${show(MASKED_PATHS)}`);
  const readonly = strings(get(host, 'ReadonlyPaths'));
  if (!sameSet(readonly, READONLY_PATHS)) problems.push(`the read-only paths are ${show(readonly)}, not ${show(READONLY_PATHS)}`);

  problems.push(...securityOptProblems(inspected));
  problems.push(...tmpfsProblems(get(host, 'Tmpfs'), caps, inspected.promised.user));
  problems.push(...bindProblems(inspected));
  problems.push(...configProblems(inspected, network));

  if (inspected.appArmorProfile === 'unconfined') problems.push('AppArmor is unconfined');
  if (engineHas(inspected, 'apparmor') && inspected.appArmorProfile === '') problems.push('the engine has AppArmor, and the sandbox has no profile');
  if (inspected.promised.requireUserns && !engineHas(inspected, 'userns')) {
    problems.push('the engine does not remap user namespaces, and this worker must (CAIRN_SANDBOX_REQUIRE_USERNS)');
  }

  const parsed = SandboxHardeningSchema.safeParse(hardeningOf(inspected));
  if (!parsed.success) problems.push(...parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`));
  return problems;
}

/**
 * The hardening to record, or E_SANDBOX_START naming everything the engine did not apply: no step
 * runs in such a sandbox. `network`: `none`, or the egress network the sandbox must be on alone —
 * with no resolver that answers (NO_RESOLVER), since names are the egress proxy's to resolve.
 */
export function confirmedHardening(inspected: InspectedSandbox, caps: Caps, network = 'none'): SandboxHardening {
  const problems = hardeningProblems(inspected, caps, network);
  if (problems.length > 0) {
    throw new CairnError('E_SANDBOX_START', `the sandbox is not hardened as required: ${problems.join('; ')}`, { problems });
  }
  return hardeningOf(inspected);
}
