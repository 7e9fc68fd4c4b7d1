import { SecretNameSchema, TimestampSchema } from '@cairn/contracts';
import { MAX_SECRET_BYTES, MIN_SECRET_BYTES } from '@cairn/secrets';
import { z } from 'zod';

/*
 * The secret store's REST shapes. Write-only: no response ever carries a value, only its last four
 * characters (and the id of the key that sealed it, for rotation).
 */

/** The request body of `PUT /v1/secrets/:name`: the value itself, as `text/plain` (UTF-8, no NUL). */
export const SecretValueSchema = z
  .string()
  .min(1)
  .describe(`The secret's value as the whole text/plain body: UTF-8 without NUL, ${MIN_SECRET_BYTES}..${MAX_SECRET_BYTES} bytes. Stored sealed; never returned.`);

export const SecretStoredSchema = z.strictObject({
  name: SecretNameSchema,
  /** False when an earlier value under this name was replaced. */
  created: z.boolean(),
  lastFour: z.string(),
  createdAt: TimestampSchema,
  updatedAt: TimestampSchema,
});
export type SecretStored = z.infer<typeof SecretStoredSchema>;

export const SecretSchema = z.strictObject({
  name: SecretNameSchema,
  /** null when the value cannot be opened with the key file in force (sealed under a key it lacks, or tampered). */
  lastFour: z.string().nullable(),
  /** Which key of the key file sealed it (16 hex characters). */
  keyId: z.string().regex(/^[0-9a-f]{16}$/),
  createdAt: TimestampSchema,
  updatedAt: TimestampSchema,
});
export type Secret = z.infer<typeof SecretSchema>;

export const SecretListSchema = z.strictObject({ items: z.array(SecretSchema) });
export type SecretList = z.infer<typeof SecretListSchema>;

export const SecretDeletedSchema = z.strictObject({ name: SecretNameSchema, deleted: z.literal(true) });
export type SecretDeleted = z.infer<typeof SecretDeletedSchema>;
