import { ArtifactBucketConfigSchema, ArtifactStoreConfigSchema, EvidenceLogConfigSchema, loadConfig, SecretValuesConfigSchema } from '@cairn/config';
import { CairnError, MAX_BUILD_CONTEXT_BYTES, MAX_BUILD_TIMEOUT_SECONDS, WorkerIdSchema } from '@cairn/contracts';
import { OperationalConfigSchema } from '@cairn/operational';
import { DEFAULT_DOCKER_SOCKET, DEFAULT_SANDBOX_USER, parseEgressHosts, sandboxUserProblem } from '@cairn/sandbox-docker';
import { readFileSync } from 'node:fs';
import { availableParallelism, hostname, totalmem } from 'node:os';
import { resolve } from 'node:path';
import { z } from 'zod';

/** What the defaults are derived from; a parameter so the schema is testable without this host. */
export interface HostFacts {
  hostname: string;
  memoryMiB: number;
  cpus: number;
  cwd: string;
  /** The host's accounts (`/etc/passwd`) and groups (`/etc/group`), id → name: the sandbox's ids must be none of them. */
  users: ReadonlyMap<number, string>;
  groups: ReadonlyMap<number, string>;
  /** Processes (threads) the kernel allows at once: the least of `pid_max` and `threads-max`; absent: 32768. */
  pidsMax?: number;
}

/** A number from a /proc file, or null when it cannot be read. */
function procNumber(path: string): number | null {
  try {
    const value = Number(readFileSync(path, 'utf8').trim());
    return Number.isSafeInteger(value) && value > 0 ? value : null;
  } catch {
    return null;
  }
}

/** id → name of a passwd- or group-format file (`name:x:id:…`); empty when there is no such file. */
export function idsOf(path: string): Map<number, string> {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    if ((error as { code?: unknown }).code === 'ENOENT') return new Map();
    throw error;
  }
  const ids = new Map<number, string>();
  for (const line of text.split('\n')) {
    const [name, , id] = line.split(':');
    if (name !== undefined && name !== '' && !name.startsWith('#') && id !== undefined && /^\d+$/.test(id)) ids.set(Number(id), name);
  }
  return ids;
}

export function hostFacts(): HostFacts {
  return {
    hostname: hostname(),
    memoryMiB: Math.floor(totalmem() / (1024 * 1024)),
    cpus: availableParallelism(),
    cwd: process.cwd(),
    users: idsOf('/etc/passwd'),
    groups: idsOf('/etc/group'),
    pidsMax: Math.min(procNumber('/proc/sys/kernel/pid_max') ?? 32_768, procNumber('/proc/sys/kernel/threads-max') ?? 32_768),
  };
}

/** Memory a worker offers by default: the host's, less a tenth kept for the host, the engine and its per-sandbox shims. */
export function defaultWorkerMemoryMiB(host: HostFacts): number {
  return Math.max(1, Math.floor(host.memoryMiB * 0.9));
}

/** A slot per this much of the worker's memory, by default: slots follow memory, not a small constant. */
export const MIB_PER_DEFAULT_SLOT = 128;
/** The most slots a worker registers (its record lists every reservation it holds). */
export const MAX_WORKER_SLOTS = 1024;
/**
 * CPU shares admitted per CPU by default: a session mostly waits for its caller, so a 2-core host
 * holds a hundred of them at one CPU each; runs, busy for their whole life, get their own factor.
 */
export const DEFAULT_CPU_OVERSUBSCRIPTION = 64;
export const DEFAULT_RUN_CPU_OVERSUBSCRIPTION = 1;

/**
 * `uid:gid` every sandbox process runs as: never 0, and no account or group of this host (a
 * process escaping the sandbox must own no one's files). The runtime runs on the host it checks.
 */
function sandboxUserSchema(host: HostFacts) {
  return z
    .string()
    .default(`${DEFAULT_SANDBOX_USER.uid}:${DEFAULT_SANDBOX_USER.gid}`)
    .transform((text, ctx) => {
      const match = /^(\d{1,10}):(\d{1,10})$/.exec(text);
      if (match === null) {
        ctx.addIssue({ code: 'custom', message: 'uid:gid, two numbers' });
        return z.NEVER;
      }
      const user = { uid: Number(match[1]), gid: Number(match[2]) };
      const problem = sandboxUserProblem(user);
      if (problem !== null) ctx.addIssue({ code: 'custom', message: problem });
      const account = host.users.get(user.uid);
      if (account !== undefined) ctx.addIssue({ code: 'custom', message: `uid ${user.uid} is the host's user ${account} (/etc/passwd): choose an id no account has` });
      const group = host.groups.get(user.gid);
      if (group !== undefined) ctx.addIssue({ code: 'custom', message: `gid ${user.gid} is the host's group ${group} (/etc/group): choose an id no group has` });
      return Object.freeze(user);
    });
}

