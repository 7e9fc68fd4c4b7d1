import { z } from 'zod';
import { ActorSchema, SandboxIdSchema, Sha256HexSchema, TenantIdSchema } from './envelope.js';
import { ErrorBodySchema } from './error-codes.js';
import { ExecIdSchema } from './event-fields.schema.js';
import { ArgvSchema, EnvSchema } from './run-spec.schema.js';

/*
 * Operations on a live sandbox (docs/adr/0006-sandbox-sessions.md). The caller publishes one op to
 * the JetStream work queue subject of the worker that holds the sandbox (`opSubject`); that
 * worker's runtime serves the ops of one sandbox one at a time, appends each op's receipts on the
 * sandbox's chain, and answers on the op's core-NATS `reply_to`: output or file chunks, then one
 * `end` naming the receipt. Bulk bytes travel on core NATS; the receipt carries their sha256, and
 * the receiver checks it. Snake_case like the other commands.
 */

/** Bytes per chunk on core NATS: well under the default 1 MiB max_payload, with room for headers. */
export const SANDBOX_CHUNK_BYTES = 512 * 1024;
/** A file written or read through a session: at most 16 MiB. */
export const MAX_SANDBOX_FILE_BYTES = 16 * 1024 * 1024;
/** stdin of one exec travels inside the op (base64), so it is bounded well below a command's size. */
export const MAX_EXEC_STDIN_BYTES = 512 * 1024;
/** Kept from each of stdout and stderr; the rest is counted (the REST contract's bound). */
export const MAX_KEPT_OUTPUT_BYTES = 1024 * 1024;

/** `<command prefix>.cmd.sbxop.<worker id>`: only that worker's runtime consumes it. */
export function opSubject(commandSubjectPrefix: string, workerId: string): string {
  return `${commandSubjectPrefix}.cmd.sbxop.${workerId}`;
}

const OpIdSchema = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'an op id is [A-Za-z0-9_-]');
/** A core-NATS subject of the caller's (an inbox). */
const ReplySubjectSchema = z.string().regex(/^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)+$/, 'a NATS subject without wildcards');

export const ExecOpSchema = z.strictObject({
  kind: z.literal('exec'),
  exec_id: ExecIdSchema,
  argv: ArgvSchema,
  /** Values are the caller's; the receipt keeps names only (I-7). */
  env: EnvSchema.optional(),
  workdir: z.string().min(1).max(4096).optional(),
  stdin_b64: z.string().max(Math.ceil(MAX_EXEC_STDIN_BYTES / 3) * 4).optional(),
  timeout_seconds: z.number().int().positive().max(86_400).optional(),
});

export const WriteOpSchema = z.strictObject({
  kind: z.literal('write'),
  path: z.string().min(1).max(4096),
  bytes: z.number().int().min(0).max(MAX_SANDBOX_FILE_BYTES),
  sha256: Sha256HexSchema,
  mode: z.number().int().min(0).max(0o7777).optional(),
  /** The runtime asks the caller for chunk i (request `{ index }`) on this subject, one at a time. */
  data_subject: ReplySubjectSchema,
  chunks: z.number().int().min(0).max(Math.ceil(MAX_SANDBOX_FILE_BYTES / SANDBOX_CHUNK_BYTES)),
});

export const ReadOpSchema = z.strictObject({
  kind: z.literal('read'),
  path: z.string().min(1).max(4096),
});

export const DestroyOpSchema = z.strictObject({
  kind: z.literal('destroy'),
  requested_by: ActorSchema,
});

export const SandboxOpSchema = z.strictObject({
  op_id: OpIdSchema,
  sandbox_id: SandboxIdSchema,
  tenant: TenantIdSchema,
  reply_to: ReplySubjectSchema,
  op: z.discriminatedUnion('kind', [ExecOpSchema, WriteOpSchema, ReadOpSchema, DestroyOpSchema]),
});
export type SandboxOp = z.infer<typeof SandboxOpSchema>;
export type ExecOp = z.infer<typeof ExecOpSchema>;
export type WriteOp = z.infer<typeof WriteOpSchema>;
export type ReadOp = z.infer<typeof ReadOpSchema>;
export type DestroyOp = z.infer<typeof DestroyOpSchema>;

/** Header of every message on an op's `reply_to`: what it is. */
export const OP_MESSAGE_HEADER = 'Cairn-Op';
/** On `out` messages: `stdout` or `stderr`. */
export const OP_STREAM_HEADER = 'Cairn-Stream';
export type OpMessageKind = 'out' | 'data' | 'end';

/** The last message on an op's `reply_to`: the receipt that records it, or why there is none. */
export const OpEndSchema = z.discriminatedUnion('ok', [
  z.strictObject({
    ok: z.literal(true),
    /** The op's receipt (sandbox.exec.completed, sandbox.file.written/read, sandbox.destroyed): chain seq and stream seq. */
    seq: z.number().int().min(1),
    stream_seq: z.number().int().min(1),
    /** Chunks sent before this message, per kind, so a lost core message is noticed. */
    chunks: z.strictObject({ stdout: z.number().int().min(0), stderr: z.number().int().min(0), data: z.number().int().min(0) }),
    sandbox_destroyed: z.boolean(),
  }),
  z.strictObject({ ok: z.literal(false), error: ErrorBodySchema }),
]);
export type OpEnd = z.infer<typeof OpEndSchema>;

/** The runtime's request for one chunk of a file being written. */
export const ChunkRequestSchema = z.strictObject({ index: z.number().int().min(0) });
