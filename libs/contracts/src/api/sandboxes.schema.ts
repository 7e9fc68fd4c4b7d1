import { z } from 'zod';
import { SandboxIdSchema, Sha256HexSchema, TenantIdSchema, TimestampSchema } from '../envelope.js';
import { CairnError, ErrorCodeSchema } from '../error-codes.js';
import { ExecIdSchema, GrantedCapsSchema, WorkerIdSchema } from '../event-fields.schema.js';
import { AnySandboxPathSchema, ArgvSchema, EnvSchema, ImageRefSchema, inputIssues, NetworkSpecSchema, sandboxPathSchema } from '../run-spec.schema.js';
import { SandboxStateSchema, SandboxDestroyReasonSchema } from '../run-state.schema.js';
import { utf8ByteLength } from '../text-rules.js';
import { MAX_EXEC_STDIN_BYTES, MAX_SANDBOX_FILE_BYTES } from '../sandbox-ops.schema.js';
import { QueueSpotSchema } from './api.schema.js';

/*
 * The REST shapes of interactive sandbox sessions (camelCase, like the rest of the API). The
 * view is read from the `sandboxes` projection; exec and file answers come from the receipts the
 * session appended for them.
 */

export const SandboxSchema = z.strictObject({
  id: SandboxIdSchema,
  tenant: TenantIdSchema,
  state: SandboxStateSchema,
  /** The image policy granted (the requested one until policy decided; null when none was named yet). */
  image: ImageRefSchema.nullable(),
  /** `sha256:…` of the image the sandbox was created from. */
  imageId: z.string().nullable(),
  /** The caps policy granted; null until it decided. */
  caps: GrantedCapsSchema.nullable(),
  /** The network the spec asked for: `none`, or `{ egress: [host:port, …] }` through the egress proxy. */
  network: NetworkSpecSchema,
  workerId: WorkerIdSchema.nullable(),
  createdAt: TimestampSchema,
  readyAt: TimestampSchema.nullable(),
  /** When the TTL ends it (null only on a chain that did not start with `sandbox.requested`). */
  expiresAt: TimestampSchema.nullable(),
  /** Destroyed after this many seconds without an operation; null: no idle limit. */
  idleSeconds: z.number().int().positive().nullable(),
  lastActivityAt: TimestampSchema,
  /** Execs and file reads and writes recorded on the chain. */
  operations: z.number().int().min(0),
  destroyReason: SandboxDestroyReasonSchema.nullable(),
  errorCode: ErrorCodeSchema.nullable(),
  headSeq: z.number().int().min(0),
  headHash: Sha256HexSchema,
  sealed: z.boolean(),
  /** Present while its create waits in the placement queue (`waitSeconds`). */
  queue: QueueSpotSchema.optional(),
});
export type Sandbox = z.infer<typeof SandboxSchema>;

export const SandboxListSchema = z.strictObject({
  items: z.array(SandboxSchema),
  /** Pass as `cursor` for the next (older) page; null on the last page. */
  nextCursor: z.string().nullable(),
});
export type SandboxList = z.infer<typeof SandboxListSchema>;

export const ListSandboxesQuerySchema = z.strictObject({
  limit: z.coerce.number().int().min(1).max(200).optional(),
  cursor: z.string().min(1).max(512).optional(),
  state: SandboxStateSchema.optional(),
});
export type ListSandboxesQuery = z.infer<typeof ListSandboxesQuerySchema>;

/** Where a file may be written: below /work, /out or /tmp, normalised (no `..`, no control characters). */
export const SandboxFilePathSchema = sandboxPathSchema(['/work', '/out', '/tmp'], false);
/** What a file read may name: any absolute normalised path (the image's own files too; docs/sandboxes.md). */
export const SandboxReadPathSchema = AnySandboxPathSchema;

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

export const ExecRequestSchema = z
  .strictObject({
    argv: ArgvSchema,
    env: EnvSchema.optional(),
    /** Where the program starts: any absolute normalised directory of the sandbox; absent, /work. */
    workdir: AnySandboxPathSchema.optional(),
    /** UTF-8 text handed to the program's stdin, then closed; at most 512 KiB of it. */
    stdin: z
      .string()
      .refine((text) => utf8ByteLength(text) <= MAX_EXEC_STDIN_BYTES, `at most ${MAX_EXEC_STDIN_BYTES} bytes of UTF-8`)
      .optional(),
    /** Bytes (base64) handed to the program's stdin instead of `stdin`, for what is not text (NUL, invalid UTF-8); at most 512 KiB decoded. */
    stdinBase64: z
      .string()
      .max(Math.ceil(MAX_EXEC_STDIN_BYTES / 3) * 4)
      .regex(BASE64, 'base64 (RFC 4648, padded)')
      .optional(),
    /**
     * The exec's own deadline: past it the program and what it started in its session are killed,
     * and the sandbox lives on (`errorCode` E_TIMEOUT). Absent, or not shorter than the sandbox's
     * wall cap: the cap, whose hit destroys the sandbox.
     */
    timeoutSeconds: z.number().int().positive().max(86_400).optional(),
  })
  .refine((request) => request.stdin === undefined || request.stdinBase64 === undefined, { message: 'give stdin or stdinBase64, not both', path: ['stdinBase64'] });
