import { API_ROUTES, CairnError, DeliveryIdSchema, ListDeliveriesQuerySchema, WebhookCreateSchema, WebhookIdSchema } from '@cairn/contracts';
import type { DeliveryList, DeliveryView, ListDeliveriesQuery, WebhookCreate, WebhookCreated, WebhookDeleted, WebhookList, WebhookView } from '@cairn/contracts';
import { CommandBus } from '@cairn/operational';
import { JsonLogger } from '@cairn/service-kit';
import { checkWebhookUrl, newWebhookId, parseEventFilter, sealWebhookSecret } from '@cairn/webhooks';
import type { Delivery, Webhook } from '@cairn/webhooks';
import { Body, Controller, Inject, Param, Query } from '@nestjs/common';
import { randomBytes } from 'node:crypto';
import type { Principal } from '../auth/api-key.store.js';
import { CurrentPrincipal } from '../auth/current-principal.decorator.js';
import type { GatewayConfig } from '../gateway.config.js';
import { GATEWAY_CONFIG } from '../gateway.tokens.js';
import { ApiRoute } from '../http/api-route.decorator.js';
import { GatewayWebhooks } from './gateway-webhooks.js';

const WEBHOOK_ID = { schema: WebhookIdSchema };
const DELIVERY_ID = { schema: DeliveryIdSchema };

function webhookView(webhook: Webhook): WebhookView {
  return { id: webhook.id, url: webhook.url, events: webhook.events, description: webhook.description, createdAt: webhook.createdAt.toISOString() };
}

function deliveryView(delivery: Delivery): DeliveryView {
  return {
    id: delivery.id,
    webhookId: delivery.webhookId,
    eventId: delivery.eventId,
    eventType: delivery.eventType,
    status: delivery.status,
    attempts: delivery.attempts,
    nextAttemptAt: delivery.nextAttemptAt?.toISOString() ?? null,
    lastStatus: delivery.lastStatus,
    lastError: delivery.lastError,
    replayOf: delivery.replayOf,
    createdAt: delivery.createdAt.toISOString(),
    deliveredAt: delivery.deliveredAt?.toISOString() ?? null,
    attemptLog: delivery.attemptLog.map((a) => ({ attempt: a.attempt, at: a.at.toISOString(), durationMs: a.durationMs, statusCode: a.statusCode, error: a.error })),
  };
}

/**
 * `/v1/webhooks…`: a tenant's webhooks and their delivery log. Another tenant's webhook is 404.
 * Registration refuses (E_INPUT, before any connection) a URL whose host resolves to a loopback,
 * private, link-local or metadata address; the webhooks service checks again at each attempt.
 * Registration, deletion and replay are commands the webhooks service serves (docs/adr/0027): the
 * gateway only reads its tables.
 */
@Controller()
export class WebhooksController {
  constructor(
    private readonly webhooks: GatewayWebhooks,
    private readonly logger: JsonLogger,
    private readonly bus: CommandBus,
    @Inject(GATEWAY_CONFIG) private readonly config: GatewayConfig,
  ) {}

  @ApiRoute(API_ROUTES.createWebhook)
  async create(@CurrentPrincipal() principal: Principal, @Body({ schema: WebhookCreateSchema }) body: WebhookCreate): Promise<WebhookCreated> {
    const events = parseEventFilter(body.events);
    const checked = await checkWebhookUrl(body.url, { allowPrivate: this.webhooks.allowPrivate });
    const keyring = this.webhooks.keyring;
    if (keyring === null) {
      throw new CairnError('E_UNAVAILABLE', 'this gateway has no key file to seal signing secrets: start it with CAIRN_SECRETS_KEY_FILE (cairn up creates one)');
    }
    // Asked of the webhooks service, which owns its tables (docs/adr/0027): the gateway writes none
    // of them. The id is chosen here, so a command delivered twice registers once; the secret is made
    // and sealed here, shown to the caller once, and goes on NATS only sealed. The command expires
    // when this call stops waiting: a registration taken later is refused, not made.
    const id = newWebhookId();
    const { secret, sealed, keyId } = sealWebhookSecret(keyring, principal.tenant, id);
    const timeoutMs = this.config.CAIRN_GATEWAY_COMMAND_TIMEOUT_MS;
    const reply = await this.bus.send(
      'webhook_register',
      {
        tenant: principal.tenant,
        requested_by: `key:${principal.keyId}`,
        webhook_id: id,
        url: checked.url.toString(),
        events,
        description: body.description ?? null,
        secret_sealed: Buffer.from(sealed).toString('base64'),
        key_id: keyId,
        expires_at: new Date(Date.now() + timeoutMs).toISOString(),
      },
      { msgId: `webhook-register:${id}`, timeoutMs },
    );
    if (!reply.ok) throw new CairnError(reply.error.code, reply.error.message, reply.error.details);
    const webhook = await this.webhooks.store.get(principal.tenant, id);
    if (webhook === null) throw new CairnError('E_INTERNAL', `the webhooks service registered ${id}, which cannot be read`, { id });
    this.logger.write('info', 'webhook registered', { tenant: principal.tenant, webhook: webhook.id, host: checked.url.host, events, key_id: principal.keyId });
    return { ...webhookView(webhook), secret };
  }

