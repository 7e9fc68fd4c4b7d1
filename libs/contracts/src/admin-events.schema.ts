import { z } from 'zod';
import { ActorSchema, Sha256HexSchema, TimestampSchema } from './envelope.js';
import { eventBodySchema, textSchema, TokenSchema } from './event-fields.schema.js';

/* Admin actions are evidence too (PRODUCT.md "State that is not evidence"). Never a key's secret. */

export const AdminKeyCreatedSchema = eventBodySchema('admin.key_created', {
  key_id: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'a key id'),
  scopes: z.array(TokenSchema).min(1).max(64),
  expires_at: TimestampSchema.nullable(),
  created_by: ActorSchema,
});

export const AdminPolicyChangedSchema = eventBodySchema('admin.policy_changed', {
  policy_version: Sha256HexSchema,
  previous_version: Sha256HexSchema.nullable(),
  changed_by: ActorSchema,
  summary: textSchema(2048).optional(),
});
