import { CairnError, ChainIdSchema, isCairnError } from '@cairn/contracts';
import { inSpan } from '@cairn/tracing';
import {
  containerName,
  LimitWatch,
  parseSandboxSpec,
  planReconcile,
  poolContainerName,
  WorkerIdSchema,
  workerLabelFilters,
  WRITABLE_MOUNTS,
  type DestroyResult,
  type ExecRequest,
  type ExecResult,
  type LimitObservation,
  type LimitSample,
  type ListedContainer,
  type PoolHolding,
  type SandboxDriver,
  type SandboxFileIn,
  type SandboxFileOut,
  type SandboxCaps,
  type SandboxHandle,
  type SandboxSpec,
  type SandboxSpecInput,
} from '@cairn/sandbox';
import type Docker from 'dockerode';
import { randomBytes } from 'node:crypto';
import { readdir, readFile, rmdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { Duplex } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseSandboxLook, SANDBOX_LOOK_SCRIPT, type SandboxLook } from './cgroup-files.js';
import {
  DEFAULT_SANDBOX_USER,
  hardenedContainerOptions,
  SANDBOX_ENV,
  SANDBOX_HOSTNAME,
  sandboxUserProblem,
  SECRETS_DIR,
  warmContainerOptions,
  type SandboxUser,
} from './container-config.js';
import { createDockerClient, DEFAULT_DOCKER_SOCKET, engineError, engineStatus } from './docker-client.js';
import { engineUserns, hostIdsOf } from './engine-userns.js';
import { IptablesFirewall, type EgressFirewall } from './egress-firewall.js';
import { EgressNetworks, type EgressRequest, type EgressSession } from './egress-network.js';
import { DEFAULT_EGRESS_PROXY_USER } from './egress-proxy-process.js';
import { systemResolver, type EgressResolver } from './egress-resolver.js';
import { AGENT_PATH_IN_SANDBOX, AgentEndpoint, bundledExecAgent, hasAgentBinary, sweepAgentDirs, withExecAgent, type AgentChannel, type ExecAgentOptions } from './exec-agent.js';
import { BoundedBuffer, ExecStreamDemuxer, type OutputSink } from './exec-output.js';
import {
  archiveCommand,
  checkFilesIn,
  checkMeasure,
  entriesFor,
  measureCommand,
  packFiles,
  packSecrets,
  parseMeasure,
  TarFileCollector,
  type SandboxSecretIn,
} from './file-transfer.js';
import { LimitProbe, type ProbeCoverage, type ProbeMode } from './limit-probe.js';
import { WarmPoolBook, warmProfileId, type WarmEntry, type WarmPoolLimits, type WarmRecipe } from './warm-pool.js';

export interface DockerSandboxDriverOptions {
  /** A client to use; otherwise one on `socketPath` (default `/var/run/docker.sock`). */
  docker?: Docker;
  socketPath?: string;
  /** Who runs inside; never root. Default 65520:65520 (DEFAULT_SANDBOX_USER). */
  user?: SandboxUser;
  /** How often caps are sampled while a step runs. Default 50 ms. */
  pollIntervalMs?: number;
  /** Wall time for moving files in or out. Default 120 s. */
  transferTimeoutMs?: number;
  /** `auto` (kernel counters from the host, needs root there) or `sandbox` (look from inside). */
  probes?: ProbeMode;
  /**
   * Started, unused sandboxes kept per profile of the last few run here, so `create` can hand one
   * over instead of starting it on the run's path. Off (`perProfile: 0`) by default.
   */
  warmPool?: Partial<WarmPoolLimits>;
  /** Told why a warm sandbox could not be made (the pool then waits for the next create). Must not throw. */
  onWarmFailed?: (error: unknown) => void;
  /**
   * Told when a sandbox's removal failed or was not confirmed (`retrying`: it is tried again in the
   * background until the engine confirms it gone; false once it gives up — a reconcile at the next
   * start reaps it). Must not throw.
   */
  onRemovalFailed?: (containerId: string, error: unknown, retrying: boolean) => void;
  /**
   * The in-sandbox exec agent (exec-agent.ts): steps go over its socket instead of `docker exec`.
   * Default: the bundled binary when the build made it; `null` runs every step over `docker exec`.
   */
  execAgent?: ExecAgentOptions | null;
  /**
   * How egress sandboxes resolve names (default: the host's resolver), guard the host (default:
   * iptables), and who their proxy process runs as (default DEFAULT_EGRESS_PROXY_USER, 65530:65530,
   * when this process is root; never root, never the sandbox user).
   */
  egress?: { resolver?: EgressResolver; firewall?: EgressFirewall; proxyUser?: { uid: number; gid: number } };
}

/** Beyond the port's spec: what only this driver offers. */
export interface DockerCreateOptions {
  /** An internal network whose only way out is an allowlisting proxy, instead of no network. */
  egress?: EgressRequest;
}

/** Where an egress sandbox's traffic goes (for its receipt, its hardening check and tests). */
export interface SandboxEgress {
  network: string;
  gateway: string;
  subnet: string;
  proxyUrl: string;
  /** Whether its proxy process still runs: once it is gone the sandbox has no way out (fails closed). */
  proxyAlive: boolean;
  /** The proxy process's host pid. */
  proxyPid: number | null;
}

/** An idle warm sandbox, started and probed. */
interface WarmSandbox {
  id: string;
  name: string;
  container: Docker.Container;
  probe: LimitProbe;
  pid: number;
  agent: AgentChannel | null;
  /** What the engine reported once it started (config and host config do not change afterwards). */
  info: Docker.ContainerInspectInfo;
}

/** A warm sandbox outlives the lifetime its profile's last run asked for by this much, idle. */
const WARM_IDLE_SECONDS = 600;
/** How often a removal that failed is tried again in the background (about ten minutes in all). */
const REMOVAL_TRIES = 24;
const MAX_LIFETIME_SECONDS = 31_536_000;
/** A step's last look from inside the sandbox: tries, and the pause between them (see `lastLook`). */
const LAST_LOOK_ATTEMPTS = 10;
const LAST_LOOK_RETRY_MS = 100;
/** The longest a refill waits for the first step of the sandbox handed out (see `warmAfterFirstStep`). */
const REFILL_HOLD_MS = 1000;
/**
 * How long a cut waits for the engine to say its killed command ended: it returns as soon as the
 * engine does (milliseconds on a quiet host); 3 s lapsed on a loaded CI machine with the killed
 * command still listed, and a caller told "cut" must find nothing running.
 */
const KILL_WAIT_MS = 10_000;

interface SandboxState {
  handle: SandboxHandle;
  container: Docker.Container;
  probe: LimitProbe;
  busy: boolean;
  /** Its exec agent's connection; null where steps go over `docker exec`. */
  agent: AgentChannel | null;
  /** What the engine reported once it started; null for a sandbox this driver did not start. */
  info: Docker.ContainerInspectInfo | null;
  /** A warm sandbox's rename to its run's name, under way once it is claimed. */
  renamed?: Promise<void>;
}

interface StepCommand {
  argv: readonly string[];
  env?: Readonly<Record<string, string>>;
  workdir?: string;
  stdin?: Uint8Array;
  timeoutMs: number;
  /** `uid:gid` of the runtime's own command (secrets go in as root); always over `docker exec`. Never for a step. */
  user?: string;
  /** `ExecRequest.stopAfterOutputBytes`: past it, stdout and stderr together stop the step as a cap does. */
  stopAfterOutputBytes?: number;
  /** The runtime's own commands only: aborted, the command is killed (the sandbox lives on) and its output no longer read. */
  cancel?: AbortSignal;
}

interface StepOutcome {
  exitCode: number | null;
  durationMs: number;
  limits: LimitObservation[];
  limitHit: ExecResult['limitHit'];
  outputBudgetHit: boolean;
  teardown: DestroyResult | null;
}

const MAX_OUTPUT_BYTES = 2 ** 31 - 1;
/** What a `docker exec` inherits from the container (`Env`, and the engine's `HOSTNAME`), for commands run by the agent. */
const AGENT_BASE_ENV: Readonly<Record<string, string>> = Object.freeze({
  ...Object.fromEntries(SANDBOX_ENV.map((entry) => [entry.slice(0, entry.indexOf('=')), entry.slice(entry.indexOf('=') + 1)])),
  HOSTNAME: SANDBOX_HOSTNAME,
});
const LOOK_INSIDE_TIMEOUT_MS = 3000;
/** An engine's image id (`sha256:` and 64 hex digits), as opposed to a name. */
const IMAGE_ID = /^sha256:[0-9a-f]{64}$/;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const NUL = '\u0000';

