import { z } from 'zod';
import { ErrorCodeSchema } from './error-codes.js';
import { eventBodySchema, SandboxPathSchema, StepIndexSchema, textSchema, TokenSchema } from './event-fields.schema.js';
import { SecretNameSchema } from './run-spec.schema.js';

/* Security receipts, on the chain of the run or sandbox they concern. */

export const EgressDeniedSchema = eventBodySchema('egress.denied', {
  host: z.string().min(1).max(253).regex(/^[A-Za-z0-9.:[\]_-]+$/, 'a host name or address'),
  port: z.number().int().min(0).max(65_535),
  reason: z.enum(['not_allowlisted', 'private_address', 'resolution_failed']),
  error_code: z.literal('E_EGRESS'),
  step_index: StepIndexSchema.optional(),
});

/** Redaction happens before hashing; this says where and which pattern, never the value (I-7). */
export const SecretRedactedSchema = eventBodySchema('secret.redacted', {
  /**
   * `stdout`, `stderr`, `file` (a collected or read file's bytes), `spec`; `receipt`: a field of a
   * receipt about to be appended (a file name, an egress host, a test name, an error message);
   * `reply`: what a sandbox operation was about to answer (an error's text); `log`: a log line's field.
   */
  where: z.enum(['stdout', 'stderr', 'file', 'spec', 'receipt', 'reply', 'log']),
  step_index: StepIndexSchema.optional(),
  path: SandboxPathSchema.optional(),
  /** For `receipt`: the type of the receipt that carried it (it was appended redacted). */
  receipt_type: TokenSchema.optional(),
  /** For `receipt`, `reply` and `log`: the top-level field it was found under. */
  field: TokenSchema.optional(),
  /** Found in an object key (a file name as a key of `artifact_hashes`) rather than a value. */
  in_key: z.boolean().optional(),
  /** `secret.<encoding>` (plain, base64, hex, …) for one of the run's secrets, else a key pattern's id. */
  pattern: TokenSchema,
  /** The secret's name when one of the run's own secrets was seen; absent for a key pattern. */
  secret: SecretNameSchema.optional(),
  count: z.number().int().min(1),
});

/** Critical alerts (E_SECRET_SEEN, E_CHAIN_BROKEN) are evidence as well as log lines and webhooks. */
export const AlertRaisedSchema = eventBodySchema('alert.raised', {
  severity: z.enum(['critical', 'warning']),
  error_code: ErrorCodeSchema,
  message: textSchema(2048),
});
