import { z } from 'zod';
import { BuildContextPathSchema, MAX_BUILD_DOCKERFILE_BYTES, MAX_BUILD_TIMEOUT_SECONDS } from '../image-build-ops.schema.js';
import { ImageBuildSchema, ImageRefSchema } from '../run-spec.schema.js';

/*
 * `POST /v1/images/builds` (docs/adr/0038): a Dockerfile and its context built by a worker, as
 * `cairn images build --file` builds on its host — the same op the Harbor route sends. The files
 * travel as JSON of base64, within the gateway's 1 MiB body limit, as a Harbor task's do.
 */

/** At most this many context files. */
export const MAX_IMAGE_BUILD_REQUEST_FILES = 256;
/** The decoded bytes of the Dockerfile and the files together, at most (the body limit bounds the base64 first). */
export const MAX_IMAGE_BUILD_REQUEST_BYTES = 768 * 1024;

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

export const ImageBuildRequestSchema = z
  .strictObject({
    /** The Dockerfile's text: every FROM an image on the worker, no variable in a FROM. */
    dockerfile: z.string().min(1).max(MAX_BUILD_DOCKERFILE_BYTES),
    /** The build context: relative paths, regular files only. */
    files: z
      .array(
        z.strictObject({
          path: BuildContextPathSchema,
          content: z.string().max(Math.ceil(MAX_IMAGE_BUILD_REQUEST_BYTES / 3) * 4).regex(BASE64, 'content is not valid base64'),
          mode: z.number().int().min(0).max(0o777, 'only regular files: the mode holds permission bits (at most 0o777)').optional(),
        }),
      )
      .max(MAX_IMAGE_BUILD_REQUEST_FILES)
      .optional(),
    /** The build's time limit, at most the worker's (`CAIRN_BUILD_TIMEOUT_SECONDS`). */
    timeoutSeconds: z.number().int().min(1).max(MAX_BUILD_TIMEOUT_SECONDS).optional(),
  })
  .superRefine((body, context) => {
    const seen = new Set<string>();
    (body.files ?? []).forEach((file, index) => {
      if (seen.has(file.path)) context.addIssue({ code: 'custom', path: ['files', index, 'path'], message: `${file.path} is given twice` });
      seen.add(file.path);
    });
  });
export type ImageBuildRequest = z.infer<typeof ImageBuildRequestSchema>;

/** An image a worker built (or found built): what a RunSpec names (`image`) and records (`imageBuild`). */
export const ImageBuiltSchema = z.strictObject({
  /** `cairn/built:<tag>@<image id>`: the reference a RunSpec runs it by. */
  image: ImageRefSchema,
  tag: ImageRefSchema,
  imageBuild: ImageBuildSchema,
  durationMs: z.number().int().min(0),
  /** The worker that built it: its engine alone has the image, so a run on it is placed there. */
  workerId: z.string().min(1).max(128),
});
export type ImageBuilt = z.infer<typeof ImageBuiltSchema>;
