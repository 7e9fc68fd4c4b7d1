import { ApiKeyIdSchema, ApiKeyPrefixSchema, ApiKeyScopeSchema, TenantIdSchema, TimestampSchema } from '@cairn/contracts';
import { z } from 'zod';

/* The key and tenant routes' shapes (camelCase). A key's secret appears in two responses only: its creation's and its rotation's. */

/** Keys live at most this long (a longer-lived credential is a revocation nobody remembers to do). */
export const MAX_KEY_LIFETIME_DAYS = 3650;
/** How long the secret a rotation replaces may keep working, at most. */
export const MAX_ROTATION_GRACE_SECONDS = 3600;

const ScopesSchema = z
  .array(ApiKeyScopeSchema)
  .min(1)
  .max(16)
  .refine((scopes) => new Set(scopes).size === scopes.length, 'each scope once');

export const KeyCreateSchema = z.strictObject({
  scopes: ScopesSchema,
  /** When the key stops working (RFC 3339 UTC with milliseconds, in the future); absent: never (it can still be revoked). */
  expiresAt: TimestampSchema.optional(),
  /** Another tenant's key: the operator only (an admin key of tenant `default`). Absent: the caller's tenant. */
  tenant: TenantIdSchema.optional(),
});
export type KeyCreate = z.infer<typeof KeyCreateSchema>;

export const KeyStatusSchema = z.enum(['active', 'expired', 'revoked', 'pending']);
export type KeyStatus = z.infer<typeof KeyStatusSchema>;

export const KeySchema = z.strictObject({
  id: ApiKeyIdSchema,
  tenant: TenantIdSchema,
  /** The public part, `cairn_<prefix>_…`; kept across rotations. */
  prefix: ApiKeyPrefixSchema,
  /** The last four characters of the current secret (null for keys made before they were kept). */
  lastFour: z.string().length(4).nullable(),
  scopes: z.array(ApiKeyScopeSchema),
  /** `pending`: its creation is not on the admin chain (an answer that never arrived); it is refused like an unknown key. */
  status: KeyStatusSchema,
  createdAt: TimestampSchema,
  /** `key:<id>` of the admin who created it, `gateway` for the bootstrap key; null for keys made before it was kept. */
  createdBy: z.string().nullable(),
  expiresAt: TimestampSchema.nullable(),
  revokedAt: TimestampSchema.nullable(),
  rotations: z.number().int().min(0),
  rotatedAt: TimestampSchema.nullable(),
  /** While a rotation's grace lasts, the replaced secret works until then. */
  previousValidUntil: TimestampSchema.nullable(),
});
export type KeyView = z.infer<typeof KeySchema>;

export const KeyCreatedSchema = KeySchema.extend({
  /** The whole key, `cairn_<prefix>_<secret>`: shown in this response only, never stored, never logged. */
  key: z.string().startsWith('cairn_'),
});
export type KeyCreated = z.infer<typeof KeyCreatedSchema>;

export const KeyListSchema = z.strictObject({ items: z.array(KeySchema) });
export type KeyList = z.infer<typeof KeyListSchema>;

export const ListKeysQuerySchema = z.strictObject({
  /** Another tenant's keys: the operator only. */
  tenant: TenantIdSchema.optional(),
});
export type ListKeysQuery = z.infer<typeof ListKeysQuerySchema>;

export const KeyRotateSchema = z.strictObject({
  /** How long the replaced secret keeps working (0, the default: it stops at once). */
  graceSeconds: z.number().int().min(0).max(MAX_ROTATION_GRACE_SECONDS).optional(),
});
export type KeyRotate = z.infer<typeof KeyRotateSchema>;

export const KeyRevokeSchema = z.strictObject({
  reason: z
    .string()
    .min(1)
    .max(1024)
    .refine((text) => !text.includes('\u0000'), 'no NUL')
    .optional(),
});
export type KeyRevoke = z.infer<typeof KeyRevokeSchema>;

export const TenantCreateSchema = z.strictObject({ id: TenantIdSchema });
export type TenantCreate = z.infer<typeof TenantCreateSchema>;

export const TenantSchema = z.strictObject({
  id: TenantIdSchema,
  /** Its admin chain, `adm_<id>`: `cairn verify` and `cairn events` read it. */
  chainId: z.string(),
  createdAt: TimestampSchema,
  createdBy: z.string().nullable(),
  /** False while `admin.tenant_created` is not yet on its admin chain (tenants that predate it are recorded at their first admin act). */
  recorded: z.boolean(),
});
export type TenantView = z.infer<typeof TenantSchema>;

export const TenantListSchema = z.strictObject({ items: z.array(TenantSchema) });
export type TenantList = z.infer<typeof TenantListSchema>;
