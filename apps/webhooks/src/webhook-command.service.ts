import { commandDurableOf } from '@cairn/config';
import type { DeleteWebhookCommand, RegisterWebhookCommand } from '@cairn/contracts';
import { CommandBus } from '@cairn/operational';
import type { CommandServer } from '@cairn/operational';
import type { SecretKeyring } from '@cairn/secrets';
import { JsonLogger, SERVICE_LOGGER } from '@cairn/service-kit';
import { checkSealedWebhookSecret, parseWebhookUrl, WebhookStore } from '@cairn/webhooks';
import { Inject, Injectable } from '@nestjs/common';
import type { OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import { deleteOutcome, webhookCommandRefusal } from './webhook-command.js';
import type { WebhookCommandVerb } from './webhook-command.js';
import { WEBHOOK_KEYRING } from './webhooks.tokens.js';

/** The durables the webhooks service takes `webhook_register` and `webhook_delete` commands with. */
export const REGISTER_DURABLE = commandDurableOf('webhook_register', 'webhooks');
export const DELETE_DURABLE = commandDurableOf('webhook_delete', 'webhooks');

/**
 * Serves `webhook_register` and `webhook_delete` from the command stream (docs/adr/0027): the
 * webhooks service owns its tables, so a webhook the gateway registers or deletes is written here,
 * idempotently under the id the gateway chose. A command past its `expires_at` is refused
 * unperformed. A registration's secret arrives sealed; it is stored only if it opens under this
 * service's key file (else no delivery could ever be signed).
 */
@Injectable()
export class WebhookCommandService implements OnApplicationBootstrap, OnModuleDestroy {
  private servers: CommandServer[] = [];

  constructor(
    private readonly bus: CommandBus,
    private readonly store: WebhookStore,
    @Inject(WEBHOOK_KEYRING) private readonly keyring: SecretKeyring,
    @Inject(SERVICE_LOGGER) private readonly logger: JsonLogger,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    const onError = (verb: WebhookCommandVerb) => (error: unknown) => this.logger.write('fatal', `stopped serving ${verb}: the consumer failed`, { error: String(error) });
    try {
      this.servers.push(await this.bus.serve('webhook_register', REGISTER_DURABLE, (command) => this.register(command), { concurrency: 4, onError: onError('webhook_register') }));
      this.servers.push(await this.bus.serve('webhook_delete', DELETE_DURABLE, (command) => this.delete(command), { concurrency: 4, onError: onError('webhook_delete') }));
    } catch (error) {
      await this.onModuleDestroy();
      throw error;
    }
    this.logger.write('info', 'serving commands', { stream: this.bus.streamName, verbs: ['webhook_register', 'webhook_delete'] });
  }

  async onModuleDestroy(): Promise<void> {
    const servers = this.servers;
    this.servers = [];
    for (const server of servers) {
      await server.stop().catch((error: unknown) => this.logger.write('error', `the ${server.verb} command server failed`, { error: String(error) }));
    }
  }

  async register(command: RegisterWebhookCommand): Promise<{ run_id: string; duplicate: boolean }> {
    this.refuseStale('webhook_register', command);
    // The gateway checked it against SSRF; its shape is checked again here (every attempt checks its addresses).
    const url = parseWebhookUrl(command.url);
    const sealed = new Uint8Array(Buffer.from(command.secret_sealed, 'base64'));
    const unusable = checkSealedWebhookSecret(this.keyring, command.tenant, command.webhook_id, sealed, command.key_id);
    if (unusable !== null) {
      this.logger.write('error', 'webhook registration refused: its signing secret does not open here', { tenant: command.tenant, webhook: command.webhook_id, reason: unusable.message });
      throw unusable;
    }
    const { webhook, duplicate } = await this.store.register({
      id: command.webhook_id,
      tenant: command.tenant,
      url: command.url,
      events: command.events,
      description: command.description,
      secretSealed: sealed,
      keyId: command.key_id,
    });
    this.logger.write('info', 'webhook registered', { tenant: command.tenant, webhook: command.webhook_id, host: url.host, events: command.events, requested_by: command.requested_by, duplicate, deleted_since: webhook === null });
    return { run_id: command.webhook_id, duplicate };
  }

  async delete(command: DeleteWebhookCommand): Promise<{ run_id: string; duplicate: boolean }> {
    this.refuseStale('webhook_delete', command);
    const outcome = deleteOutcome(command, await this.store.remove(command.tenant, command.webhook_id));
    this.logger.write('info', 'webhook deleted', { tenant: command.tenant, webhook: command.webhook_id, requested_by: command.requested_by, duplicate: outcome.duplicate });
    return outcome;
  }

  private refuseStale(verb: WebhookCommandVerb, command: RegisterWebhookCommand | DeleteWebhookCommand): void {
    const refused = webhookCommandRefusal(verb, command, Date.now());
    if (refused === null) return;
    // Answered, never retried: its sender stopped waiting, and a later write would surprise it.
    this.logger.write('warn', `${verb} refused: taken after its sender stopped waiting`, { tenant: command.tenant, webhook: command.webhook_id });
    throw refused;
  }
}
