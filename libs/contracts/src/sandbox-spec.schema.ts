import { z } from 'zod';
import { CairnError } from './error-codes.js';
import { CapsSpecSchema, EnvSchema, ImageRefSchema, InputFileSchema, inputIssues, NetworkSpecSchema, SecretNameSchema } from './run-spec.schema.js';

/** The longest a sandbox create may wait in the queue for room (`waitSeconds`). */
export const MAX_SANDBOX_WAIT_SECONDS = 300;

/** An interactive sandbox session (camelCase, like the REST API); policy judges the values later. */
export const SandboxSpecSchema = z.strictObject({
  image: ImageRefSchema.optional(),
  caps: CapsSpecSchema.optional(),
  network: NetworkSpecSchema.optional(),
  secrets: z.array(SecretNameSchema).max(32).optional(),
  env: EnvSchema.optional(),
  files: z.array(InputFileSchema).max(256).optional(),
  /** Absent: the operator's default TTL. */
  ttlSeconds: z.number().int().positive().max(86_400).optional(),
  /** Reaped after this long without an operation; absent: the operator's default idle limit. */
  idleSeconds: z.number().int().positive().max(86_400).optional(),
  /**
   * How long the create may wait in the placement queue for a worker with room; absent or 0: a
   * create that finds no room is refused at once (`E_CAPACITY`).
   */
  waitSeconds: z.number().int().min(0).max(MAX_SANDBOX_WAIT_SECONDS).optional(),
});
export type SandboxSpec = z.infer<typeof SandboxSpecSchema>;

export function parseSandboxSpec(input: unknown): SandboxSpec {
  const result = SandboxSpecSchema.safeParse(input);
  if (result.success) return result.data;
  const issues = inputIssues(result.error);
  throw new CairnError('E_INPUT', `invalid SandboxSpec: ${issues.map((i) => `${i.path}: ${i.message}`).join('; ')}`, { issues });
}
