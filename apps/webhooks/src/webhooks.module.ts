import { readSecretKeyFile } from '@cairn/secret-store';
import { CommandBus, commandBusOptionsFromConfig } from '@cairn/operational';
import { JsonLogger, NATS_CONNECTION, ServiceRuntimeModule } from '@cairn/service-kit';
import type { NatsConnection } from '@nats-io/transport-node';
import { WebhookStore } from '@cairn/webhooks';
import type { DynamicModule } from '@nestjs/common';
import { DeliveryDispatcher } from './delivery-dispatcher.js';
import { ReplayCommandService } from './replay-command.service.js';
import { WebhookCommandService } from './webhook-command.service.js';
import { WebhookFanoutHandler } from './webhook-fanout.handler.js';
import { WebhookRouter } from './webhook-router.js';
import type { WebhooksConfig } from './webhooks.config.js';
import { WEBHOOK_KEYRING } from './webhooks.tokens.js';

export const WEBHOOKS_SERVICE = 'webhooks';

/**
 * The webhooks service: a reactor on the evidence stream, routed to the receipt types some
 * webhook wants (WebhookRouter), that queues deliveries, a dispatcher that sends them, and the
 * servers of its commands: `webhook_replay` (ReplayCommandService), `webhook_register` and
 * `webhook_delete` (WebhookCommandService). It appends nothing to any chain.
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
      // Registrations, deletions and replays are asked for by command: this service owns its tables (docs/adr/0027).
      { provide: CommandBus, inject: [NATS_CONNECTION], useFactory: (nc: NatsConnection) => CommandBus.open(nc, commandBusOptionsFromConfig(config)) },
      ReplayCommandService,
      WebhookCommandService,
    ],
  });
}