/** The Docker (dockerode) implementation of the sandbox port; see docs/sandbox-hardening.md. */
export class DockerSandboxDriver implements SandboxDriver {
  private readonly docker: Docker;
  private readonly user: SandboxUser;
  private readonly pollIntervalMs: number;
  private readonly transferTimeoutMs: number;
  private readonly probeMode: ProbeMode;
  private readonly sandboxes = new Map<string, SandboxState>();
  private readonly pool: WarmPoolBook<WarmSandbox>;
  /** Whether the worker has room for the pool to hold sandboxes of these caps (beside its placed work); default always. */
  private poolRoom: (held: readonly SandboxCaps[]) => boolean = () => true;
  /** Counted since this driver started, for the worker's heartbeat and so `/metrics` (operational, never evidence). */
  private readonly counts = { hits: 0, misses: 0, containersStarted: 0 };
  /** Names of warm sandboxes being created: reconcile must not take them for strays. */
  private readonly warmingNames = new Set<string>();
  /** Warm sandboxes being handed to a run (container id → its chain). */
  private readonly claiming = new Map<string, string>();
  /** At most one warm create at a time, never more beside the runs' own. */
  private warmer: Promise<void> | null = null;
  /** Refills held until the first step of the sandbox handed out ends (container id → the hold's timer). */
  private readonly refillHolds = new Map<string, NodeJS.Timeout>();
  private poolClosed = false;
  private readonly execAgent: ExecAgentOptions | null;
  /** Agent sockets by container name, from just before a sandbox is created until it is removed. */
  private readonly agentEndpoints = new Map<string, AgentEndpoint>();
  /** Names whose agent socket is being opened: a reconcile meanwhile must not sweep them. */
  private readonly agentOpening = new Set<string>();
  /** Container id → name, for the agent sockets of created containers. */
  private readonly agentNames = new Map<string, string>();
  /** The per-worker directories this driver made agent sockets in (removed by `closePool` once empty). */
  private readonly agentWorkerDirs = new Set<string>();
  private readonly onWarmFailed: (error: unknown) => void;
  private readonly onRemovalFailed: (containerId: string, error: unknown, retrying: boolean) => void;
  /** Sandboxes whose removal failed or was not confirmed, and the timer of their next try (I-8). */
  private readonly unremoved = new Map<string, { tries: number; timer: NodeJS.Timeout }>();
  private readonly egress: EgressNetworks;
  /** Egress networks of this driver's sandboxes (container id → session), closed after the sandbox. */
  private readonly egressSessions = new Map<string, EgressSession>();
  /** The sandbox user as the host sees it (shifted by the engine's userns remapping): owner of its agent socket. */
  private hostUser: Promise<SandboxUser> | null = null;

  constructor(options: DockerSandboxDriverOptions = {}) {
    this.docker = options.docker ?? createDockerClient(options.socketPath ?? DEFAULT_DOCKER_SOCKET);
    this.user = options.user ?? DEFAULT_SANDBOX_USER;
    const problem = sandboxUserProblem(this.user);
    if (problem !== null) throw new RangeError(problem);
    this.pollIntervalMs = options.pollIntervalMs ?? 50;
    this.transferTimeoutMs = options.transferTimeoutMs ?? 120_000;
    this.probeMode = options.probes ?? 'auto';
    const perProfile = options.warmPool?.perProfile ?? 0;
    this.execAgent = options.execAgent === undefined ? bundledExecAgent() : options.execAgent;
    this.pool = new WarmPoolBook({ perProfile, total: options.warmPool?.total ?? 4 * perProfile, profiles: options.warmPool?.profiles ?? 4 });
    this.onWarmFailed = options.onWarmFailed ?? (() => undefined);
    this.onRemovalFailed = options.onRemovalFailed ?? (() => undefined);
    const proxyUser = options.egress?.proxyUser ?? (process.getuid?.() === 0 ? DEFAULT_EGRESS_PROXY_USER : null);
    if (proxyUser !== null && (proxyUser.uid <= 0 || proxyUser.gid <= 0 || proxyUser.uid === this.user.uid || proxyUser.gid === this.user.gid)) {
      throw new RangeError('the egress proxy user must be neither root nor the sandbox user');
    }
    this.egress = new EgressNetworks({
      docker: this.docker,
      resolver: options.egress?.resolver ?? systemResolver(),
      firewall: options.egress?.firewall ?? new IptablesFirewall(),
      proxyUser,
    });
  }

  async ping(): Promise<void> {
    try {
      await this.docker.ping();
    } catch (error) {
      const absent = engineError(error, 'E_RUNTIME_ABSENT', 'pinging the container engine');
      throw absent.code === 'E_RUNTIME_ABSENT' ? absent : new CairnError('E_RUNTIME_ABSENT', absent.message, absent.details);
    }
  }

  /**
   * `options.egress`: the sandbox joins an egress network of its own (egress-network.ts), set up
   * before the container and taken down by `destroy`; never from the warm pool. Anything of it
   * that cannot be set up is `E_SANDBOX_START` and no sandbox starts.
   */
  async create(input: SandboxSpecInput, createOptions: DockerCreateOptions = {}): Promise<SandboxHandle> {
    return inSpan('docker create sandbox', { kind: 'internal' }, async (span) => {
      const handle = await this.createUntraced(input, createOptions);
      span?.setAttributes({ 'cairn.sandbox.name': handle.name });
      return handle;
    });
  }

  private async createUntraced(input: SandboxSpecInput, createOptions: DockerCreateOptions): Promise<SandboxHandle> {
    const spec = parseSandboxSpec(input);
    // An image id names its content: nothing to resolve (a create from one that is gone fails as E_IMAGE_PULL).
    const imageId = IMAGE_ID.test(spec.image) ? spec.image : await this.resolveImage(spec.image);
    if (createOptions.egress === undefined && this.pool.enabled && !this.poolClosed) {
      const claimed = await this.claimWarm(spec, imageId);
      if (claimed !== null) {
        this.counts.hits += 1;
        // A claim renames a started container: no create or start of its own to trace.
        return claimed;
      }
      this.counts.misses += 1;
    }
    const session = createOptions.egress === undefined ? null : await this.egress.openFor(spec.labels, spec.instance, createOptions.egress);
    const hardened = hardenedContainerOptions(spec, imageId, this.user, session === null ? undefined : { name: session.networkName, env: session.env });
    const name = hardened.name ?? '';
    let container: Docker.Container;
    let endpoint: AgentEndpoint | null = null;
    try {
      endpoint = await this.openAgent(spec.labels.workerId, name);
      const options = endpoint === null ? hardened : withExecAgent(hardened, this.execAgent!.binary, endpoint.hostDir, spec.lifetimeSeconds);
      container = await inSpan('docker create', { kind: 'client', attributes: { 'cairn.sandbox.name': name } }, () => this.docker.createContainer(options));
    } catch (error) {
      await session?.close().catch(() => false);
      await this.closeAgent(name);
      const status = engineStatus(error);
      if (status === 404) throw engineError(error, 'E_IMAGE_PULL', `image ${spec.image} vanished before ${name} was created`, { image: spec.image });
      throw engineError(error, 'E_SANDBOX_START', `creating sandbox ${name}${status === 409 ? ' (the name is taken)' : ''}`, { name });
    }
    if (session !== null) this.egressSessions.set(container.id, session);
    if (endpoint !== null) this.agentNames.set(container.id, name);
    let started = false;
    let token: { send: () => void; cancel: () => void } | null = null;
    try {
      token = endpoint === null ? null : await endpoint.sendToken(container);
      await inSpan('docker start', { kind: 'client', attributes: { 'cairn.sandbox.name': name } }, () => container.start());
      this.counts.containersStarted += 1;
      token?.send();
      const info = await container.inspect();
      if (!info.State.Running || info.State.Pid <= 0) throw new CairnError('E_SANDBOX_START', `sandbox ${name} stopped right after it started`, { name, state: info.State.Status });
      const handle: SandboxHandle = Object.freeze({
        id: container.id,
        name,
        chainId: spec.labels.chainId,
        workerId: spec.labels.workerId,
        imageId,
        caps: Object.freeze({ ...spec.caps }),
      });
      const probe = await this.openProbe(container.id, info.State.Pid);
      const agent = endpoint === null ? null : await endpoint.connected();
      this.sandboxes.set(container.id, { handle, container, probe, busy: false, agent, info });
      started = true;
      this.warmAfterFirstStep(container.id);
      return handle;
    } catch (error) {
      throw engineError(error, 'E_SANDBOX_START', `starting sandbox ${name}`, { name });
    } finally {
      // I-8: a sandbox that did not come up is not left behind, nor is its network.
      if (!started) {
        token?.cancel();
        await this.removeContainer(container.id).catch(() => undefined);
        await this.closeEgress(container.id);
      }
    }
  }

