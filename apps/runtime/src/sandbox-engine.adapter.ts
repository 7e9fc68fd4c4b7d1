import { LocalImageTagSchema } from '@cairn/operational';
import type { SandboxDriver, SandboxHandle } from '@cairn/sandbox';
import { createDockerClient, DockerSandboxDriver, engineError, imageDigest, listCairnImages } from '@cairn/sandbox-docker';
import type { ProbeMode } from '@cairn/sandbox-docker';
import type { InspectedSandbox } from './sandbox-hardening.js';

type DockerClient = ReturnType<typeof createDockerClient>;

/**
 * The worker's container engine: the sandbox port (the only way untrusted commands reach it,
 * I-2) and the two image look-ups the runtime makes itself (what it registers, what it starts).
 */
export class SandboxEngine {
  readonly driver: SandboxDriver;
  private readonly pooled: DockerSandboxDriver;
  private readonly docker: DockerClient;
  /** The engine's security options; they do not change while it runs. */
  private securityOptions: readonly string[] | null = null;

  constructor(options: { socketPath: string; probes: ProbeMode; warmPool?: { perProfile: number; total: number } }) {
    this.docker = createDockerClient(options.socketPath);
    this.pooled = new DockerSandboxDriver({ docker: this.docker, probes: options.probes, warmPool: options.warmPool ?? { perProfile: 0, total: 0 } });
    this.driver = this.pooled;
  }

  /** Idle warm sandboxes now (operational state, never evidence). */
  get warmCount(): number {
    return this.pooled.warmCount;
  }

  /** Destroys the idle warm sandboxes and warms no more (shutdown). */
  closePool(): Promise<void> {
    return this.pooled.closePool();
  }

  /** The local image id (`sha256:…`) of `tag`; `E_IMAGE_PULL` when the engine does not have it. */
  imageId(tag: string): Promise<string> {
    return imageDigest(tag, this.docker);
  }

  /** What the engine reports a started sandbox runs under, for `sandbox.created` (see sandbox-hardening.ts). */
  async inspectSandbox(handle: SandboxHandle): Promise<InspectedSandbox> {
    try {
      const info = await this.docker.getContainer(handle.id).inspect();
      if (this.securityOptions === null) {
        const engine: unknown = await this.docker.info();
        const options = typeof engine === 'object' && engine !== null && 'SecurityOptions' in engine ? engine.SecurityOptions : [];
        this.securityOptions = Array.isArray(options) ? options.filter((o): o is string => typeof o === 'string') : [];
      }
      return { hostConfig: info.HostConfig, user: info.Config.User, engineSecurityOptions: this.securityOptions };
    } catch (error) {
      throw engineError(error, 'E_SANDBOX_START', `inspecting sandbox ${handle.name}`, { name: handle.name });
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
