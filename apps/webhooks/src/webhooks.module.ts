import { readSecretKeyFile } from '@cairn/secret-store';
import { JsonLogger, ServiceRuntimeModule } from '@cairn/service-kit';
import { WebhookStore } from '@cairn/webhooks';
import type { DynamicModule } from '@nestjs/common';
import { DeliveryDispatcher } from './delivery-dispatcher.js';
import { WebhookFanoutHandler } from './webhook-fanout.handler.js';
import { WebhookRouter } from './webhook-router.js';
import type { WebhooksConfig } from './webhooks.config.js';
import { WEBHOOK_KEYRING } from './webhooks.tokens.js';

export const WEBHOOKS_SERVICE = 'webhooks';

/**
 * The webhooks service: a reactor on the evidence stream, routed to the receipt types some
 * webhook wants (WebhookRouter), that queues deliveries, and a dispatcher that sends them. It
 * appends nothing to any chain.
 */
export function webhooksModule(config: WebhooksConfig): DynamicModule {
  new JsonLogger(WEBHOOKS_SERVICE).write('info', 'webhook signing secrets sealed under', { key_file: config.CAIRN_SECRETS_KEY_FILE });
  return ServiceRuntimeModule.forRoot({
    service: WEBHOOKS_SERVICE,
    config,
    providers: [
      WebhookFanoutHandler,
      WebhookRouter,
      { provide: WEBHOOK_KEYRING, useFactory: () => readSecretKeyFile(config.CAIRN_SECRETS_KEY_FILE) },
      { provide: WebhookStore, useFactory: () => WebhookStore.open({ url: config.CAIRN_DATABASE_URL, poolSize: 4, applicationName: 'cairn-webhooks' }) },
      DeliveryDispatcher,
    ],
  });
}
