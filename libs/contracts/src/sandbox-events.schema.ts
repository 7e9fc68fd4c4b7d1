import { z } from 'zod';
import { ActorSchema, Sha256HexSchema, TimestampSchema } from './envelope.js';
import { ErrorCodeSchema } from './error-codes.js';
import { ByteCountSchema, eventBodySchema, ExecIdSchema, PROCESS_RESULT_FIELDS, SandboxPathSchema } from './event-fields.schema.js';
import { SubmitterPrincipalSchema } from './principal.schema.js';
import { ArgvSchema } from './run-spec.schema.js';
import { SandboxSpecSchema } from './sandbox-spec.schema.js';

/*
 * Receipts of an interactive sandbox session, on the sandbox's own chain (`sbx_…`). A session also
 * meets policy.decided, run.scheduled, sandbox.created and sandbox.destroyed, shared with runs.
 */

export const SandboxRequestedSchema = eventBodySchema('sandbox.requested', {
  spec: SandboxSpecSchema,
  spec_sha256: Sha256HexSchema,
  requested_by: ActorSchema,
  idempotency_key_sha256: Sha256HexSchema.optional(),
  /** The requesting key's id and scopes, as on `run.submitted`; absent on earlier receipts (no secret may be mounted). */
  principal: SubmitterPrincipalSchema.optional(),
  expires_at: TimestampSchema,
  /** Reaped after this many seconds without an operation. Optional only so earlier receipts still read. */
  idle_seconds: z.number().int().positive().max(86_400).optional(),
});

export const SandboxExecStartedSchema = eventBodySchema('sandbox.exec.started', {
  exec_id: ExecIdSchema,
  argv: ArgvSchema,
  workdir: SandboxPathSchema,
  /** Names only: values may be secrets (I-7). */
  env_names: z.array(z.string().regex(/^[A-Z_][A-Z0-9_]{0,127}$/)).max(256),
});

export const SandboxExecCompletedSchema = eventBodySchema('sandbox.exec.completed', {
  exec_id: ExecIdSchema,
  argv: ArgvSchema,
  ...PROCESS_RESULT_FIELDS,
  error_code: ErrorCodeSchema.optional(),
});

export const SandboxFileWrittenSchema = eventBodySchema('sandbox.file.written', {
  path: SandboxPathSchema,
  sha256: Sha256HexSchema,
  bytes: ByteCountSchema,
  mode: z.number().int().min(0).max(0o7777).optional(),
});

export const SandboxFileReadSchema = eventBodySchema('sandbox.file.read', {
  path: SandboxPathSchema,
  sha256: Sha256HexSchema,
  bytes: ByteCountSchema,
});

export const SandboxExpiredSchema = eventBodySchema('sandbox.expired', {
  ttl_seconds: z.number().int().positive(),
  expires_at: TimestampSchema,
  /** `ttl`: its time to live ran out; `idle`: no operation for `idle_seconds`. Absent: `ttl` (earlier receipts). */
  cause: z.enum(['ttl', 'idle']).optional(),
  idle_seconds: z.number().int().positive().max(86_400).optional(),
  /** The last operation's receipt time (or sandbox.created's), for an idle reap. */
  last_activity_at: TimestampSchema.optional(),
});
