import { JsonLogger, SERVICE_LOGGER } from '@cairn/service-kit';
import type { ReactionContext } from '@cairn/service-kit';
import { WebhookStore } from '@cairn/webhooks';
import { Inject, Injectable } from '@nestjs/common';
import { DeliveryDispatcher } from './delivery-dispatcher.js';
import { webhookBody } from './event-payload.js';
import { deliveriesFor } from './webhook-fanout.js';

/**
 * The reactor half: for every receipt routed to it (WebhookRouter), queues one delivery per matching webhook of its tenant
 * (in PostgreSQL, beside the log, never on it), then the reactor acks. A receipt seen again after
 * a crash queues nothing twice (one first delivery per webhook and event id). Sending is the
 * dispatcher's job, so a slow receiver never holds the stream up.
 */
@Injectable()
export class WebhookFanoutHandler {
  constructor(
    private readonly store: WebhookStore,
    @Inject(SERVICE_LOGGER) private readonly logger: JsonLogger,
    private readonly dispatcher: DeliveryDispatcher,
  ) {}

  async handle(ctx: ReactionContext): Promise<void> {
    const receipt = ctx.receipt;
    const hooks = await this.store.hooksOf(receipt.tenant);
    if (hooks.length === 0) return;
    const deliveries = deliveriesFor(receipt, ctx.eventId, webhookBody(receipt), hooks);
    const queued = await this.store.enqueue(deliveries);
    if (queued === 0) return;
    this.logger.write('debug', 'deliveries queued', { event: ctx.eventId, type: receipt.type, queued });
    // Committed: the dispatcher sends them now, not at its next poll.
    this.dispatcher.wake();
  }

  /** A webhook service never writes to a chain: a receipt it cannot queue is logged and left. */
  giveUp(ctx: ReactionContext, error: unknown): Promise<void> {
    this.logger.write('error', 'could not queue deliveries for a receipt; giving up on it', {
      event: ctx.eventId,
      type: ctx.receipt.type,
      error: error instanceof Error ? error.message : String(error),
    });
    return Promise.resolve();
  }
}