  @ApiRoute(API_ROUTES.listWebhooks)
  async list(@CurrentPrincipal() principal: Principal): Promise<WebhookList> {
    return { items: (await this.webhooks.store.list(principal.tenant)).map(webhookView) };
  }

  @ApiRoute(API_ROUTES.deleteWebhook)
  async delete(@CurrentPrincipal() principal: Principal, @Param('id', WEBHOOK_ID) id: string): Promise<WebhookDeleted> {
    // Looked up first (a read): an unknown one is E_NOT_FOUND whether or not the webhooks service is
    // up, and no command is sent. The deletion itself is the webhooks service's (docs/adr/0027).
    if ((await this.webhooks.store.get(principal.tenant, id)) === null) throw new CairnError('E_NOT_FOUND', `no webhook ${id}`, { id });
    const timeoutMs = this.config.CAIRN_GATEWAY_COMMAND_TIMEOUT_MS;
    const reply = await this.bus.send(
      'webhook_delete',
      { tenant: principal.tenant, requested_by: `key:${principal.keyId}`, webhook_id: id, expires_at: new Date(Date.now() + timeoutMs).toISOString() },
      { msgId: `webhook-delete:${id}`, timeoutMs },
    );
    if (!reply.ok) throw new CairnError(reply.error.code, reply.error.message, reply.error.details);
    this.logger.write('info', 'webhook deleted', { tenant: principal.tenant, webhook: id, key_id: principal.keyId });
    return { id, deleted: true };
  }

  @ApiRoute(API_ROUTES.listWebhookDeliveries)
  async deliveries(
    @CurrentPrincipal() principal: Principal,
    @Param('id', WEBHOOK_ID) id: string,
    @Query({ schema: ListDeliveriesQuerySchema }) query: ListDeliveriesQuery,
  ): Promise<DeliveryList> {
    const found = await this.webhooks.store.deliveries(principal.tenant, id, { limit: query.limit ?? 100, ...(query.status === undefined ? {} : { status: query.status }) });
    if (found === null) throw new CairnError('E_NOT_FOUND', `no webhook ${id}`, { id });
    return { items: found.map(deliveryView) };
  }

  @ApiRoute(API_ROUTES.replayWebhookDelivery)
  async replay(
    @CurrentPrincipal() principal: Principal,
    @Param('id', WEBHOOK_ID) id: string,
    @Param('deliveryId', DELIVERY_ID) deliveryId: string,
  ): Promise<DeliveryView> {
    // Asked of the webhooks service, which owns its queue (docs/adr/0027): the gateway writes none of
    // its tables. The replay's id is chosen here, so a command delivered twice queues one replay, and
    // the command expires when this call stops waiting: a replay taken later is refused, not made.
    // Looked up first (a read): an unknown one is E_NOT_FOUND whether or not the webhooks service is up.
    if ((await this.webhooks.store.delivery(principal.tenant, id, deliveryId)) === null) {
      throw new CairnError('E_NOT_FOUND', `no delivery ${deliveryId} of webhook ${id}`, { id, deliveryId });
    }
    const replayId = `dlv_${randomBytes(12).toString('hex')}`;
    const timeoutMs = this.config.CAIRN_GATEWAY_COMMAND_TIMEOUT_MS;
    const reply = await this.bus.send(
      'webhook_replay',
      {
        tenant: principal.tenant,
        requested_by: `key:${principal.keyId}`,
        webhook_id: id,
        delivery_id: deliveryId,
        replay_id: replayId,
        expires_at: new Date(Date.now() + timeoutMs).toISOString(),
      },
      { msgId: `webhook-replay:${replayId}`, timeoutMs },
    );
    if (!reply.ok) throw new CairnError(reply.error.code, reply.error.message, reply.error.details);
    const replayed = await this.webhooks.store.delivery(principal.tenant, id, replayId);
    if (replayed === null) throw new CairnError('E_INTERNAL', `the webhooks service replayed ${deliveryId} as ${replayId}, which cannot be read`, { id, deliveryId });
    this.logger.write('info', 'webhook delivery replayed', { tenant: principal.tenant, webhook: id, delivery: deliveryId, replay: replayed.id, key_id: principal.keyId });
    return deliveryView(replayed);
  }
}
