import { z } from 'zod';
import { RunIdSchema } from '../envelope.js';
import { ArgvSchema, ImageBuildSchema, ImageRefSchema, JobNameSchema } from '../run-spec.schema.js';

/*
 * A Harbor / Terminal-Bench task directory sent over REST (`POST /v1/missions/harbor`, docs/adr/0034):
 * its files as JSON, each base64, within the gateway's 1 MiB body limit; the gateway maps them to a
 * RunSpec with the same mapping `cairn run <task-dir>` uses (@cairn/harbor).
 */

/** At most this many files in one task. */
export const MAX_HARBOR_TASK_FILES = 256;
/** The decoded bytes of all a task's files, at most (the body limit bounds the base64 text first). */
export const MAX_HARBOR_TASK_BYTES = 768 * 1024;

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/**
 * A path inside the task directory: relative, `/`-separated, no `.` or `..` segment, no empty
 * segment, no backslash or control character. Nothing it names can leave the directory.
 */
export const HarborTaskPathSchema = z
  .string()
  .min(1)
  .max(255)
  .refine((path) => !path.startsWith('/'), 'an absolute path: a task file is named relative to the task directory')
  .refine((path) => !path.includes('\\') && ![...path].some((char) => char.charCodeAt(0) < 0x20 || char.charCodeAt(0) === 0x7f), 'a backslash or a control character')
  .refine((path) => path.split('/').every((segment) => segment !== '' && segment !== '.' && segment !== '..'), 'a path with an empty, `.` or `..` segment (no traversal)')
  .refine((path) => path.split('/').length <= 16, 'at most 16 levels deep');

export const HarborTaskFileSchema = z.strictObject({
  path: HarborTaskPathSchema,
  /** The file's bytes, base64. */
  content: z.string().max(Math.ceil(MAX_HARBOR_TASK_BYTES / 3) * 4).regex(BASE64, 'content is not valid base64'),
  /** Permission bits only (0o755 for a script): a symlink, a device or any other file type is refused. */
  mode: z.number().int().min(0).max(0o777, 'only regular files: the mode holds permission bits (at most 0o777), never a file type such as a symlink').optional(),
});
export type HarborTaskFile = z.infer<typeof HarborTaskFileSchema>;

export const HarborTaskSubmissionSchema = z
  .strictObject({
    files: z.array(HarborTaskFileSchema).min(1).max(MAX_HARBOR_TASK_FILES),
    /** Run `solution/solve.sh` as the agent. */
    oracle: z.boolean().optional(),
    /** Or the agent's argv (I-3), run with the instruction at `$HARBOR_INSTRUCTION_FILE`. */
    agent: ArgvSchema.optional(),
    /** The task's name when task.toml has no `[task] name` (the CLI and SDKs send the directory's name). */
    name: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/, 'a name is [A-Za-z0-9._-], at most 128 characters').optional(),
    /** The job the run belongs to (a directory of tasks). */
    job: JobNameSchema.optional(),
  })
  .superRefine((body, context) => {
    if ((body.oracle === true) === (body.agent !== undefined)) {
      context.addIssue({ code: 'custom', path: ['oracle'], message: 'give oracle: true (run solution/solve.sh) or agent (an argv), exactly one' });
    }
    const seen = new Set<string>();
    body.files.forEach((file, index) => {
      if (seen.has(file.path)) context.addIssue({ code: 'custom', path: ['files', index, 'path'], message: `${file.path} is given twice` });
      seen.add(file.path);
    });
  });
export type HarborTaskSubmission = z.infer<typeof HarborTaskSubmissionSchema>;

/**
 * The answer to `POST /v1/missions/harbor` (docs/adr/0038): `POST /v1/runs`'s, plus the image a worker
 * built for the task (or found built: `imageBuild.cached`) — the run's `image` and `imageBuild` as
 * submitted — and the worker that has it.
 */
export const HarborSubmitAcceptedSchema = z.strictObject({
  runId: RunIdSchema,
  state: z.literal('SUBMITTED'),
  /** True when this Idempotency-Key had created the run before: nothing new happened. */
  duplicate: z.boolean(),
  /** `cairn/built:<tag>@<image id>`: the run's image, pinned by id. */
  image: ImageRefSchema,
  imageBuild: ImageBuildSchema,
  /** The worker that built it: its engine alone has the image, so the run is placed there. */
  workerId: z.string().min(1).max(128),
});
export type HarborSubmitAccepted = z.infer<typeof HarborSubmitAcceptedSchema>;
