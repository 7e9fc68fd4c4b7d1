import { CairnError, SandboxHardeningSchema } from '@cairn/contracts';
import type { SandboxHardening } from '@cairn/contracts';
import { memoryLimitMiB, WRITABLE_MOUNTS } from '@cairn/sandbox';
import { NO_RESOLVER, SECRETS_DIR } from '@cairn/sandbox-docker';
import type { SandboxCaps } from '@cairn/sandbox';

/** What the engine reports about a started sandbox (`docker inspect`, `docker info`), as plain data. */
export interface InspectedSandbox {
  readonly hostConfig: {
    readonly ReadonlyRootfs?: boolean | undefined;
    readonly CapDrop?: unknown;
    readonly CapAdd?: unknown;
    readonly SecurityOpt?: unknown;
    readonly Init?: boolean | undefined;
    readonly PidsLimit?: number | undefined;
    readonly Memory?: number | undefined;
    readonly NetworkMode?: string | undefined;
    /** Resolvers the engine's embedded DNS forwards to; an egress sandbox must have none that answers. */
    readonly Dns?: unknown;
    readonly Tmpfs?: Readonly<Record<string, string>> | undefined;
  };
  /** `Config.User`: empty means the image's user, root for ours. */
  readonly user: string;
  /** The engine's `SecurityOptions`: the default seccomp profile applies only where it names seccomp. */
  readonly engineSecurityOptions: readonly string[];
}

const MIB = 1024 * 1024;
const SIZE_UNITS: Readonly<Record<string, number>> = { '': 1, k: 1024, m: MIB, g: 1024 * MIB };

function strings(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : [];
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

function seccompOf(securityOpt: readonly string[], engineOptions: readonly string[]): SandboxHardening['seccomp'] {
  const chosen = securityOpt.find((opt) => /^seccomp[=:]/.test(opt));
  if (chosen !== undefined) return /^seccomp[=:]unconfined$/.test(chosen) ? 'unconfined' : 'custom';
  // No profile named: the engine's default applies — if the engine has seccomp at all.
  return engineOptions.some((opt) => opt.split(',').includes('name=seccomp')) ? 'default' : 'unconfined';
}

/** The hardening `sandbox.created` records, from what the engine reports (not from what was asked). */
export function hardeningOf(inspected: InspectedSandbox): SandboxHardening {
  const host = inspected.hostConfig;
  const securityOpt = strings(host.SecurityOpt);
  const tmpfs: SandboxHardening['tmpfs'] = {};
  for (const [path, options] of Object.entries(host.Tmpfs ?? {})) {
    const flags = options.split(',').map((o) => o.trim());
    tmpfs[path] = { size_bytes: tmpfsSizeBytes(options), exec: !flags.includes('noexec') };
  }
  return {
    read_only_root: host.ReadonlyRootfs === true,
    cap_drop: strings(host.CapDrop).map(capability),
    cap_add: strings(host.CapAdd).map(capability),
    no_new_privileges: securityOpt.some((opt) => /^no-new-privileges([=:]true)?$/.test(opt)),
    user: inspected.user,
    init: host.Init === true,
    pids_limit: host.PidsLimit ?? 0,
    memory_bytes: host.Memory ?? 0,
    network: host.NetworkMode ?? '',
    tmpfs,
    seccomp: seccompOf(securityOpt, inspected.engineSecurityOptions),
  };
}

/**
 * Where the reported hardening falls short of what every Cairn sandbox must have
 * (docs/sandbox-hardening.md) for the caps it was given; empty when it holds.
 */
export function hardeningProblems(hardening: SandboxHardening, caps: Pick<SandboxCaps, 'pids' | 'memoryMiB' | 'diskMiB'>, network = 'none'): string[] {
  const problems: string[] = [];
  if (!hardening.read_only_root) problems.push('the root file system is writable');
  if (!hardening.cap_drop.includes('ALL')) problems.push('not every capability is dropped');
  if (hardening.cap_add.length > 0) problems.push(`capabilities added: ${hardening.cap_add.join(', ')}`);
  if (!hardening.no_new_privileges) problems.push('no-new-privileges is off');
  if (!/^[1-9][0-9]*:[1-9][0-9]*$/.test(hardening.user)) problems.push(`the user is ${JSON.stringify(hardening.user)}, not a non-root uid:gid`);
  if (!hardening.init) problems.push('no init is PID 1');
  if (hardening.pids_limit !== caps.pids) problems.push(`the pids limit is ${hardening.pids_limit}, not ${caps.pids}`);
  const memory = memoryLimitMiB(caps) * MIB;
  if (hardening.memory_bytes !== memory) problems.push(`the memory limit is ${hardening.memory_bytes} bytes, not ${memory}`);
  if (hardening.network !== network) problems.push(`the network is ${JSON.stringify(hardening.network)}, not ${network}`);
  if (hardening.seccomp === 'unconfined') problems.push('no seccomp profile applies');
  for (const path of WRITABLE_MOUNTS) {
    if ((hardening.tmpfs[path]?.size_bytes ?? 0) <= 0) problems.push(`${path} is not a size-capped tmpfs`);
  }
  const secrets = hardening.tmpfs[SECRETS_DIR];
  if (secrets === undefined || secrets.size_bytes <= 0 || secrets.exec) problems.push(`${SECRETS_DIR} is not a size-capped, non-executable tmpfs`);
  const parsed = SandboxHardeningSchema.safeParse(hardening);
  if (!parsed.success) problems.push(...parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`));
  return problems;
}

/**
 * The hardening to record, or E_SANDBOX_START naming what the engine did not apply: no step runs in
 * such a sandbox. `network`: `none`, or the egress network the sandbox must be on alone — with no
 * resolver that answers (NO_RESOLVER), since names are the egress proxy's to resolve.
 */
export function confirmedHardening(inspected: InspectedSandbox, caps: Pick<SandboxCaps, 'pids' | 'memoryMiB' | 'diskMiB'>, network = 'none'): SandboxHardening {
  const hardening = hardeningOf(inspected);
  const problems = hardeningProblems(hardening, caps, network);
  if (network !== 'none') {
    const dns = strings(inspected.hostConfig.Dns);
    if (dns.length !== 1 || dns[0] !== NO_RESOLVER) problems.push(`the sandbox's DNS is ${JSON.stringify(dns)}, not only ${NO_RESOLVER} (no resolver)`);
  }
  if (problems.length > 0) {
    throw new CairnError('E_SANDBOX_START', `the sandbox is not hardened as required: ${problems.join('; ')}`, { problems });
  }
  return hardening;
}
