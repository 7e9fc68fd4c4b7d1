import { z } from 'zod';
import { ActorSchema, TimestampSchema } from '../envelope.js';
import { SecretGranteeSchema } from '../principal.schema.js';
import { SecretNameSchema } from '../run-spec.schema.js';

/*
 * The secret store's REST shapes. Write-only: no response ever carries a value, only its last four
 * characters (and the id of the key that sealed it, for rotation).
 */

/** Shorter values cannot be told apart from ordinary output, so the scanner could not find them. */
export const MIN_SECRET_BYTES = 8;
/** Room for tokens, passwords and PEM keys; 32 of them still fit the sandbox's /run/secrets tmpfs. */
export const MAX_SECRET_BYTES = 32 * 1024;

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

/** At most this many grantees in one request. */
export const MAX_GRANTS_PER_REQUEST = 32;

export const SecretGrantSchema = z.strictObject({
  grantee: SecretGranteeSchema.describe('key:<key id> (one key of the tenant) or scope:<scope> (every key of the tenant holding it).'),
  grantedBy: ActorSchema,
  grantedAt: TimestampSchema,
});
export type SecretGrant = z.infer<typeof SecretGrantSchema>;

export const SecretSchema = z.strictObject({
  name: SecretNameSchema,
  /** null when the value cannot be opened with the key file in force (sealed under a key it lacks, or tampered). */
  lastFour: z.string().nullable(),
  /** Which key of the key file sealed it (16 hex characters). */
  keyId: z.string().regex(/^[0-9a-f]{16}$/),
  /** The key that last set it (`key:<key id>`); null for a value set before secrets were governed. */
  setBy: ActorSchema.nullable(),
  /** Who may use it besides the tenant's admin keys (using it also needs the secrets:use scope). */
  grants: z.array(SecretGrantSchema),
  createdAt: TimestampSchema,
  updatedAt: TimestampSchema,
});
export type Secret = z.infer<typeof SecretSchema>;

export const SecretListSchema = z.strictObject({ items: z.array(SecretSchema) });
export type SecretList = z.infer<typeof SecretListSchema>;

export const SecretDeletedSchema = z.strictObject({ name: SecretNameSchema, deleted: z.literal(true) });
export type SecretDeleted = z.infer<typeof SecretDeletedSchema>;

/** `PUT /v1/secrets/:name?grant=…`: more grantees for the value being set (the setting key is granted anyway). */
export const PutSecretQuerySchema = z.strictObject({
  grant: z
    .union([SecretGranteeSchema, z.array(SecretGranteeSchema).max(MAX_GRANTS_PER_REQUEST)])
    .optional()
    .describe('Grant the secret to this key (key:<key id>) or scope (scope:<scope>) too; repeat for several.'),
});
export type PutSecretQuery = z.infer<typeof PutSecretQuerySchema>;

/** `POST /v1/secrets/:name/grants`. */
export const SecretGrantRequestSchema = z.strictObject({
  grantees: z.array(SecretGranteeSchema).min(1).max(MAX_GRANTS_PER_REQUEST),
});
export type SecretGrantRequest = z.infer<typeof SecretGrantRequestSchema>;

/** A secret's grants as they stand after a grant or a revoke. */
export const SecretGrantsSchema = z.strictObject({ name: SecretNameSchema, grants: z.array(SecretGrantSchema) });
export type SecretGrants = z.infer<typeof SecretGrantsSchema>;