  /** The egress network of a sandbox this driver created with one; null for network `none`. */
  egressOf(handle: SandboxHandle): SandboxEgress | null {
    const session = this.egressSessions.get(handle.id);
    if (session === undefined) return null;
    return { network: session.networkName, gateway: session.gateway, subnet: session.subnet, proxyUrl: session.proxyUrl, proxyAlive: session.proxy.alive, proxyPid: session.proxy.pid };
  }

  /**
   * What the engine reported of a sandbox this driver started (or handed over from its pool), as it
   * started: its config and host config cannot change afterwards, so a caller checking them need
   * not ask again. null for a sandbox this driver does not hold, or did not start.
   */
  startedInspection(handle: SandboxHandle): Docker.ContainerInspectInfo | null {
    return this.sandboxes.get(handle.id)?.info ?? null;
  }

  /** Where each cap of a sandbox is read from: the host's kernel counters, or a look from inside. */
  async coverage(handle: SandboxHandle): Promise<ProbeCoverage> {
    return (await this.state(handle)).probe.coverage;
  }

  async exec(handle: SandboxHandle, request: ExecRequest): Promise<ExecResult> {
    return inSpan('docker exec', { kind: 'client', attributes: { 'cairn.sandbox.name': handle.name } }, async (span) => {
      const result = await this.execUntraced(handle, request);
      if (result.exitCode !== null) span?.setAttribute('process.exit.code', result.exitCode);
      return result;
    });
  }

  private async execUntraced(handle: SandboxHandle, request: ExecRequest): Promise<ExecResult> {
    checkExecRequest(handle, request);
    const stdout = new BoundedBuffer(request.maxOutputBytes);
    const stderr = new BoundedBuffer(request.maxOutputBytes);
    const onOutput = request.onOutput;
    // The caller's own deadline kills the program's session over the agent (or its docker exec),
    // as a cancelled transfer is killed: the sandbox lives on. The cap's deadline stays the cap.
    const interrupt = request.interruptAfterMs === undefined ? null : new AbortController();
    const timer = interrupt === null ? null : setTimeout(() => interrupt.abort(), request.interruptAfterMs);
    const outcome = await this.runStep(handle, interrupt === null ? request : { ...request, cancel: interrupt.signal }, (stream, chunk) => {
      (stream === 'stdout' ? stdout : stderr).push(chunk);
      if (onOutput === undefined) return;
      try {
        onOutput(stream, chunk);
      } catch {
        // The caller's listener failing must not break the step; what is kept is still returned.
      }
    }).finally(() => {
      if (timer !== null) clearTimeout(timer);
    });
    const interrupted = interrupt !== null && interrupt.signal.aborted && outcome.limitHit === null && outcome.teardown === null;
    return {
      ...outcome,
      stdout: stdout.bytes(),
      stderr: stderr.bytes(),
      stdoutBytes: stdout.total,
      stderrBytes: stderr.total,
      truncated: stdout.truncated || stderr.truncated,
      ...(interrupted ? { interrupted: true } : {}),
    };
  }

  async putFiles(handle: SandboxHandle, files: readonly SandboxFileIn[]): Promise<void> {
    checkFilesIn(files);
    if (files.length === 0) return;
    const archive = await packFiles(files, this.user);
    const stderr = new BoundedBuffer(16 * 1024);
    const outcome = await this.runStep(
      handle,
      { argv: ['tar', '-x', '-f', '-', '-C', '/'], stdin: archive, timeoutMs: this.transferTimeoutMs },
      (stream, chunk) => {
        if (stream === 'stderr') stderr.push(chunk);
      },
    );
    failOnTransfer(handle, 'putting files into', outcome, stderr);
  }

  /**
   * Writes a run's secrets to /run/secrets/NAME (a tmpfs every sandbox has, see container-config):
   * the exec agent's own static binary (`--put-secrets`, bind-mounted from the host) run over
   * `docker exec` as root (capabilities still dropped) — never anything of the image, so an image
   * whose `tar` (or any tool) is not what it seems sees nothing — files root:<sandbox group> 0440,
   * so the sandbox's processes can read them and change nothing. Call before the first step. A
   * sandbox without the agent's binary gets none (`E_SANDBOX_START`). The values travel only in
   * the exec's stdin, never in argv, the environment or anything `docker inspect` shows; errors
   * never carry them.
   */
  async putSecrets(handle: SandboxHandle, secrets: readonly SandboxSecretIn[]): Promise<void> {
    if (secrets.length === 0) return;
    const payload = packSecrets(secrets);
    const stderr = new BoundedBuffer(16 * 1024);
    try {
      const state = await this.state(handle);
      const info = state.info ?? (await state.container.inspect().catch((error: unknown) => {
        throw engineError(error, 'E_SANDBOX_START', `looking up sandbox ${handle.name}`, { name: handle.name });
      }));
      if (!hasAgentBinary(info)) {
        throw new CairnError('E_SANDBOX_START', `sandbox ${handle.name} has no exec agent to write its secrets: nothing of the image is run as root (build the agent: npm run build)`, {
          name: handle.name,
        });
      }
      const outcome = await this.runStep(
        handle,
        { argv: [AGENT_PATH_IN_SANDBOX, '--put-secrets', SECRETS_DIR], stdin: payload, timeoutMs: this.transferTimeoutMs, user: `0:${this.user.gid}` },
        (stream, chunk) => {
          if (stream === 'stderr') stderr.push(chunk);
        },
      );
      failOnTransfer(handle, 'putting secrets into', outcome, stderr);
    } finally {
      payload.fill(0);
    }
  }

  /**
   * The regular files under `paths`, at most `maxBytes` of content together (`E_BUDGET`). Where
   * the sandbox has its exec agent, the agent first measures what the archive would hold (apparent
   * sizes, entry types) and a transfer over its bound, or holding anything but regular files,
   * directories and links, is refused before a byte of it moves. The archive itself is checked
   * entry by entry as it streams (TarFileCollector); the first refusal kills the archiving command
   * — the sandbox lives on — and nothing of the transfer is returned.
   */
  async getFiles(handle: SandboxHandle, paths: readonly string[], maxBytes: number): Promise<SandboxFileOut[]> {
    const entries = entriesFor(paths);
    if (!Number.isInteger(maxBytes) || maxBytes < 0) throw new CairnError('E_INPUT', 'maxBytes must be a non-negative integer');
    if (entries.length === 0) return [];
    if ((await this.state(handle)).agent !== null) {
      const measured = new BoundedBuffer(8 * 1024);
      const stderr = new BoundedBuffer(16 * 1024);
      const outcome = await this.runStep(handle, { argv: measureCommand(AGENT_PATH_IN_SANDBOX, entries), timeoutMs: this.transferTimeoutMs }, (stream, chunk) =>
        (stream === 'stdout' ? measured : stderr).push(chunk),
      );
      failOnTransfer(handle, 'measuring the files of', outcome, stderr);
      const measure = parseMeasure(measured.bytes());
      checkMeasure(measure, maxBytes);
      if (measure.files + measure.dirs + measure.links === 0) return [];
    }
    const cancel = new AbortController();
    const collector = new TarFileCollector({ maxBytes, entries, onRefused: () => cancel.abort() });
    const stderr = new BoundedBuffer(16 * 1024);
    const outcome = await this.runStep(handle, { argv: archiveCommand(entries), timeoutMs: this.transferTimeoutMs, cancel: cancel.signal }, (stream, chunk) => {
      if (stream === 'stdout') collector.write(chunk);
      else stderr.push(chunk);
    });
    // A refusal first: it is why the command was stopped.
    if (collector.refused !== null && outcome.limitHit === null) throw collector.refused;
    failOnTransfer(handle, 'reading files from', outcome, stderr);
    return collector.finish();
  }

