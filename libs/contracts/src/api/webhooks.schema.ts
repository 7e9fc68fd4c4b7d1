import { z } from 'zod';
import { TimestampSchema } from '../envelope.js';
import { storableText } from '../text-rules.js';

/* The webhook routes' shapes (camelCase). A signing secret appears in one response only: the registration's. */

export const WEBHOOK_ID_PATTERN = /^wh_[0-9a-f]{24}$/;
export const DELIVERY_ID_PATTERN = /^dlv_[0-9a-f]{24}$/;
/** A webhook's URL is at most this long. */
export const MAX_WEBHOOK_URL_LENGTH = 2048;
/** A webhook's event filter has at most this many patterns. */
export const MAX_FILTER_PATTERNS = 32;

export const WebhookIdSchema = z.string().regex(WEBHOOK_ID_PATTERN, 'a webhook id (wh_ and 24 hex characters)');
export const DeliveryIdSchema = z.string().regex(DELIVERY_ID_PATTERN, 'a delivery id (dlv_ and 24 hex characters)');

export const WebhookCreateSchema = z.strictObject({
  /** http(s) only; its host must resolve to public addresses (unless the operator allows private ones). */
  url: z.string().min(1).max(MAX_WEBHOOK_URL_LENGTH).check(storableText('a URL')),
  /** Event types (`run.sealed`), prefixes (`run.*`, `alert.*`) or `*`. */
  events: z.array(z.string().min(1).max(100)).min(1).max(MAX_FILTER_PATTERNS),
  description: z.string().min(1).max(200).check(storableText('a description')).optional(),
});
export type WebhookCreate = z.infer<typeof WebhookCreateSchema>;

export const WebhookSchema = z.strictObject({
  id: WebhookIdSchema,
  url: z.string(),
  events: z.array(z.string()),
  description: z.string().nullable(),
  createdAt: TimestampSchema,
});
export type WebhookView = z.infer<typeof WebhookSchema>;

export const WebhookCreatedSchema = WebhookSchema.extend({
  /** The signing secret (`whsec_…`), shown this once: HMAC-SHA256 key of the Cairn-Signature header. */
  secret: z.string().startsWith('whsec_'),
});
export type WebhookCreated = z.infer<typeof WebhookCreatedSchema>;

export const WebhookListSchema = z.strictObject({ items: z.array(WebhookSchema) });
export type WebhookList = z.infer<typeof WebhookListSchema>;

export const WebhookDeletedSchema = z.strictObject({ id: WebhookIdSchema, deleted: z.literal(true) });
export type WebhookDeleted = z.infer<typeof WebhookDeletedSchema>;

export const DeliveryStatusSchema = z.enum(['pending', 'delivered', 'dead']);

export const DeliverySchema = z.strictObject({
  id: DeliveryIdSchema,
  webhookId: WebhookIdSchema,
  /** `<chain>:<seq>`: the same for every attempt and replay of one event. */
  eventId: z.string(),
  eventType: z.string(),
  status: DeliveryStatusSchema,
  attempts: z.number().int().min(0),
  /** When the next attempt is due; null unless pending. */
  nextAttemptAt: TimestampSchema.nullable(),
  lastStatus: z.number().int().nullable(),
  lastError: z.string().nullable(),
  /** The delivery this one replays, if it is a replay. */
  replayOf: DeliveryIdSchema.nullable(),
  createdAt: TimestampSchema,
  deliveredAt: TimestampSchema.nullable(),
  attemptLog: z.array(
    z.strictObject({
      attempt: z.number().int().min(1),
      at: TimestampSchema,
      durationMs: z.number().int().min(0),
      statusCode: z.number().int().nullable(),
      error: z.string().nullable(),
    }),
  ),
});
export type DeliveryView = z.infer<typeof DeliverySchema>;

export const DeliveryListSchema = z.strictObject({ items: z.array(DeliverySchema) });
export type DeliveryList = z.infer<typeof DeliveryListSchema>;

export const ListDeliveriesQuerySchema = z.strictObject({
  limit: z.coerce.number().int().min(1).max(500).optional(),
  status: DeliveryStatusSchema.optional(),
});
export type ListDeliveriesQuery = z.infer<typeof ListDeliveriesQuerySchema>;
