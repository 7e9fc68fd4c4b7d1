import { LocalImageTagSchema } from '@cairn/operational';
import type { SandboxCaps, SandboxDriver, SandboxHandle } from '@cairn/sandbox';
import {
  buildDockerfileImage,
  bundledExecAgent,
  createDockerClient,
  DEFAULT_SANDBOX_USER,
  defaultAgentSocketRoot,
  DockerSandboxDriver,
  engineError,
  engineStatus,
  engineUserns,
  imageDigest,
  listCairnImages,
  parseEgressHosts,
  staticResolver,
  systemResolver,
} from '@cairn/sandbox-docker';
import type { DockerfileBuild, DockerfileBuildOptions, EgressRequest, EngineUserns, ExecAgentOptions, ProbeMode, SandboxEgress, SandboxSecretIn, SandboxUser } from '@cairn/sandbox-docker';
import type { SandboxSpecInput } from '@cairn/sandbox';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { InspectedSandbox } from './sandbox-hardening.js';

type DockerClient = ReturnType<typeof createDockerClient>;
/** How often, and how far apart, a sandbox reported gone is looked at before "still running" is believed. */
const ENDED_LOOKS = 20;
const ENDED_LOOK_MS = 50;
/** How long the engine's answer to "which image is this tag" is taken as current (see `imageId`). */
const IMAGE_ID_FRESH_MS = 10_000;

/**
 * The worker's container engine: the sandbox port (the only way untrusted commands reach it,
 * I-2) and the two image look-ups the runtime makes itself (what it registers, what it starts).
 */
export class SandboxEngine {
  readonly driver: SandboxDriver;
  private readonly pooled: DockerSandboxDriver;
  private readonly docker: DockerClient;
  /** Tag → image id as the engine last answered, and when (see `imageId`). */
  private readonly imageIds = new Map<string, { id: string; at: number }>();
  /** The engine's security options; they do not change while it runs. */
  private securityOptions: readonly string[] | null = null;
  /** Who every sandbox process runs as (CAIRN_SANDBOX_USER). */
  readonly user: SandboxUser;
  /** Every sandbox must run user-namespace-remapped (CAIRN_SANDBOX_REQUIRE_USERNS). */
  readonly requireUserns: boolean;
  private readonly execAgent: ExecAgentOptions | null;

  /** `egressHosts`: `CAIRN_EGRESS_HOSTS`, a fixed name table the egress proxy uses instead of DNS. */
  constructor(options: {
    socketPath: string;
    probes: ProbeMode;
    warmPool?: { perProfile: number; total: number };
    egressHosts?: string | undefined;
    user?: SandboxUser;
    requireUserns?: boolean;
    onWarmFailed?: (error: unknown) => void;
    onRemovalFailed?: (containerId: string, error: unknown, retrying: boolean) => void;
    /**
     * Where the exec agent's binary and socket directories are (CAIRN_AGENT_BINARY, CAIRN_AGENT_SOCKET_ROOT):
     * paths the engine binds into sandboxes, so a runtime in a container names host paths it shares.
     */
    agent?: { binary?: string | undefined; socketRoot?: string | undefined };
  }) {
    this.docker = createDockerClient(options.socketPath);
    this.user = options.user ?? DEFAULT_SANDBOX_USER;
    this.requireUserns = options.requireUserns ?? false;
    // Chosen here rather than by the driver, so the hardening check knows what the agent's binds must be.
    const bundled = bundledExecAgent(options.agent?.socketRoot);
    this.execAgent = options.agent?.binary === undefined ? bundled : { binary: options.agent.binary, socketRoot: options.agent.socketRoot ?? bundled?.socketRoot ?? defaultAgentSocketRoot() };
    const resolver = options.egressHosts === undefined ? systemResolver() : staticResolver(parseEgressHosts(options.egressHosts));
    this.pooled = new DockerSandboxDriver({
      docker: this.docker,
      user: this.user,
      execAgent: this.execAgent,
      probes: options.probes,
      warmPool: options.warmPool ?? { perProfile: 0, total: 0 },
      ...(options.onWarmFailed === undefined ? {} : { onWarmFailed: options.onWarmFailed }),
      ...(options.onRemovalFailed === undefined ? {} : { onRemovalFailed: options.onRemovalFailed }),
      egress: { resolver },
    });
    this.driver = this.pooled;
  }

  /** Whether (and from which host ids) the engine remaps user namespaces: `docker info`, asked each time. */
  userns(): Promise<EngineUserns> {
    return engineUserns(this.docker);
  }

  /**
   * A sandbox, on an egress network of its own when `egress` is given (an internal network whose
   * only way out is an allowlisting proxy; docs/sandbox-hardening.md, "Egress"), else with no network.
   */
  createSandbox(spec: SandboxSpecInput, egress?: EgressRequest): Promise<SandboxHandle> {
    return egress === undefined ? this.driver.create(spec) : this.pooled.create(spec, { egress });
  }

  /** Writes a run's secrets to /run/secrets/NAME (root's, 0440 for the sandbox's group), over exec's stdin only. */
  putSecrets(handle: SandboxHandle, secrets: readonly SandboxSecretIn[]): Promise<void> {
    return this.pooled.putSecrets(handle, secrets);
  }