export type ExecRequest = z.infer<typeof ExecRequestSchema>;

/** An exec body, or E_INPUT naming each field as a RunSpec's are named (`shell: unknown field`). */
export function parseExecRequest(input: unknown): ExecRequest {
  const result = ExecRequestSchema.safeParse(input);
  if (result.success) return result.data;
  const issues = inputIssues(result.error);
  throw new CairnError('E_INPUT', `invalid exec request: ${issues.map((i) => `${i.path}: ${i.message}`).join('; ')}`, { issues });
}

export const ExecLimitHitSchema = z.enum(['E_TIMEOUT', 'E_MEM_LIMIT', 'E_PROC_LIMIT', 'E_DISK_LIMIT']);

const execResultFields = {
  execId: ExecIdSchema,
  exitCode: z.number().int().nullable(),
  stdoutBytes: z.number().int().min(0),
  stderrBytes: z.number().int().min(0),
  stdoutSha256: Sha256HexSchema,
  stderrSha256: Sha256HexSchema,
  /** More than 1 MiB was written to a stream: only its first 1 MiB is kept. */
  truncated: z.boolean(),
  durationMs: z.number().int().min(0),
  /**
   * A limit this exec hit: a cap destroys the sandbox (`sandboxState` DESTROYED); E_TIMEOUT with the
   * sandbox READY is the exec's own `timeoutSeconds`, which killed only the program and its session.
   */
  limitHit: ExecLimitHitSchema.nullable(),
  errorCode: ErrorCodeSchema.nullable(),
  /** The seq of the `sandbox.exec.completed` receipt. */
  seq: z.number().int().min(1),
  sandboxState: SandboxStateSchema,
};

export const ExecResultSchema = z.strictObject({
  ...execResultFields,
  /** UTF-8 (invalid bytes replaced), at most 1 MiB. */
  stdout: z.string(),
  stderr: z.string(),
});
export type ExecResult = z.infer<typeof ExecResultSchema>;

/** The lines of `Accept: application/x-ndjson`: output as it arrives, then one result or one error. */
export const ExecStreamOutputLineSchema = z.strictObject({
  type: z.literal('output'),
  stream: z.enum(['stdout', 'stderr']),
  /** The bytes, base64. */
  data: z.string(),
});
export const ExecStreamResultLineSchema = z.strictObject({ type: z.literal('result'), ...execResultFields });
export const ExecStreamErrorLineSchema = z.strictObject({ type: z.literal('error'), code: ErrorCodeSchema, message: z.string() });
export const ExecStreamLineSchema = z.discriminatedUnion('type', [ExecStreamOutputLineSchema, ExecStreamResultLineSchema, ExecStreamErrorLineSchema]);
export type ExecStreamLine = z.infer<typeof ExecStreamLineSchema>;

/** A file's mode as octal text (`0644`, `755`). */
export const FileModeSchema = z
  .string()
  .regex(/^0?[0-7]{3,4}$/, 'an octal mode such as 0644')
  .transform((text) => Number.parseInt(text, 8))
  .refine((mode) => mode <= 0o7777, 'a mode is at most 07777');

export const PutFileQuerySchema = z.strictObject({ path: SandboxFilePathSchema, mode: FileModeSchema.optional() });
export type PutFileQuery = z.infer<typeof PutFileQuerySchema>;
export const GetFileQuerySchema = z.strictObject({ path: SandboxReadPathSchema });
export type GetFileQuery = z.infer<typeof GetFileQuerySchema>;

/** The raw bytes of a file (PUT body, GET answer): described for the API document only. */
export const FileBytesSchema = z.string().meta({ format: 'binary' });

export const FileWrittenSchema = z.strictObject({
  path: z.string(),
  bytes: z.number().int().min(0),
  sha256: Sha256HexSchema,
  /** The seq of the `sandbox.file.written` receipt. */
  seq: z.number().int().min(1),
});
export type FileWrittenAnswer = z.infer<typeof FileWrittenSchema>;

/** At most this much per file written (PUT …/files): what the sessions backend carries. */
export const SANDBOX_FILE_LIMIT_BYTES = MAX_SANDBOX_FILE_BYTES;