  async destroy(handle: SandboxHandle): Promise<DestroyResult> {
    return inSpan('docker remove', { kind: 'client', attributes: { 'cairn.sandbox.name': handle.name } }, () => this.destroyUntraced(handle));
  }

  private async destroyUntraced(handle: SandboxHandle): Promise<DestroyResult> {
    this.releaseRefill(handle.id);
    await this.sandboxes.get(handle.id)?.renamed;
    this.sandboxes.delete(handle.id);
    let gone = false;
    try {
      await this.removeContainer(handle.id);
      gone = await this.verifyGone(handle.id);
      if (!gone) this.removeLater(handle.id, new CairnError('E_INTERNAL', `sandbox ${handle.name} is still there after its removal`, { name: handle.name }));
    } catch (error) {
      // A loaded engine can fail a forced removal ("did not receive an exit event"): the caller
      // hears of it, and the sandbox is not forgotten — it is removed again until it is gone.
      this.removeLater(handle.id, error);
      throw error;
    }
    // Its network goes only after the sandbox: until then the firewall rules keep it confined.
    const networkGone = gone ? await this.closeEgress(handle.id) : !this.egressSessions.has(handle.id);
    return { verifiedGone: gone && networkGone };
  }

  /** How many sandboxes removal is still being retried for (operational state; tests). */
  get unremovedCount(): number {
    return this.unremoved.size;
  }

  /**
   * Tries the removal of `containerId` again in the background — after 1 s, then twice as long
   * each time up to 30 s apart, for at most REMOVAL_TRIES tries — until the engine no longer knows
   * it, then takes down its egress network. A sandbox that outlasts every try is left to the
   * reconcile at the next start.
   */
  private removeLater(containerId: string, error: unknown): void {
    if (this.unremoved.has(containerId)) return;
    this.onRemovalFailed(containerId, error, true);
    const attempt = (tries: number): void => {
      const timer = setTimeout(() => {
        void (async () => {
          let lastError: unknown = null;
          try {
            await this.removeContainer(containerId);
            await this.docker.getContainer(containerId).inspect();
          } catch (caught) {
            if (engineStatus(caught) === 404) {
              this.unremoved.delete(containerId);
              await this.closeEgress(containerId).catch(() => false);
              return;
            }
            lastError = caught;
          }
          if (tries + 1 >= REMOVAL_TRIES) {
            this.unremoved.delete(containerId);
            this.onRemovalFailed(containerId, lastError ?? new CairnError('E_INTERNAL', `sandbox ${containerId} is still there`), false);
            return;
          }
          attempt(tries + 1);
        })();
      }, Math.min(30_000, 1000 * 2 ** tries));
      timer.unref();
      this.unremoved.set(containerId, { tries, timer });
    };
    attempt(0);
  }

  /** Closes the egress network of a container (true when it had none, or it is verified gone). */
  private async closeEgress(containerId: string): Promise<boolean> {
    const session = this.egressSessions.get(containerId);
    if (session === undefined) return true;
    const gone = await session.close().catch(() => false);
    if (gone) this.egressSessions.delete(containerId);
    return gone;
  }

  async reconcile(workerId: string, keep: (chainId: string) => boolean): Promise<string[]> {
    if (!WorkerIdSchema.safeParse(workerId).success) throw new CairnError('E_INPUT', `not a worker id: ${JSON.stringify(workerId)}`);
    let listed: Docker.ContainerInfo[];
    try {
      listed = await this.docker.listContainers({ all: true, filters: { label: workerLabelFilters(workerId) } });
    } catch (error) {
      throw engineError(error, 'E_INTERNAL', 'listing sandboxes to reconcile');
    }
    const targets = planReconcile(
      listed.map((c) => ({ id: c.Id, names: c.Names, labels: c.Labels })),
      workerId,
      keep,
      (c) => this.poolHolding(c),
    );
    const reaped: string[] = [];
    const failed: string[] = [];
    for (const target of targets) {
      this.sandboxes.delete(target.id);
      try {
        await this.removeContainer(target.id);
        if (await this.verifyGone(target.id)) reaped.push(target.name);
        else failed.push(target.name);
      } catch (error) {
        if (isCairnError(error) && error.code === 'E_RUNTIME_ABSENT') throw error;
        failed.push(target.name);
      }
    }
    // Agent sockets of sandboxes this process no longer holds (a crashed predecessor's, say).
    if (this.execAgent !== null) await sweepAgentDirs(join(this.execAgent.socketRoot, workerId), (name) => this.agentEndpoints.has(name) || this.agentOpening.has(name));
    // Egress networks after the containers on them; a live one of this driver's is its owner's to close.
    await this.egress.reconcile(workerId, keep).catch((error: unknown) => {
      failed.push(`egress networks (${error instanceof Error ? error.message : String(error)})`);
    });
    if (failed.length > 0) throw new CairnError('E_INTERNAL', `could not reap ${failed.join(', ')}`, { reaped, failed });
    return reaped;
  }

  async reapChain(workerId: string, chainId: string): Promise<string[]> {
    if (!WorkerIdSchema.safeParse(workerId).success) throw new CairnError('E_INPUT', `not a worker id: ${JSON.stringify(workerId)}`);
    if (!ChainIdSchema.safeParse(chainId).success) throw new CairnError('E_INPUT', `not a chain id: ${JSON.stringify(chainId)}`);
    // The chain's sandboxes this process holds…
    const targets = new Map<string, string>();
    for (const [id, held] of this.sandboxes) if (held.handle.chainId === chainId && held.handle.workerId === workerId) targets.set(id, held.handle.name);
    // …and those the engine has of it: labelled with the chain, or a claimed warm one (pool labels)
    // named after it — decided as reconcile decides, for this one chain only.
    let listed: Docker.ContainerInfo[];
    try {
      listed = await this.docker.listContainers({ all: true, filters: { label: workerLabelFilters(workerId) } });
    } catch (error) {
      throw engineError(error, 'E_INTERNAL', `listing the sandboxes of ${chainId} to reap`);
    }
    const planned = planReconcile(
      listed.map((c) => ({ id: c.Id, names: c.Names, labels: c.Labels })),
      workerId,
      (other) => other !== chainId,
      (c) => this.poolHolding(c),
    );
    for (const target of planned) if (target.chainId === chainId) targets.set(target.id, target.name);
    const reaped: string[] = [];
    const failed: string[] = [];
    for (const [id, name] of targets) {
      this.sandboxes.delete(id);
      try {
        await this.removeContainer(id);
        if ((await this.verifyGone(id)) && (await this.closeEgress(id))) reaped.push(name);
        else failed.push(name);
      } catch (error) {
        if (isCairnError(error) && error.code === 'E_RUNTIME_ABSENT') throw error;
        failed.push(name);
      }
    }
    await this.egress.reapChain(workerId, chainId).catch((error: unknown) => {
      failed.push(`egress networks (${error instanceof Error ? error.message : String(error)})`);
    });
    if (failed.length > 0) throw new CairnError('E_INTERNAL', `could not reap ${failed.join(', ')}`, { reaped, failed });
    return reaped;
  }

  // --- warm pool ---------------------------------------------------------------------------

  /** Idle warm sandboxes now (operational, for tests and logs). */
  get warmCount(): number {
    return this.pool.size;
  }

  /**
   * The pool now and what it did since this driver started: idle sandboxes, creates served from it
   * (hits) and creates it could not serve while enabled (misses), and containers started (a run's,
   * a session's or a warm one).
   */
  get poolStats(): { size: number; hits: number; misses: number; containersStarted: number } {
    return { size: this.pool.size, ...this.counts };
  }

  /**
   * How the pool stays within its worker's capacity: `room` says whether the worker, beside what is
   * placed on it, has room for idle sandboxes of these caps. A refill that would not fit is not
   * made; `trimPool` gives back what no longer fits.
   */
  setPoolRoom(room: (held: readonly SandboxCaps[]) => boolean): void {
    this.poolRoom = room;
  }

  /** Tops the pool up in the background, within the room `setPoolRoom` says is left (work just ended there). */
  refillPool(): void {
    if (this.pool.enabled) this.warm();
  }

