import { LocalImageTagSchema } from '@cairn/operational';
import type { SandboxDriver } from '@cairn/sandbox';
import { createDockerClient, DockerSandboxDriver, imageDigest, listCairnImages } from '@cairn/sandbox-docker';
import type { ProbeMode } from '@cairn/sandbox-docker';

type DockerClient = ReturnType<typeof createDockerClient>;

/**
 * The worker's container engine: the sandbox port (the only way untrusted commands reach it,
 * I-2) and the two image look-ups the runtime makes itself (what it registers, what it starts).
 */
export class SandboxEngine {
  readonly driver: SandboxDriver;
  private readonly docker: DockerClient;

  constructor(options: { socketPath: string; probes: ProbeMode }) {
    this.docker = createDockerClient(options.socketPath);
    this.driver = new DockerSandboxDriver({ docker: this.docker, probes: options.probes });
  }

  /** The local image id (`sha256:…`) of `tag`; `E_IMAGE_PULL` when the engine does not have it. */
  imageId(tag: string): Promise<string> {
    return imageDigest(tag, this.docker);
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