const MIB = 1024 * 1024;
const positiveInt = (max: number) => z.coerce.number().int().min(1).max(max);

/**
 * The runtime's whole configuration, read once at boot. Capacity (slots, memory, disk, processes,
 * cpus and their oversubscription) is fixed here and registered as it is: nothing raises it while
 * the worker runs (I-6, I-9). docs/sandboxes.md, "Capacity", says how to size a host.
 */
export function runtimeConfigSchema(host: HostFacts) {
  const memoryMiB = defaultWorkerMemoryMiB(host);
  const pidsMax = host.pidsMax ?? 32_768;
  return EvidenceLogConfigSchema.extend(OperationalConfigSchema.shape)
    .extend({
      /**
       * The worker's id. Absent: the one kept in CAIRN_WORKER_STATE_DIR, made on the first start from
       * the host name and a random suffix (worker-identity.ts). Set: it names the worker on its first
       * start, and must match the state directory's after that.
       */
      CAIRN_WORKER_ID: WorkerIdSchema.optional(),
      /**
       * The worker's own directory: its id and the lock that keeps a second runtime from starting on
       * it. Default `.cairn/workers/<CAIRN_WORKER_ID>` when the id is set, else `.cairn/worker`.
       */
      CAIRN_WORKER_STATE_DIR: z
        .string()
        .min(1)
        .optional()
        .transform((dir) => (dir === undefined ? undefined : resolve(host.cwd, dir))),
      /**
       * Memory the worker's sandboxes may reserve together (each its memory cap plus its tmpfs):
       * a hard reservation, so at most the host's. Default: 90 % of the host's.
       */
      CAIRN_WORKER_MEMORY_MIB: positiveInt(1 << 24)
        .default(memoryMiB)
        .refine((value) => value <= Math.max(1, host.memoryMiB), `at most the host's memory (${host.memoryMiB} MiB): sandboxes reserve it for real`),
      /** Concurrent sandboxes on this worker; default one per 128 MiB of CAIRN_WORKER_MEMORY_MIB (at least 1, at most 1024). */
      CAIRN_WORKER_SLOTS: positiveInt(MAX_WORKER_SLOTS).optional(),
      CAIRN_WORKER_CPUS: z.coerce.number().positive().max(4096).default(Math.max(1, host.cpus)),
      /** CPU shares admitted per CPU (caps stay hard quotas): sessions and runs together. */
      CAIRN_WORKER_CPU_OVERSUBSCRIPTION: z.coerce.number().min(1).max(1024).default(DEFAULT_CPU_OVERSUBSCRIPTION),
      /** CPU shares admitted per CPU for runs alone (at most CAIRN_WORKER_CPU_OVERSUBSCRIPTION). */
      CAIRN_WORKER_RUN_CPU_OVERSUBSCRIPTION: z.coerce.number().min(1).max(1024).default(DEFAULT_RUN_CPU_OVERSUBSCRIPTION),
      /** Sandbox disks are tmpfs, which lives in memory: by default as much as the host's memory. */
      CAIRN_WORKER_DISK_MIB: positiveInt(1 << 24).default(Math.max(1, host.memoryMiB)),
      /** The pids caps of the worker's sandboxes together; default half of what the kernel allows at once. */
      CAIRN_WORKER_PIDS: positiveInt(1 << 22)
        .default(Math.max(1, Math.floor(pidsMax / 2)))
        .refine((value) => value <= pidsMax, `at most the processes the kernel allows (${pidsMax}: kernel.pid_max, kernel.threads-max)`),
      /** The object store stdout, stderr and collected outputs go to, by sha256 (created here when absent). */
      CAIRN_ARTIFACT_BUCKET: ArtifactBucketConfigSchema.shape.CAIRN_ARTIFACT_BUCKET,
      CAIRN_ARTIFACT_STORE_MAX_BYTES: ArtifactStoreConfigSchema.shape.CAIRN_ARTIFACT_STORE_MAX_BYTES,
      /**
       * The artifact directory of stacks before the object store (docs/adr/0021): what it holds is
       * uploaded once at boot, then it is marked imported. Nothing is written there any more.
       */
      CAIRN_ARTIFACT_DIR: z
        .string()
        .min(1)
        .default('.cairn/artifacts')
        .transform((dir) => resolve(host.cwd, dir)),
      CAIRN_DOCKER_SOCKET: z.string().min(1).default(DEFAULT_DOCKER_SOCKET),
      /** Who runs every sandbox process, the exec agent and every step (docs/sandbox-hardening.md, "The sandbox user"). */
      CAIRN_SANDBOX_USER: sandboxUserSchema(host),
      /** `1`: refuse to start (and to run sandboxes) unless the engine remaps user namespaces (`userns-remap`). */
      CAIRN_SANDBOX_REQUIRE_USERNS: z
        .enum(['0', '1', 'true', 'false'], 'CAIRN_SANDBOX_REQUIRE_USERNS is 0 or 1')
        .default('0')
        .transform((value) => value === '1' || value === 'true'),
      /** `auto` reads the kernel's counters from the host (needs root); `sandbox` looks from inside. */
      CAIRN_SANDBOX_PROBES: z.enum(['auto', 'sandbox']).default('auto'),
      /**
       * The exec agent's static binary and the root of its socket directories, as the engine sees them (it
       * binds both into every sandbox). Absent: the binary built beside @cairn/sandbox-docker and
       * /run/cairn-agent (root) or a temp directory. A runtime in a container sets both to a host directory
       * mounted at the same path (docker-compose.yml).
       */
      CAIRN_AGENT_BINARY: z.string().regex(/^\//, 'an absolute path').optional(),
      CAIRN_AGENT_SOCKET_ROOT: z.string().regex(/^\//, 'an absolute path').optional(),
      CAIRN_HEARTBEAT_MS: z.coerce.number().int().min(100).max(60_000).default(2000),
      /** How often a running run's lease is renewed, and how far ahead each renewal reaches. */
      CAIRN_LEASE_RENEW_MS: z.coerce.number().int().min(100).max(600_000).default(5000),
      CAIRN_LEASE_TTL_MS: z.coerce.number().int().min(1000).max(3_600_000).default(30_000),
      /** Kept of each of a step's stdout and stderr; the rest is counted and dropped. */
      CAIRN_STEP_OUTPUT_MAX_BYTES: z.coerce.number().int().min(0).max(256 * MIB).default(MIB),
      /**
       * How long a run's steps may be held for approval, all holds together: a held step keeps its
       * sandbox and its worker slot, so this bounds what waiting for a person costs (default 24 h,
       * the default approval timeout; a request's `expires_at` never reaches past it).
       */
      CAIRN_STEP_HOLD_MAX_SECONDS: z.coerce.number().int().min(1).max(7 * 86_400).default(86_400),
      /**
       * Operator and test use only: `name=address[,name=address…]`, a fixed table the egress proxy
       * resolves allowlisted names from instead of DNS (a name it lacks does not resolve at all).
       */
      CAIRN_EGRESS_HOSTS: z
        .string()
        .min(1)
        .optional()
        .superRefine((text, ctx) => {
          if (text === undefined) return;
          try {
            parseEgressHosts(text);
          } catch {
            ctx.addIssue({ code: 'custom', message: 'not a list of name=address entries (a host name, =, an IP address; comma-separated)' });
          }
        }),
      /** Egress refusals recorded per run as `egress.denied`; past it they are refused all the same, and logged. */
      CAIRN_EGRESS_DENIALS_RECORDED: z.coerce.number().int().min(1).max(10_000).default(100),
      /**
       * The deployment's secrets private key file (mode 0600, ADR 0028): with it, runs that list
       * secrets their policy decision allowed get them mounted at /run/secrets (read from the
       * catalog bucket, CAIRN_SECRETS_BUCKET); without it they fail E_RUNTIME_ABSENT.
       */
      CAIRN_SECRETS_PRIVATE_KEY_FILE: SecretValuesConfigSchema.shape.CAIRN_SECRETS_PRIVATE_KEY_FILE,
      CAIRN_SECRETS_BUCKET: SecretValuesConfigSchema.shape.CAIRN_SECRETS_BUCKET,
      /** All of a run's collected output files together; more is E_BUDGET. */
      CAIRN_OUTPUT_FILES_MAX_BYTES: z.coerce.number().int().min(0).max(4096 * MIB).default(64 * MIB),
      /**
       * Started, unused, hardened sandboxes kept per profile of the last runs and sessions here (one
       * is claimed, renamed to its chain's `cairn-<chain id>-<n>`, and never reused: a used sandbox is
       * destroyed); refilled in the background. 0 turns the pool off. Never for egress sandboxes.
       */
      CAIRN_WARM_POOL_SIZE: z.coerce.number().int().min(0).max(64).default(2),
      /** Operations on this worker's sandbox sessions served at once (each session's one at a time). */
      CAIRN_SANDBOX_OP_CONCURRENCY: positiveInt(256).default(16),
      /**
       * `0`: this worker builds no image for the gateway (docs/adr/0038): each build sent to it is refused
       * E_FORBIDDEN. A build's RUN steps run in the engine's build containers, not in Cairn's sandbox.
       */
      CAIRN_BUILD_ENABLED: z
        .enum(['0', '1', 'true', 'false'], 'CAIRN_BUILD_ENABLED is 0 or 1')
        .default('1')
        .transform((value) => value === '1' || value === 'true'),
      /**
       * Image builds this worker serves for the gateway (docs/adr/0038), one at a time: the Dockerfile and
       * context together at most this many bytes (more is E_TOO_LARGE, refused before a byte is fetched) …
       */
      CAIRN_BUILD_MAX_CONTEXT_BYTES: z.coerce.number().int().min(1024).max(MAX_BUILD_CONTEXT_BYTES).default(MAX_BUILD_CONTEXT_BYTES),
      /** … and a build at most this long (a request may ask for less); past it the build is stopped, E_TIMEOUT. */
      CAIRN_BUILD_TIMEOUT_SECONDS: z.coerce.number().int().min(1).max(MAX_BUILD_TIMEOUT_SECONDS).default(600),
      /** Warm sandboxes kept across every profile. */
      CAIRN_WARM_POOL_TOTAL: z.coerce.number().int().min(0).max(256).default(8),
    })
    .refine((config) => config.CAIRN_LEASE_RENEW_MS * 2 <= config.CAIRN_LEASE_TTL_MS, {
      path: ['CAIRN_LEASE_RENEW_MS'],
      message: 'renew at least twice per lease TTL (CAIRN_LEASE_RENEW_MS ≤ CAIRN_LEASE_TTL_MS / 2)',
    })
    .refine((config) => config.CAIRN_WORKER_RUN_CPU_OVERSUBSCRIPTION <= config.CAIRN_WORKER_CPU_OVERSUBSCRIPTION, {
      path: ['CAIRN_WORKER_RUN_CPU_OVERSUBSCRIPTION'],
      message: 'runs share the CPU with sessions: at most CAIRN_WORKER_CPU_OVERSUBSCRIPTION',
    });
}

/** The configuration as read from the environment, before the worker's identity is claimed. */
export type RuntimeSettings = z.output<ReturnType<typeof runtimeConfigSchema>>;
/** The configuration a runtime runs with: its worker id and state directory settled (`claimWorkerIdentity`). */
export type RuntimeConfig = Omit<RuntimeSettings, 'CAIRN_WORKER_ID' | 'CAIRN_WORKER_STATE_DIR'> & { CAIRN_WORKER_ID: string; CAIRN_WORKER_STATE_DIR: string };

/** Where the worker's state lives: CAIRN_WORKER_STATE_DIR, else under `.cairn` of the working directory. */
export function workerStateDir(settings: Pick<RuntimeSettings, 'CAIRN_WORKER_ID' | 'CAIRN_WORKER_STATE_DIR'>, cwd: string = process.cwd()): string {
  if (settings.CAIRN_WORKER_STATE_DIR !== undefined) return settings.CAIRN_WORKER_STATE_DIR;
  return resolve(cwd, settings.CAIRN_WORKER_ID === undefined ? '.cairn/worker' : `.cairn/workers/${settings.CAIRN_WORKER_ID}`);
}

/**
 * The settings of an in-process runtime whose id is given (tests): no state directory is claimed,
 * so nothing stops two of them sharing an id — the process (`main.ts`) claims it.
 */
export function withGivenWorkerId(settings: RuntimeSettings): RuntimeConfig {
  if (settings.CAIRN_WORKER_ID === undefined) throw new CairnError('E_INPUT', 'CAIRN_WORKER_ID must be set for an in-process runtime');
  return { ...settings, CAIRN_WORKER_ID: settings.CAIRN_WORKER_ID, CAIRN_WORKER_STATE_DIR: workerStateDir(settings) };
}

/** The worker's slots: CAIRN_WORKER_SLOTS, else one per 128 MiB of its memory (at least 1, at most 1024). */
export function workerSlots(config: Pick<RuntimeConfig, 'CAIRN_WORKER_SLOTS' | 'CAIRN_WORKER_MEMORY_MIB'>): number {
  return config.CAIRN_WORKER_SLOTS ?? Math.min(MAX_WORKER_SLOTS, Math.max(1, Math.floor(config.CAIRN_WORKER_MEMORY_MIB / MIB_PER_DEFAULT_SLOT)));
}

/** The configuration from the environment; a bad variable is E_INPUT naming it (the process exits). */
export function loadRuntimeConfig(env: NodeJS.ProcessEnv = process.env): RuntimeSettings {
  return loadConfig(runtimeConfigSchema(hostFacts()), env);
}