  /** Destroys idle warm sandboxes (least recently run profile first) until what is left fits (see `setPoolRoom`). */
  trimPool(): void {
    while (this.pool.size > 0 && !this.poolRoom(this.pool.holding())) {
      const evicted = this.pool.evictOne();
      if (evicted === null) break;
      void this.discardWarm(evicted);
    }
  }

  /**
   * Stops warming and destroys every idle warm sandbox; `create` starts fresh ones from now on.
   * Then removes the workers' agent socket directories it made that are empty by now (a shutdown
   * after its last sandbox leaves nothing under the socket root; a reconcile sweeps what is left).
   */
  async closePool(): Promise<void> {
    this.poolClosed = true;
    for (const timer of this.refillHolds.values()) clearTimeout(timer);
    this.refillHolds.clear();
    await this.warmer;
    await Promise.all(this.pool.drain().map((w) => this.discardWarm(w)));
    // rmdir only removes an empty directory: a sandbox still held keeps its worker's.
    await Promise.all([...this.agentWorkerDirs].map((dir) => rmdir(dir).catch(() => undefined)));
  }

  /**
   * Hands an idle sandbox of the run's profile over as the run's own — the same container a create
   * would start (same image, caps, network, hardening), checked still running — or null. Every run
   * makes its profile the most recent one and tops the pool up behind it.
   */
  private async claimWarm(spec: SandboxSpec, imageId: string): Promise<SandboxHandle | null> {
    const profile = { workerId: spec.labels.workerId, imageId, caps: spec.caps };
    const poolId = warmProfileId(profile);
    const lifetimeSeconds = Math.min(MAX_LIFETIME_SECONDS, spec.lifetimeSeconds + WARM_IDLE_SECONDS);
    for (const evicted of this.pool.touch({ ...profile, poolId, lifetimeSeconds })) void this.discardWarm(evicted);
    for (;;) {
      const { entry, expired } = this.pool.take(poolId, spec.lifetimeSeconds, Date.now());
      for (const stale of expired) void this.discardWarm(stale);
      if (entry === null) return null;
      // Out of the pool but not yet the run's: a reconcile meanwhile must see it as this run's.
      this.claiming.set(entry.id, spec.labels.chainId);
      let running: boolean;
      try {
        // An open connection to its exec agent, which is its PID 1, already proves it runs; without
        // one the engine is asked.
        if (entry.agent !== null) running = entry.agent.isOpen;
        else {
          const info = await entry.container.inspect().catch(() => null);
          running = info?.State.Running === true && info.State.Pid === entry.pid;
        }
      } finally {
        this.claiming.delete(entry.id);
      }
      if (!running) {
        void this.discardWarm(entry);
        continue;
      }
      // The claimed container takes the run's name (`cairn-<chain id>-<n>`): labels cannot change,
      // but the name can, so the engine, its tools and a reconcile after a restart all see whose it
      // is (`planReconcile` reads the chain from the name of a pool container without a chain label).
      // It is held as the run's from here on (`poolHolding` reads `sandboxes`), so the rename need
      // not hold up the run: it goes on while the run records its start, and the run's first
      // command (or its teardown) waits for it. Should it fail, the sandbox serves under its pool
      // name: held here, it is the run's; after a restart a pool name naming no live chain is reaped.
      const name = containerName(spec.labels.chainId, spec.instance);
      const renamed = entry.container.rename({ name }).then(
        () => undefined,
        () => undefined,
      );
      const handle: SandboxHandle = Object.freeze({
        id: entry.id,
        name,
        chainId: spec.labels.chainId,
        workerId: spec.labels.workerId,
        imageId,
        caps: Object.freeze({ ...spec.caps }),
      });
      this.sandboxes.set(entry.id, { handle, container: entry.container, probe: entry.probe, busy: false, agent: entry.agent, info: entry.info, renamed });
      this.warmAfterFirstStep(entry.id);
      return handle;
    }
  }

  /**
   * Tops the pool up once the first step in `containerId` — the sandbox just handed out, or just
   * created for want of a warm one — has ended, or after REFILL_HOLD_MS, whichever comes first. A
   * refill is a container create and start, the heaviest work the engine does; started at once it
   * runs beside the command the sandbox's caller is waiting for, and slows it (on 2 cores, a
   * session's first exec took 26 ms p50 beside a refill, 17 ms without).
   */
  private warmAfterFirstStep(containerId: string): void {
    if (!this.pool.enabled || this.poolClosed || this.refillHolds.has(containerId)) return;
    const timer = setTimeout(() => this.releaseRefill(containerId), REFILL_HOLD_MS);
    timer.unref();
    this.refillHolds.set(containerId, timer);
  }

  /** Ends the refill hold of `containerId`, if it has one, and tops the pool up. */
  private releaseRefill(containerId: string): void {
    const timer = this.refillHolds.get(containerId);
    if (timer === undefined) return;
    clearTimeout(timer);
    this.refillHolds.delete(containerId);
    this.warm();
  }

  /** Tops the pool up in the background, one create at a time. */
  private warm(): void {
    if (this.warmer !== null || this.poolClosed) return;
    this.warmer = (async () => {
      for (let recipe = this.pool.nextToWarm(); recipe !== null && !this.poolClosed; recipe = this.pool.nextToWarm()) {
        if (!this.poolRoom([...this.pool.holding(), recipe.caps])) {
          // The worker's placed work leaves no room for another idle one: warm again after the next run.
          this.pool.warmed(recipe.poolId, null);
          break;
        }
        const name = poolContainerName(recipe.poolId, randomBytes(6).toString('hex'));
        this.warmingNames.add(name);
        try {
          const entry = await this.createWarm(recipe, name).catch((error: unknown) => {
            this.onWarmFailed(error);
            return null;
          });
          if (entry === null) {
            // The engine refused: stop until the next run asks again, rather than spin.
            this.pool.warmed(recipe.poolId, null);
            break;
          }
          // Into the book before its name is dropped from `warmingNames`: reconcile always sees it held.
          if (this.poolClosed || !this.pool.warmed(recipe.poolId, entry)) await this.discardWarm(entry.item);
        } finally {
          this.warmingNames.delete(name);
        }
      }
    })().finally(() => {
      this.warmer = null;
    });
  }

  private async createWarm(recipe: WarmRecipe, name: string): Promise<WarmEntry<WarmSandbox>> {
    const expiresAt = Date.now() + recipe.lifetimeSeconds * 1000;
    let id: string | null = null;
    try {
      const warm = warmContainerOptions({ caps: recipe.caps, lifetimeSeconds: recipe.lifetimeSeconds }, recipe.imageId, { name, workerId: recipe.workerId, poolId: recipe.poolId }, this.user);
      const endpoint = await this.openAgent(recipe.workerId, name);
      const container = await this.docker
        .createContainer(endpoint === null ? warm : withExecAgent(warm, this.execAgent!.binary, endpoint.hostDir, recipe.lifetimeSeconds))
        .catch(async (error: unknown) => {
          await this.closeAgent(name);
          throw error;
        });
      id = container.id;
      if (endpoint !== null) this.agentNames.set(container.id, name);
      const token = endpoint === null ? null : await endpoint.sendToken(container);
      await container.start().catch((error: unknown) => {
        token?.cancel();
        throw error;
      });
      this.counts.containersStarted += 1;
      token?.send();
      const info = await container.inspect();
      if (!info.State.Running || info.State.Pid <= 0) throw new CairnError('E_SANDBOX_START', `warm sandbox ${name} stopped right after it started`, { name });
      const probe = await this.openProbe(container.id, info.State.Pid);
      const agent = endpoint === null ? null : await endpoint.connected();
      id = null;
      return { item: { id: container.id, name, container, probe, pid: info.State.Pid, agent, info }, expiresAt };
    } finally {
      // I-8: a warm sandbox that did not come up is not left behind.
      if (id !== null) await this.removeContainer(id).catch(() => undefined);
    }
  }

  private async discardWarm(warm: WarmSandbox): Promise<void> {
    await this.removeContainer(warm.id).catch(() => undefined);
  }

