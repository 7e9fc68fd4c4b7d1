export { addressAllowed, classifyAddress, PRIVATE_CLASSES } from './address-policy.js';
export type { AddressClass } from './address-policy.js';
export { afterFailure, DEFAULT_RETRY_POLICY } from './delivery-backoff.js';
export type { RetryPolicy } from './delivery-backoff.js';
export { filterMatches, parseEventFilter } from './event-filter.js';
export { checkWebhookUrl, parseWebhookUrl, systemResolver } from './url-guard.js';
export type { CheckedUrl, HostResolver, ResolvedAddress } from './url-guard.js';
export { sendWebhook } from './webhook-sender.js';
export type { SendOutcome } from './webhook-sender.js';
export {
  DELIVERY_ATTEMPT_HEADER,
  DELIVERY_ID_HEADER,
  EVENT_ID_HEADER,
  EVENT_TYPE_HEADER,
  newWebhookSecret,
  SIGNATURE_HEADER,
  signatureHeader,
  verifySignatureHeader,
  WEBHOOK_SECRET_PREFIX,
} from './webhook-signature.js';
export type { SignatureCheck } from './webhook-signature.js';
export { checkSealedWebhookSecret, newWebhookId, openWebhookSecret, sealWebhookSecret, WebhookStore } from './webhook-store.adapter.js';
export type { ClaimedDelivery, Delivery, DeliveryAttempt, DeliveryStatus, NewDelivery, RegisterWebhook, Webhook, WebhookStoreOptions } from './webhook-store.adapter.js';
export { WebhookGuardConfigSchema } from './webhooks.config.js';
export type { WebhookGuardConfig } from './webhooks.config.js';
