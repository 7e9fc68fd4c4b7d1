import { z } from 'zod';
import { ApiKeyScopeSchema } from './api-key-scope.schema.js';
import { ActorSchema, AdminChainIdSchema, Sha256HexSchema, TimestampSchema } from './envelope.js';
import { eventBodySchema, textSchema } from './event-fields.schema.js';

/*
 * Admin actions are evidence too (PRODUCT.md "State that is not evidence"), on the tenant's admin
 * chain `adm_<tenant>` (docs/adr/0011). Never a key's secret, nor its hash: a key is named by its
 * id and its public prefix.
 */

/** An API key's id (`key:<id>` as an actor). */
export const ApiKeyIdSchema = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'a key id');
/** The public part of a key, `cairn_<prefix>_…`: how a listing or a log line names it without its secret. */
export const ApiKeyPrefixSchema = z.string().regex(/^[a-z2-7]{8}$/, 'a key prefix (8 characters of [a-z2-7])');

/** The fields of every admin receipt: it sits on the admin chain of its `tenant`. */
const ADMIN_CHAIN = { run_id: AdminChainIdSchema };

/** The first receipt of a tenant's admin chain: the tenant exists from here on. */
export const AdminTenantCreatedSchema = eventBodySchema('admin.tenant_created', {
  ...ADMIN_CHAIN,
  created_by: ActorSchema,
});

export const AdminKeyCreatedSchema = eventBodySchema('admin.key_created', {
  ...ADMIN_CHAIN,
  key_id: ApiKeyIdSchema,
  prefix: ApiKeyPrefixSchema,
  scopes: z.array(ApiKeyScopeSchema).min(1).max(16),
  expires_at: TimestampSchema.nullable(),
  /** `key:<id>` of the admin who asked, or `gateway` for the operator's bootstrap key (CAIRN_API_KEY). */
  created_by: ActorSchema,
});

/** A new secret for the same key (same id, prefix, scopes, expiry); the previous one works until `grace_until` (null: not at all). */
export const AdminKeyRotatedSchema = eventBodySchema('admin.key_rotated', {
  ...ADMIN_CHAIN,
  key_id: ApiKeyIdSchema,
  /** 1 for the key's first rotation, and so on: a retried rotation is the same receipt. */
  rotation: z.number().int().min(1),
  grace_until: TimestampSchema.nullable(),
  rotated_by: ActorSchema,
});

/** The key is refused from the next request on. */
export const AdminKeyRevokedSchema = eventBodySchema('admin.key_revoked', {
  ...ADMIN_CHAIN,
  key_id: ApiKeyIdSchema,
  revoked_by: ActorSchema,
  reason: textSchema(1024).optional(),
});

export const AdminPolicyChangedSchema = eventBodySchema('admin.policy_changed', {
  ...ADMIN_CHAIN,
  policy_version: Sha256HexSchema,
  previous_version: Sha256HexSchema.nullable(),
  changed_by: ActorSchema,
  summary: textSchema(2048).optional(),
});
