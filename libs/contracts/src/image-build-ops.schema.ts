import { z } from 'zod';
import { ActorSchema, Sha256HexSchema, TenantIdSchema, TimestampSchema } from './envelope.js';
import { ErrorBodySchema } from './error-codes.js';
import { ImageRefSchema } from './run-spec.schema.js';
import { SANDBOX_CHUNK_BYTES } from './sandbox-ops.schema.js';

/*
 * An image built from a Dockerfile by a worker, for the gateway (docs/adr/0038): the gateway has no
 * engine, so it sends a build to one worker's JetStream work-queue subject (`buildSubject`), as it
 * sends a sandbox op; that worker's runtime builds with the rules of `cairn images build --file`
 * (ADR 0018: every FROM a local image, no pull, no network, cached by digest, labelled) and answers
 * on the op's core-NATS `reply_to` with one `end`: the build record, or why there is none. The
 * context's bytes travel on core NATS, pulled by the worker a chunk at a time from `data_subject`
 * (as a sandbox file write's are); the op names their size and sha256, and the worker checks both.
 * Snake_case like the other commands.
 */

/** `<command prefix>.cmd.imgbuild.<worker id>`: only that worker's runtime consumes it. */
export function buildSubject(commandSubjectPrefix: string, workerId: string): string {
  return `${commandSubjectPrefix}.cmd.imgbuild.${workerId}`;
}

/** The Dockerfile and the context's files together: at most 64 MiB (a worker may be set lower; more is E_TOO_LARGE). */
export const MAX_BUILD_CONTEXT_BYTES = 64 * 1024 * 1024;
/** Files of a build's context. */
export const MAX_BUILD_CONTEXT_FILES = 4096;
/** A Dockerfile: at most 1 MiB (as `cairn images build --file`). */
export const MAX_BUILD_DOCKERFILE_BYTES = 1024 * 1024;
/** A build's time limit: at most one hour; the default is the worker's (CAIRN_BUILD_TIMEOUT_SECONDS). */
export const MAX_BUILD_TIMEOUT_SECONDS = 3600;

const OpIdSchema = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'an op id is [A-Za-z0-9_-]');
/** A core-NATS subject of the caller's (an inbox). */
const ReplySubjectSchema = z.string().regex(/^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)+$/, 'a NATS subject without wildcards');
/** Relative, `/`-separated, no empty, `.` or `..` segment, no backslash or control character. */
export const BuildContextPathSchema = z
  .string()
  .min(1)
  .max(1024)
  .refine(
    (path) =>
      !path.startsWith('/') &&
      !path.includes('\\') &&
      ![...path].some((char) => char.charCodeAt(0) < 0x20 || char.charCodeAt(0) === 0x7f) &&
      path.split('/').every((segment) => segment !== '' && segment !== '.' && segment !== '..'),
    'a relative path without empty, . or .. segments, backslashes or control characters',
  );

/** One file of the context: its bytes are the next `bytes` of the payload, after the Dockerfile's. */
export const BuildContextFileSchema = z.strictObject({
  path: BuildContextPathSchema,
  bytes: z.number().int().min(0),
  /** Permission bits only. */
  mode: z.number().int().min(0).max(0o777),
});
export type BuildContextFile = z.infer<typeof BuildContextFileSchema>;

export const ImageBuildOpSchema = z.strictObject({
  op_id: OpIdSchema,
  tenant: TenantIdSchema,
  /** Who asked (`key:<key id>`): the worker's log says who had it build. */
  requested_by: ActorSchema,
  reply_to: ReplySubjectSchema,
  /** Past it the caller has stopped waiting: the worker answers E_TIMEOUT and builds nothing. */
  expires_at: TimestampSchema,
  /** The build's time limit; absent: the worker's. Past it the build is stopped: E_TIMEOUT. */
  timeout_seconds: z.number().int().min(1).max(MAX_BUILD_TIMEOUT_SECONDS).optional(),
  /** Bytes of the Dockerfile: the payload's first. */
  dockerfile_bytes: z.number().int().min(1).max(MAX_BUILD_DOCKERFILE_BYTES),
  files: z.array(BuildContextFileSchema).max(MAX_BUILD_CONTEXT_FILES),
  /** The whole payload: the Dockerfile, then each file's bytes in order. Not bounded here: the worker refuses more than its limit with E_TOO_LARGE. */
  bytes: z.number().int().min(1),
  sha256: Sha256HexSchema,
  /** The worker asks the caller for chunk i (request `{ index }`) on this subject, one at a time. */
  data_subject: ReplySubjectSchema,
  chunks: z.number().int().min(1),
  /** The tag to give the image; absent: `cairn/built:<the digest's first 16 hex digits>`. */
  tag: ImageRefSchema.optional(),
});
export type ImageBuildOp = z.infer<typeof ImageBuildOpSchema>;

/** Bytes per chunk of a build's payload: as a sandbox file's. */
export const BUILD_CHUNK_BYTES = SANDBOX_CHUNK_BYTES;

/** What the worker built (or found built): the RunSpec's `imageBuild`, and the tag. Snake_case on the wire. */
export const BuiltImageSchema = z.strictObject({
  tag: ImageRefSchema,
  image_id: z.string().regex(/^sha256:[0-9a-f]{64}$/, 'an image id sha256:…'),
  digest: z.string().regex(/^[0-9a-f]{64}$/, 'a lower-case hex sha256'),
  dockerfile_sha256: z.string().regex(/^[0-9a-f]{64}$/, 'a lower-case hex sha256'),
  bases: z.array(z.strictObject({ ref: ImageRefSchema, id: z.string().regex(/^sha256:[0-9a-f]{64}$/, 'an image id sha256:…') })).max(16),
  cached: z.boolean(),
  duration_ms: z.number().int().min(0),
  /** The worker that built it: the only engine that has it, so the run that uses it is placed there. */
  worker_id: z.string().min(1).max(128),
});
export type BuiltImage = z.infer<typeof BuiltImageSchema>;

/** The one message on an image build's `reply_to`. */
export const ImageBuildEndSchema = z.discriminatedUnion('ok', [
  z.strictObject({ ok: z.literal(true), build: BuiltImageSchema }),
  z.strictObject({ ok: z.literal(false), error: ErrorBodySchema }),
]);
export type ImageBuildEnd = z.infer<typeof ImageBuildEndSchema>;
