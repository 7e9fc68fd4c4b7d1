import { API_ROUTES, CairnError, ImageBuildRequestSchema, inputIssues, MAX_IMAGE_BUILD_REQUEST_BYTES } from '@cairn/contracts';
import type { ImageBuilt } from '@cairn/contracts';
import { dockerfileBases } from '@cairn/sandbox';
import { ImageBuilder } from '@cairn/sandbox-sessions';
import { Body, Controller } from '@nestjs/common';
import type { Principal } from '../auth/api-key.store.js';
import { CurrentPrincipal } from '../auth/current-principal.decorator.js';
import { ApiRoute } from '../http/api-route.decorator.js';
import { assertNoCredentials, imageBuildOf } from '../runs/harbor-submission.js';

/** The files of a build request, decoded and checked (E_INPUT, nothing sent): pure. */
export function imageBuildRequestOf(body: unknown): { dockerfile: string; files: { path: string; content: Uint8Array; mode: number }[]; bases: string[]; timeoutSeconds: number | undefined } {
  const parsed = ImageBuildRequestSchema.safeParse(body);
  if (!parsed.success) {
    const issues = inputIssues(parsed.error);
    throw new CairnError('E_INPUT', `the image build: ${issues.map((i) => `${i.path}: ${i.message}`).join('; ')}`, { issues });
  }
  const files = (parsed.data.files ?? []).map((file) => ({ path: file.path, content: new Uint8Array(Buffer.from(file.content, 'base64')), mode: file.mode ?? 0o644 }));
  const bytes = Buffer.byteLength(parsed.data.dockerfile) + files.reduce((sum, file) => sum + file.content.byteLength, 0);
  if (bytes > MAX_IMAGE_BUILD_REQUEST_BYTES) throw new CairnError('E_INPUT', `the image build: ${bytes} bytes of Dockerfile and files; at most ${MAX_IMAGE_BUILD_REQUEST_BYTES}`, { bytes, limit: MAX_IMAGE_BUILD_REQUEST_BYTES });
  const bases = dockerfileBases(parsed.data.dockerfile);
  assertNoCredentials([{ path: 'Dockerfile', content: new TextEncoder().encode(parsed.data.dockerfile) }, ...files], 'the image build');
  return { dockerfile: parsed.data.dockerfile, files, bases, timeoutSeconds: parsed.data.timeoutSeconds };
}

/** `/v1/images/builds` (docs/adr/0038): a worker builds, the gateway (which has no engine) asks and answers. */
@Controller()
export class ImagesController {
  constructor(private readonly images: ImageBuilder) {}

  @ApiRoute(API_ROUTES.buildImage)
  async build(@CurrentPrincipal() principal: Principal, @Body() body: unknown): Promise<ImageBuilt> {
    const request = imageBuildRequestOf(body);
    const built = await this.images.build({
      tenant: principal.tenant,
      requestedBy: `key:${principal.keyId}`,
      dockerfile: request.dockerfile,
      files: request.files,
      bases: request.bases,
      ...(request.timeoutSeconds === undefined ? {} : { timeoutSeconds: request.timeoutSeconds }),
    });
    return { ...imageBuildOf(built), tag: built.tag, durationMs: built.duration_ms, workerId: built.worker_id };
  }
}