  /** The egress network of a sandbox created with one; null for network `none`. */
  egressOf(handle: SandboxHandle): SandboxEgress | null {
    return this.pooled.egressOf(handle);
  }

  /** Idle warm sandboxes now (operational state, never evidence). */
  get warmCount(): number {
    return this.pooled.warmCount;
  }

  /** The warm pool's size, hits and misses, and containers started, for the heartbeat (operational state). */
  get poolStats(): { size: number; hits: number; misses: number; containersStarted: number } {
    return this.pooled.poolStats;
  }

  /** How the warm pool stays within the worker's capacity (see `DockerSandboxDriver.setPoolRoom`). */
  setPoolRoom(room: (held: readonly SandboxCaps[]) => boolean): void {
    this.pooled.setPoolRoom(room);
  }

  /** Gives back idle warm sandboxes that no longer fit beside the worker's placed work. */
  trimPool(): void {
    this.pooled.trimPool();
  }

  /** Tops the warm pool up within the worker's room (placed work just ended). */
  refillPool(): void {
    this.pooled.refillPool();
  }

  /** Destroys the idle warm sandboxes and warms no more (shutdown). */
  closePool(): Promise<void> {
    return this.pooled.closePool();
  }

  /**
   * The local image id (`sha256:…`) of `tag`; `E_IMAGE_PULL` when the engine does not have it.
   * The engine is asked again unless it answered for `tag` in the last IMAGE_ID_FRESH_MS and that
   * answer is the id `expected` (the digest policy granted) when one is given: a tag moved to a new
   * image is seen at once where a grant names it, and within that time where none does. What is
   * started is made from the id returned, never from the tag, so it is what the receipt records.
   */
  async imageId(tag: string, expected: string | null = null): Promise<string> {
    const known = this.imageIds.get(tag);
    if (known !== undefined && Date.now() - known.at < IMAGE_ID_FRESH_MS && (expected === null || known.id === expected)) return known.id;
    const id = await imageDigest(tag, this.docker);
    this.imageIds.set(tag, { id, at: Date.now() });
    return id;
  }

  /** Builds an image from a Dockerfile on this engine, offline (docs/adr/0018, 0038): the rules of `cairn images build --file`. */
  buildImage(options: Omit<DockerfileBuildOptions, 'docker' | 'network' | 'kindLabels'>): Promise<DockerfileBuild> {
    return buildDockerfileImage({ ...options, docker: this.docker });
  }

  /** What the engine reports a started sandbox runs under, for `sandbox.created` (see sandbox-hardening.ts). */
  async inspectSandbox(handle: SandboxHandle): Promise<InspectedSandbox> {
    try {
      // The driver's own look at it as it started, when it has one: config cannot change after.
      const info = this.pooled.startedInspection(handle) ?? (await this.docker.getContainer(handle.id).inspect());
      if (this.securityOptions === null) {
        const engine: unknown = await this.docker.info();
        const options = typeof engine === 'object' && engine !== null && 'SecurityOptions' in engine ? engine.SecurityOptions : [];
        this.securityOptions = Array.isArray(options) ? options.filter((o): o is string => typeof o === 'string') : [];
      }
      return {
        hostConfig: info.HostConfig,
        config: info.Config,
        mounts: info.Mounts,
        image: info.Image,
        appArmorProfile: info.AppArmorProfile,
        engineSecurityOptions: this.securityOptions,
        promised: {
          user: this.user,
          imageId: handle.imageId,
          agent: this.execAgent === null ? null : { binary: this.execAgent.binary, socketDirs: join(this.execAgent.socketRoot, handle.workerId) },
          requireUserns: this.requireUserns,
        },
      };
    } catch (error) {
      throw engineError(error, 'E_SANDBOX_START', `inspecting sandbox ${handle.name}`, { name: handle.name });
    }
  }

  /**
   * Whether a sandbox the driver reports gone was stopped (it still exists, not running: its init
   * ended — the exit status says how) or removed (the engine no longer knows it). A sandbox seen
   * running is given a moment to finish stopping: its init may be on its way out.
   */
  async endedState(handle: SandboxHandle): Promise<{ kind: 'stopped'; exitCode: number | null } | { kind: 'removed' } | { kind: 'running' }> {
    for (let look = 0; ; look++) {
      const info = await this.docker
        .getContainer(handle.id)
        .inspect()
        .catch((error: unknown) => {
          if (engineStatus(error) === 404) return null;
          throw engineError(error, 'E_INTERNAL', `inspecting sandbox ${handle.name}`, { name: handle.name });
        });
      if (info === null) return { kind: 'removed' };
      if (!info.State.Running) return { kind: 'stopped', exitCode: typeof info.State.ExitCode === 'number' ? info.State.ExitCode : null };
      if (look >= ENDED_LOOKS) return { kind: 'running' };
      await sleep(ENDED_LOOK_MS);
    }
  }

  /** Cairn's sandbox images here, tag → image id, as the worker registry records them. */
  async localImages(): Promise<Record<string, string>> {
    const images: Record<string, string> = {};
    for (const image of await listCairnImages(this.docker)) {
      for (const tag of image.tags) if (LocalImageTagSchema.safeParse(tag).success) images[tag] = image.id;
    }
    return images;
  }
}