  /** What this process knows of a pool container (see `planReconcile`). */
  private poolHolding(container: ListedContainer): PoolHolding {
    const claimed = this.sandboxes.get(container.id);
    if (claimed !== undefined) return { kind: 'claimed', chainId: claimed.handle.chainId };
    const claiming = this.claiming.get(container.id);
    if (claiming !== undefined) return { kind: 'claimed', chainId: claiming };
    if (this.pool.holds((w) => w.id === container.id)) return { kind: 'warm' };
    if (container.names.some((n) => this.warmingNames.has(n.replace(/^\//, '')))) return { kind: 'warm' };
    return null;
  }

  // --- steps ---------------------------------------------------------------------------------

  /**
   * Runs one command in the sandbox with caps watched: samples the counters before it starts,
   * every `pollIntervalMs` while it runs, at the deadline and after it ends. The first cap seen
   * stops the step by destroying the sandbox (a `setsid` child escapes a process-group kill).
   */
  private async runStep(handle: SandboxHandle, command: StepCommand, sink: OutputSink): Promise<StepOutcome> {
    const state = await this.state(handle);
    if (state.busy) throw new CairnError('E_CONFLICT', `sandbox ${handle.name} is already running a step`, { name: handle.name });
    state.busy = true;
    try {
      await state.renamed;
      // An egress sandbox's commands name its proxy (whichever way they are started); a step's own env wins.
      const egress = this.egressSessions.get(handle.id);
      const outcome = await this.watchStep(state, egress === undefined ? command : { ...command, env: { ...egress.envVars, ...command.env } }, sink);
      // Every refusal the step was answered is reported before the step is over (its egress.denied names it).
      await egress?.flush();
      return outcome;
    } finally {
      state.busy = false;
      this.releaseRefill(handle.id);
    }
  }

  private async watchStep(state: SandboxState, command: StepCommand, sink: OutputSink): Promise<StepOutcome> {
    const { handle, container } = state;
    const startedAt = performance.now();
    const startedEpoch = Date.now();
    const elapsed = () => Math.round(performance.now() - startedAt);
    const watch = new LimitWatch(await this.look(state, 0, true));
    if (state.agent !== null && command.user === undefined) return this.watchAgentStep(state, command, sink, watch, startedAt, startedEpoch);

    let exec: Docker.Exec;
    let stream: Duplex;
    try {
      exec = await container.exec({
        Cmd: [...command.argv],
        Env: Object.entries(command.env ?? {}).map(([k, v]) => `${k}=${v}`),
        ...(command.workdir === undefined ? {} : { WorkingDir: command.workdir }),
        ...(command.user === undefined ? {} : { User: command.user }),
        AttachStdin: command.stdin !== undefined,
        AttachStdout: true,
        AttachStderr: true,
        Tty: false,
      });
      stream = await exec.start({ hijack: true, stdin: command.stdin !== undefined });
    } catch (error) {
      const status = engineStatus(error);
      if (status === 404 || status === 409) throw this.gone(handle, error);
      throw engineError(error, 'E_INTERNAL', `starting a step in ${handle.name}`, { name: handle.name });
    }

    const budget = new OutputBudget(command.stopAfterOutputBytes);
    const demuxer = new ExecStreamDemuxer(budget.counting(sink));
    const ended = new Promise<void>((resolve) => {
      stream.on('data', (chunk: Buffer) => demuxer.push(chunk));
      stream.once('end', resolve);
      stream.once('close', resolve);
      stream.once('error', () => resolve());
    });
    if (command.stdin !== undefined) stream.end(Buffer.from(command.stdin));
    else stream.end();
    // Cut: nothing more is read, and the command (left blocked on its output otherwise) is killed.
    // The kill is awaited before the step returns: a caller told "cut" finds nothing still running.
    let killing: Promise<void> = Promise.resolve();
    onAbort(command.cancel, () => {
      stream.destroy();
      killing = this.killExec(exec, container.id);
    });

    const caps = this.watchCaps(state, watch, budget, command.timeoutMs, elapsed, () => stream.destroy());
    await ended;
    await killing;
    await caps.settle();
    const { stopping, stop } = caps;

    let exitCode: number | null = null;
    if (stopping.teardown === null) {
      exitCode = await this.exitCodeOf(exec);
      const missing = await this.finalLook(state, watch, elapsed(), startedEpoch, exitCode === null || exitCode > 128);
      if (watch.first !== null) stop();
      // Stopped or removed behind our back (or the engine went away), and no cap explains it:
      // whatever the exit code says, the step did not end by itself.
      else if (missing !== null) throw this.gone(handle, missing);
    }
    const durationMs = elapsed();
    const destroyed = stopping.teardown === null ? null : await stopping.teardown;
    if (stopping.error !== null) throw stopping.error;
    return { exitCode, durationMs, limits: watch.observations, limitHit: watch.decision, outputBudgetHit: budget.stopped, teardown: destroyed };
  }

  /**
   * `watchStep` over the sandbox's exec agent: the same watch, deadline and teardown, with the
   * command sent over the agent's connection instead of a `docker exec` (no exec to create, start
   * and inspect). A connection that ends mid-step means the sandbox ended: the final look says why.
   */
  private async watchAgentStep(
    state: SandboxState,
    command: StepCommand,
    sink: OutputSink,
    watch: LimitWatch,
    startedAt: number,
    startedEpoch: number,
  ): Promise<StepOutcome> {
    const { handle } = state;
    const agent = state.agent!;
    const elapsed = () => Math.round(performance.now() - startedAt);
    if (!agent.isOpen) throw this.gone(handle, new Error('its exec agent is gone'));
    // As `docker exec` does: the container's environment, then the step's own on top.
    const budget = new OutputBudget(command.stopAfterOutputBytes);
    const running = agent.run({ ...command, env: { ...AGENT_BASE_ENV, ...command.env } }, budget.counting(sink));
    onAbort(command.cancel, () => agent.interrupt());

    const caps = this.watchCaps(state, watch, budget, command.timeoutMs, elapsed, () => agent.close());
    let exitCode = await running;
    await caps.settle();
    const { stopping, stop } = caps;

    if (stopping.teardown === null) {
      if (exitCode !== null && state.probe.coverage.memory === 'cgroup') {
        // The agent answered, so the sandbox runs; and the host reads its OOM kills itself: one
        // last look at the counters is the whole final look, without asking the engine.
        watch.observe(await this.look(state, elapsed(), true));
        if (watch.first !== null) stop();
      } else {
        const missing = await this.finalLook(state, watch, elapsed(), startedEpoch, exitCode === null || exitCode > 128);
        if (watch.first !== null) stop();
        else if (missing !== null || exitCode === null) throw this.gone(handle, missing ?? new Error('its exec agent is gone'));
      }
    } else {
      exitCode = null;
    }
    const durationMs = elapsed();
    const destroyed = stopping.teardown === null ? null : await stopping.teardown;
    if (stopping.error !== null) throw stopping.error;
    return { exitCode, durationMs, limits: watch.observations, limitHit: watch.decision, outputBudgetHit: budget.stopped, teardown: destroyed };
  }

  /**
   * Watches a running step's caps, deadline and output budget, whichever way the step was started:
   * samples the counters every `pollIntervalMs` and at the deadline; the first cap seen (or the
   * budget passed) stops the step by destroying the sandbox, then `release` ends the step's stream.
   * `settle` stops the sampling once the step has ended and waits for a look in flight.
   */
  private watchCaps(state: SandboxState, watch: LimitWatch, budget: OutputBudget, timeoutMs: number, elapsed: () => number, release: () => void) {
    const { handle } = state;
    // Set from the watch's callbacks; an object, so the compiler does not narrow it away.
    const stopping: { teardown: Promise<DestroyResult> | null; error: CairnError | null } = { teardown: null, error: null };
    const stop = () => {
      stopping.teardown ??= this.destroy(handle)
        .catch((error: unknown) => {
          stopping.error = engineError(error, 'E_INTERNAL', `destroying sandbox ${handle.name} after a cap was hit`, { name: handle.name });
          return { verifiedGone: false };
        })
        .finally(release);
    };
    budget.onPassed(() => {
      if (stopping.teardown === null) budget.stopped = true;
      stop();
    });
    let ticking: Promise<void> = Promise.resolve();
    const tick = (deadlinePassed: boolean) => {
      ticking = ticking.then(async () => {
        if (stopping.teardown !== null) return;
        // At the deadline, look inside too: a cap hit before it must win over the timeout.
        const sample = await this.look(state, elapsed(), deadlinePassed);
        if (deadlinePassed) sample.deadlinePassed = true;
        watch.observe(sample);
        if (watch.first !== null) stop();
      });
      // A look that fails is a look that saw nothing; the next tick or the final look tries again.
      ticking = ticking.catch(() => undefined);
    };
    const poll = setInterval(() => tick(false), this.pollIntervalMs);
    const deadline = setTimeout(() => tick(true), timeoutMs);
    const settle = async () => {
      clearInterval(poll);
      clearTimeout(deadline);
      await ticking;
    };
    return { stopping, stop, settle };
  }

  /** A sample from the host, completed from inside the sandbox when asked and needed. */
  /** A look at the counters; `incomplete`: a look from inside it tells is short is tried again for a moment. */
  private async look(state: SandboxState, atMs: number, inside: boolean, incomplete?: (seen: SandboxLook | undefined) => boolean): Promise<LimitSample> {
    const sample = await state.probe.sample(atMs);
    if (!inside || !state.probe.needsSandboxLook) return sample;
    let seen = await this.lookInside(state);
    for (let attempt = 1; incomplete !== undefined && incomplete(seen) && attempt < LAST_LOOK_ATTEMPTS; attempt++) {
      await sleep(LAST_LOOK_RETRY_MS);
      seen = await this.lookInside(state);
    }
    return seen === undefined ? sample : state.probe.merge(sample, seen);
  }

  /**
   * The last sample of a step, with the fallbacks that cost an API call or an exec. Returns why
   * the sandbox is no longer running (removed, stopped, or the engine is gone), or null.
   */
  private async finalLook(state: SandboxState, watch: LimitWatch, atMs: number, startedEpoch: number, signalled: boolean): Promise<unknown> {
    let missing: unknown = null;
    const inspect = () =>
      state.container.inspect().catch((error: unknown) => {
        missing = error;
        return null;
      });
    let info = await inspect();
    // A step killed by a signal may have died with its sandbox, whose end the engine records a
    // moment later: give it that moment before trusting "running".
    for (let i = 0; signalled && info?.State.Running === true && i < 5; i++) {
      await sleep(50);
      info = await inspect();
    }
    const sample = await this.lastLook(state, watch.baseline, atMs, info?.State.Running === true);
    if (info?.State.OOMKilled === true) sample.oomReported = true;
    if (state.probe.coverage.memory === 'sandbox') {
      const oom = await state.probe.engineReportedOom(startedEpoch - 10, Date.now());
      if (oom === true) sample.oomReported = true;
    }
    watch.observe(sample);
    if (missing === null && info?.State.Running !== true) missing = new Error(`it is ${info?.State.Status ?? 'gone'}`);
    return missing;
  }

  /**
   * A step's last look. What only the sandbox can read needs processes of its own there (`sh`,
   * `grep`, `stat`): right after a fork bomb none may be free until the bomb's last processes have
   * exited, so a look from inside that could not read what the step's first look read is tried
   * again for a moment before what it would have read is left unknown.
   */
  private lastLook(state: SandboxState, baseline: LimitSample, atMs: number, running: boolean): Promise<LimitSample> {
    const { memory, pids, disk } = state.probe.coverage;
    const short = (look: SandboxLook | undefined): boolean =>
      look === undefined ||
      (memory === 'sandbox' && baseline.oomKills !== undefined && look.oomKills === undefined) ||
      (pids === 'sandbox' && baseline.pidsMax !== undefined && look.pidsMax === undefined) ||
      (disk === 'sandbox' && baseline.tmpfs !== undefined && look.tmpfs === undefined);
    return this.look(state, atMs, running, short);
  }

  /** Counters and free space read from inside the sandbox (when the host cannot look). */
  private async lookInside(state: SandboxState): Promise<SandboxLook | undefined> {
    let stream: Duplex | null = null;
    // Bounded, so a sandbox too busy to answer cannot hold a step past its deadline.
    const timer = setTimeout(() => stream?.destroy(), LOOK_INSIDE_TIMEOUT_MS);
    try {
      const exec = await state.container.exec({
        Cmd: ['sh', '-c', SANDBOX_LOOK_SCRIPT, 'cairn-look', ...WRITABLE_MOUNTS],
        AttachStdout: true,
        AttachStderr: true,
      });
      const started = await exec.start({ hijack: true, stdin: false });
      stream = started;
      const out = new BoundedBuffer(16 * 1024);
      const demuxer = new ExecStreamDemuxer((s, chunk) => {
        if (s === 'stdout') out.push(chunk);
      });
      started.on('data', (chunk: Buffer) => demuxer.push(chunk));
      started.end();
      await new Promise<void>((resolve) => {
        started.once('end', resolve);
        started.once('close', resolve);
        started.once('error', () => resolve());
      });
      return parseSandboxLook(Buffer.from(out.bytes()).toString('utf8'));
    } catch {
      // Under a fork bomb even this exec cannot start: what it would have read stays unknown.
      return undefined;
    } finally {
      clearTimeout(timer);
    }
  }


  /**
   * Kills a runtime command started over `docker exec` (a transfer cut at its bound): the engine
   * cannot, so its host pid is signalled — only while the engine says it runs and its cgroup names
   * this sandbox, so a pid reused meanwhile is left alone.
   */
  private async killExec(exec: Docker.Exec, containerId: string): Promise<void> {
    await this.signalExec(exec, containerId);
    // A SIGKILL is only queued: under load its target runs on for a while. Told "cut", the caller
    // must find nothing of the command still running, so the engine's word that it ended (its
    // shim has reaped it) is awaited, bounded. A command this process could not signal ends too
    // once its output is cut (SIGPIPE): waited for alike.
    for (const deadline = performance.now() + KILL_WAIT_MS; performance.now() < deadline; await sleep(20)) {
      const now = await exec.inspect().catch(() => null);
      if (now === null || now.Running !== true) return;
    }
  }

  private async signalExec(exec: Docker.Exec, containerId: string): Promise<void> {
    const info = await exec.inspect().catch(() => null);
    const pid = info?.Running === true ? info.Pid : 0;
    if (!Number.isInteger(pid) || pid <= 1) return;
    const cgroup = await readFile(`/proc/${pid}/cgroup`, 'utf8').catch(() => '');
    if (!cgroup.includes(containerId)) return;
    // The command and what it started (its children, theirs, and its process group), as the agent
    // kills a command's session: a `sleep &` must not outlive its command's kill.
    for (const target of [pid, ...(await descendantsOf(pid))]) {
      try {
        process.kill(target, 'SIGKILL');
      } catch {
        // Gone already, or not ours to signal (not root): its stream is cut all the same.
      }
    }
  }

  /** The exit code once the engine has recorded it (it can trail the end of the stream). */
  private async exitCodeOf(exec: Docker.Exec): Promise<number | null> {
    for (let attempt = 0; attempt < 50; attempt++) {
      try {
        const info = await exec.inspect();
        if (!info.Running) return info.ExitCode ?? null;
      } catch {
        return null;
      }
      await sleep(20);
    }
    return null;
  }

  // --- bookkeeping ---------------------------------------------------------------------------

  private async resolveImage(image: string): Promise<string> {
    try {
      return (await this.docker.getImage(image).inspect()).Id;
    } catch (error) {
      if (engineStatus(error) === 404) {
        throw new CairnError('E_IMAGE_PULL', `image ${image} is not on this engine (sandbox images are built locally, never pulled)`, { image });
      }
      throw engineError(error, 'E_IMAGE_PULL', `looking up image ${image}`, { image });
    }
  }

  private async openProbe(containerId: string, pid: number): Promise<LimitProbe> {
    return LimitProbe.open({ docker: this.docker, containerId, pid, mounts: WRITABLE_MOUNTS, mode: this.probeMode });
  }

  /** The state of a handle, rebuilt from the engine for one this driver did not create. */
  private async state(handle: SandboxHandle): Promise<SandboxState> {
    const known = this.sandboxes.get(handle.id);
    if (known !== undefined) return known;
    const container = this.docker.getContainer(handle.id);
    let info: Docker.ContainerInspectInfo;
    try {
      info = await container.inspect();
    } catch (error) {
      if (engineStatus(error) === 404) throw this.gone(handle, error);
      throw engineError(error, 'E_INTERNAL', `looking up sandbox ${handle.name}`, { name: handle.name });
    }
    if (!info.State.Running) throw this.gone(handle, new Error(`it is ${info.State.Status}`));
    const probe = await this.openProbe(info.Id, info.State.Pid);
    // Not created by this driver: its agent's connection (if it has one) was another process's.
    const state: SandboxState = { handle, container, probe, busy: false, agent: null, info: null };
    this.sandboxes.set(handle.id, state);
    return state;
  }

  private gone(handle: SandboxHandle, error: unknown): CairnError {
    this.sandboxes.delete(handle.id);
    const cause = engineError(error, 'E_NOT_FOUND', `sandbox ${handle.name} is gone`, { name: handle.name });
    return cause.code === 'E_RUNTIME_ABSENT' ? cause : new CairnError('E_NOT_FOUND', cause.message, cause.details);
  }

  /** Kill and remove; a sandbox already gone (or going) is fine. */
  private async removeContainer(id: string): Promise<void> {
    try {
      await this.docker.getContainer(id).remove({ force: true, v: true });
    } catch (error) {
      const status = engineStatus(error);
      // 404: already gone; 409: a removal is already under way (verifyGone waits for it).
      if (status !== 404 && status !== 409) throw engineError(error, 'E_INTERNAL', `removing sandbox ${id}`, { id });
    }
    const name = this.agentNames.get(id);
    if (name !== undefined) {
      this.agentNames.delete(id);
      await this.closeAgent(name);
    }
  }

  // --- exec agent ----------------------------------------------------------------------------

  /** Listens for the agent of a sandbox about to be created; null when steps go over `docker exec`. */
  private async openAgent(workerId: string, name: string): Promise<AgentEndpoint | null> {
    if (this.execAgent === null) return null;
    this.agentOpening.add(name);
    this.agentWorkerDirs.add(join(this.execAgent.socketRoot, workerId));
    try {
      const owner = await this.userOnHost();
      const endpoint = await AgentEndpoint.open(join(this.execAgent.socketRoot, workerId, name), owner, this.execAgent.connectTimeoutMs ?? 5000).catch(
        (error: unknown) => {
          throw new CairnError('E_SANDBOX_START', `opening the exec agent's socket for ${name}: ${error instanceof Error ? error.message : String(error)}`, { name });
        },
      );
      this.agentEndpoints.set(name, endpoint);
      return endpoint;
    } finally {
      this.agentOpening.delete(name);
    }
  }

  /** Asked of the engine once; a failed answer is asked again next time. */
  private userOnHost(): Promise<SandboxUser> {
    this.hostUser ??= engineUserns(this.docker).then(
      (userns) => hostIdsOf(this.user, userns),
      (error: unknown) => {
        this.hostUser = null;
        throw error;
      },
    );
    return this.hostUser;
  }

  private async closeAgent(name: string): Promise<void> {
    const endpoint = this.agentEndpoints.get(name);
    if (endpoint === undefined) return;
    this.agentEndpoints.delete(name);
    await endpoint.close().catch(() => undefined);
  }

  /** I-8: the engine must answer 404 for the sandbox; waits out a removal in progress. */
  private async verifyGone(id: string): Promise<boolean> {
    for (let attempt = 0; attempt < 50; attempt++) {
      try {
        await this.docker.getContainer(id).inspect();
      } catch (error) {
        if (engineStatus(error) === 404) return true;
        throw engineError(error, 'E_INTERNAL', `checking that sandbox ${id} is gone`, { id });
      }
      await sleep(100);
      if (attempt % 10 === 9) await this.removeContainer(id);
    }
    return false;
  }
}

/**
 * Counts a step's stdout and stderr together against `ExecRequest.stopAfterOutputBytes` as they
 * arrive, and says once when the total passes it — also if that happened before anyone listened.
 */
class OutputBudget {
  private total = 0;
  private listener: (() => void) | null = null;
  private passed = false;
  /** Set by the step's watch: the budget, not a cap, is what stopped the step. */
  stopped = false;

  constructor(private readonly bytes: number | undefined) {}

  counting(sink: OutputSink): OutputSink {
    if (this.bytes === undefined) return sink;
    return (stream, chunk) => {
      sink(stream, chunk);
      this.total += chunk.length;
      if (!this.passed && this.total > (this.bytes ?? Infinity)) {
        this.passed = true;
        this.listener?.();
      }
    };
  }

  onPassed(listener: () => void): void {
    this.listener = listener;
    if (this.passed) listener();
  }
}

/** Calls `listener` once when `signal` aborts (at once if it has). */
/** Every process below `pid` (by parent, on the host's /proc), and those of its process group. */
async function descendantsOf(pid: number): Promise<number[]> {
  const entries = await readdir('/proc').catch(() => [] as string[]);
  const procs: { pid: number; ppid: number; pgrp: number }[] = [];
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = await readFile(`/proc/${entry}/stat`, 'utf8').catch(() => '');
    // pid (comm) state ppid pgrp …: the comm may hold spaces and parentheses, so read after the last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (fields.length > 2) procs.push({ pid: Number(entry), ppid: Number(fields[1]), pgrp: Number(fields[2]) });
  }
  const found = new Set<number>();
  let frontier = [pid];
  while (frontier.length > 0) {
    const next = procs.filter((p) => frontier.includes(p.ppid) && !found.has(p.pid)).map((p) => p.pid);
    for (const child of next) found.add(child);
    frontier = next;
  }
  for (const p of procs) if (p.pgrp === pid && p.pid !== pid) found.add(p.pid);
  return [...found];
}

function onAbort(signal: AbortSignal | undefined, listener: () => void): void {
  if (signal === undefined) return;
  if (signal.aborted) listener();
  else signal.addEventListener('abort', listener, { once: true });
}

function checkExecRequest(handle: SandboxHandle, request: ExecRequest): void {
  const bad = (message: string): never => {
    throw new CairnError('E_INPUT', message, { name: handle.name });
  };
  const { argv, env, workdir, timeoutMs, maxOutputBytes } = request;
  if (!Array.isArray(argv) || argv.length === 0) bad('argv must be a non-empty array of strings (I-3)');
  for (const arg of argv) if (typeof arg !== 'string' || arg.includes(NUL)) bad('every argv element must be a string without NUL');
  if (argv[0] === '') bad('argv[0] (the program) may not be empty');
  for (const [name, value] of Object.entries(env ?? {})) {
    if (!ENV_NAME.test(name) || typeof value !== 'string' || value.includes(NUL)) bad(`bad environment variable ${JSON.stringify(name)}`);
  }
  if (workdir !== undefined && (!workdir.startsWith('/') || workdir.includes(NUL))) bad('workdir must be an absolute path');
  if (!Number.isInteger(timeoutMs) || timeoutMs < 1) bad('timeoutMs must be a positive integer');
  // I-6: a step's time may be lower than the sandbox's cap, never higher; refused, not clamped.
  if (timeoutMs > handle.caps.wallSeconds * 1000) bad(`timeoutMs ${timeoutMs} is over the sandbox's cap of ${handle.caps.wallSeconds} s`);
  const interruptAfter = request.interruptAfterMs;
  if (interruptAfter !== undefined && (!Number.isInteger(interruptAfter) || interruptAfter < 1 || interruptAfter >= timeoutMs)) bad('interruptAfterMs must be a positive integer below timeoutMs');
  if (!Number.isInteger(maxOutputBytes) || maxOutputBytes < 0 || maxOutputBytes > MAX_OUTPUT_BYTES) bad('maxOutputBytes must be a non-negative integer');
  const budget = request.stopAfterOutputBytes;
  if (budget !== undefined && (!Number.isSafeInteger(budget) || budget < 0)) bad('stopAfterOutputBytes must be a non-negative integer');
}

/** A file transfer is the runtime's own command: a cap hit is its error, and so is a failure. */
function failOnTransfer(handle: SandboxHandle, what: string, outcome: StepOutcome, stderr: BoundedBuffer): void {
  if (outcome.limitHit !== null) {
    throw new CairnError(outcome.limitHit, `${what} ${handle.name} hit a cap; the sandbox was destroyed`, {
      name: handle.name,
      limits: outcome.limits,
      verifiedGone: outcome.teardown?.verifiedGone ?? false,
    });
  }
  if (outcome.exitCode !== 0) {
    throw new CairnError('E_INTERNAL', `${what} ${handle.name} failed (exit ${outcome.exitCode ?? 'none'})`, {
      name: handle.name,
      stderr: Buffer.from(stderr.bytes()).toString('utf8'),
    });
  }
}
