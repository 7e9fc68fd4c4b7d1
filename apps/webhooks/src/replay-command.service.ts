import { commandDurableOf } from '@cairn/config';
import { CairnError } from '@cairn/contracts';
import type { ReplayWebhookDeliveryCommand } from '@cairn/contracts';
import { CommandBus } from '@cairn/operational';
import type { CommandServer } from '@cairn/operational';
import { JsonLogger, SERVICE_LOGGER } from '@cairn/service-kit';
import { WebhookStore } from '@cairn/webhooks';
import { Inject, Injectable } from '@nestjs/common';
import type { OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import { chainOfEvent, replayRefusal } from './replay-command.js';

/** The durable the webhooks service takes `webhook_replay` commands with. */
export const REPLAY_DURABLE = commandDurableOf('webhook_replay', 'webhooks');

/**
 * Serves `webhook_replay` from the command stream (docs/adr/0027): the webhooks service owns its
 * delivery queue, so a replay the gateway asks for is queued here, idempotently under the id the
 * gateway chose, and sent by the dispatcher's next look (CAIRN_WEBHOOKS_POLL_MS), as before: the
 * REST answer shows it pending. A command past its `expires_at` is refused unperformed.
 */
@Injectable()
export class ReplayCommandService implements OnApplicationBootstrap, OnModuleDestroy {
  private server: CommandServer | null = null;

  constructor(
    private readonly bus: CommandBus,
    private readonly store: WebhookStore,
    @Inject(SERVICE_LOGGER) private readonly logger: JsonLogger,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    this.server = await this.bus.serve('webhook_replay', REPLAY_DURABLE, (command) => this.replay(command), {
      concurrency: 4,
      onError: (error: unknown) => this.logger.write('fatal', 'stopped serving webhook replays: the consumer failed', { error: String(error) }),
    });
    this.logger.write('info', 'serving commands', { stream: this.bus.streamName, verbs: ['webhook_replay'] });
  }

  async onModuleDestroy(): Promise<void> {
    const server = this.server;
    this.server = null;
    await server?.stop().catch((error: unknown) => this.logger.write('error', 'the replay command server failed', { error: String(error) }));
  }

  async replay(command: ReplayWebhookDeliveryCommand): Promise<{ run_id: string; duplicate: boolean }> {
    const refused = replayRefusal(command, Date.now());
    if (refused !== null) {
      // Answered, never retried: its sender stopped waiting, and a later replay would surprise it.
      this.logger.write('warn', 'webhook replay refused: taken after its sender stopped waiting', { tenant: command.tenant, webhook: command.webhook_id, delivery: command.delivery_id });
      throw refused;
    }
    const replayed = await this.store.replay(command.tenant, command.webhook_id, command.delivery_id, command.replay_id);
    if (replayed === null) throw new CairnError('E_NOT_FOUND', `no delivery ${command.delivery_id} of webhook ${command.webhook_id}`, { id: command.webhook_id, deliveryId: command.delivery_id });
    this.logger.write('info', 'webhook delivery replayed', { tenant: command.tenant, webhook: command.webhook_id, delivery: command.delivery_id, replay: command.replay_id, requested_by: command.requested_by, duplicate: replayed.duplicate });
    return { run_id: chainOfEvent(replayed.delivery.eventId), duplicate: replayed.duplicate };
  }
}
