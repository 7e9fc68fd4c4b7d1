import { API_COMPONENTS, ImageBuildRequestSchema } from '@cairn/contracts';
import type { ImageBuilt } from '@cairn/contracts';
import { toBase64 } from './bytes.js';
import { checked, HARBOR_SUBMIT_TIMEOUT_MS, signalOf } from './runs.js';
import { route } from './transport.js';
import type { Transport } from './transport.js';

/** A file of a build's context: its path relative to the context, its bytes (or UTF-8 text), its permission bits. */
export interface BuildFile {
  path: string;
  content: Uint8Array | string;
  mode?: number;
}

/** Images built from a Dockerfile by a worker (`POST /v1/images/builds`, docs/adr/0038). */
export class Images {
  constructor(private readonly http: Transport) {}

  /**
   * Has a worker build `dockerfile` with `files` as its context, offline (every FROM an image on the
   * worker), cached by digest; answers the image by id (`image`, as a RunSpec names it) and its
   * record. A build can take minutes: the call waits up to `timeoutMs` (default 15 minutes).
   */
  async build(dockerfile: string, files: readonly BuildFile[] = [], options: { timeoutSeconds?: number; signal?: AbortSignal; timeoutMs?: number } = {}): Promise<ImageBuilt> {
    const body = checked(
      ImageBuildRequestSchema,
      {
        dockerfile,
        ...(files.length === 0 ? {} : { files: files.map((file) => ({ path: file.path, content: toBase64(typeof file.content === 'string' ? new TextEncoder().encode(file.content) : file.content), ...(file.mode === undefined ? {} : { mode: file.mode }) })) }),
        ...(options.timeoutSeconds === undefined ? {} : { timeoutSeconds: options.timeoutSeconds }),
      },
      'image build',
    );
    const { method, path } = route('buildImage');
    return this.http.json(method, path, API_COMPONENTS.ImageBuilt, { json: body, timeoutMs: options.timeoutMs ?? HARBOR_SUBMIT_TIMEOUT_MS, ...signalOf(options.signal) });
  }
}
