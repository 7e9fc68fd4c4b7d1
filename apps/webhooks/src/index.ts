export { DeliveryDispatcher } from './delivery-dispatcher.js';
export { webhookBody } from './event-payload.js';
export { deliveriesFor } from './webhook-fanout.js';
export type { HookFilter } from './webhook-fanout.js';
export { WebhookFanoutHandler } from './webhook-fanout.handler.js';
export { WebhooksConfigSchema } from './webhooks.config.js';
export type { WebhooksConfig } from './webhooks.config.js';
export { WEBHOOKS_SERVICE, webhooksModule } from './webhooks.module.js';
export { WEBHOOK_KEYRING } from './webhooks.tokens.js';
