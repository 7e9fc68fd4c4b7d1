import { isCairnError } from '@cairn/contracts';
import type { SecretKeyring } from '@cairn/secrets';
import { JsonLogger, SERVICE_CONFIG, SERVICE_LOGGER } from '@cairn/service-kit';
import {
  afterFailure,
  checkWebhookUrl,
  DELIVERY_ATTEMPT_HEADER,
  DELIVERY_ID_HEADER,
  EVENT_ID_HEADER,
  EVENT_TYPE_HEADER,
  openWebhookSecret,
  sendWebhook,
  SIGNATURE_HEADER,
  signatureHeader,
  WebhookStore,
} from '@cairn/webhooks';
import type { ClaimedDelivery, RetryPolicy, SendOutcome } from '@cairn/webhooks';
import { Inject, Injectable } from '@nestjs/common';
import type { OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import type { WebhooksConfig } from './webhooks.config.js';
import { WEBHOOK_KEYRING } from './webhooks.tokens.js';

/**
 * The sending half: takes due deliveries from PostgreSQL (leased, so two processes never send the
 * same attempt and a crashed one's deliveries come due again), signs and POSTs each, and records
 * every attempt — delivered on a 2xx, otherwise retried with exponential backoff and dead-lettered
 * after the last attempt. The URL is checked against SSRF again before every attempt and the
 * connection goes only to the address checked.
 *
 * It looks as soon as this process queued deliveries (`wake`) or a retry of its own comes due, and
 * otherwise every `CAIRN_WEBHOOKS_POLL_MS` — for what it cannot hear of: a replay queued by the
 * gateway, another instance's lease run out. An idle stack does not ask PostgreSQL five times a second.
 */
@Injectable()
export class DeliveryDispatcher implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly inFlight = new Set<Promise<void>>();
  private timer: NodeJS.Timeout | null = null;
  private stopping = false;
  private ticking: Promise<void> | null = null;
  /** A wake that came while a look was under way: look again once it ends. */
  private woken = false;
  private readonly retryTimers = new Set<NodeJS.Timeout>();
  private readonly retry: RetryPolicy;

  constructor(
    private readonly store: WebhookStore,
    @Inject(WEBHOOK_KEYRING) private readonly keyring: SecretKeyring,
    @Inject(SERVICE_CONFIG) private readonly config: WebhooksConfig,
    @Inject(SERVICE_LOGGER) private readonly logger: JsonLogger,
  ) {
    this.retry = { maxAttempts: config.CAIRN_WEBHOOKS_MAX_ATTEMPTS, baseDelayMs: config.CAIRN_WEBHOOKS_RETRY_BASE_MS, maxDelayMs: config.CAIRN_WEBHOOKS_RETRY_MAX_MS };
  }

  onApplicationBootstrap(): void {
    this.logger.write('info', 'dispatching webhook deliveries', {
      poll_ms: this.config.CAIRN_WEBHOOKS_POLL_MS,
      max_attempts: this.retry.maxAttempts,
      allow_private: this.config.CAIRN_WEBHOOKS_ALLOW_PRIVATE,
    });
    this.schedule(0);
  }

  async onApplicationShutdown(): Promise<void> {
    this.stopping = true;
    if (this.timer !== null) clearTimeout(this.timer);
    for (const timer of this.retryTimers) clearTimeout(timer);
    await this.ticking;
    await Promise.allSettled([...this.inFlight]);
    await this.store.close();
  }

  /** Deliveries were queued (or come due) now: look at once rather than at the next poll. */
  wake(): void {
    if (this.stopping) return;
    if (this.timer === null) {
      // A look is under way: it may have missed them.
      this.woken = true;
      return;
    }
    clearTimeout(this.timer);
    this.schedule(0);
  }

  private schedule(delayMs: number): void {
    if (this.stopping) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.woken = false;
      this.ticking = this.tick().then((more) => this.schedule(more || this.woken ? 0 : this.config.CAIRN_WEBHOOKS_POLL_MS));
    }, delayMs);
  }

  /** One round: claims what the free slots can take; true when it filled them (look again at once). */
  private async tick(): Promise<boolean> {
    const free = this.config.CAIRN_WEBHOOKS_CONCURRENCY - this.inFlight.size;
    if (free <= 0) {
      await Promise.race(this.inFlight);
      return true;
    }
    let claimed: ClaimedDelivery[];
    try {
      // The lease outlives one attempt, so a live holder is never overtaken.
      claimed = await this.store.claimDue(free, this.config.CAIRN_WEBHOOKS_TIMEOUT_MS + 30_000);
    } catch (error) {
      this.logger.write('warn', 'cannot claim deliveries; will retry', { error: error instanceof Error ? error.message : String(error) });
      return false;
    }
    for (const delivery of claimed) {
      const task = this.attempt(delivery).catch((error: unknown) => {
        // Not recorded: the lease runs out and the attempt is made again (at least once).
        this.logger.write('error', 'could not record a delivery attempt', { delivery: delivery.id, error: error instanceof Error ? error.message : String(error) });
      });
      this.inFlight.add(task);
      void task.finally(() => this.inFlight.delete(task));
    }
    return claimed.length === free;
  }

  private async attempt(delivery: ClaimedDelivery): Promise<void> {
    const outcome = await this.send(delivery);
    const next = outcome.error === null ? ({ status: 'delivered' } as const) : this.afterFailure(delivery.attempt);
    await this.store.recordAttempt(delivery, { statusCode: outcome.status, error: outcome.error, durationMs: outcome.durationMs, next });
    if (next.status === 'pending') this.wakeIn(next.retryInMs);
    const fields = { delivery: delivery.id, webhook: delivery.webhookId, event: delivery.eventId, attempt: delivery.attempt, status: outcome.status, outcome: next.status };
    if (next.status === 'dead') this.logger.write('warn', 'delivery dead-lettered', { ...fields, error: outcome.error });
    else if (next.status === 'pending') this.logger.write('info', 'delivery failed; will retry', { ...fields, error: outcome.error, retry_in_ms: next.retryInMs });
  }

  /** Looks again when a retry recorded here comes due (another instance may take it first: then nothing is claimed). */
  private wakeIn(delayMs: number): void {
    if (this.stopping || delayMs >= this.config.CAIRN_WEBHOOKS_POLL_MS) return;
    const timer = setTimeout(() => {
      this.retryTimers.delete(timer);
      this.wake();
    }, delayMs);
    this.retryTimers.add(timer);
  }

  private afterFailure(attempt: number): { status: 'dead' } | { status: 'pending'; retryInMs: number } {
    const decision = afterFailure(this.retry, attempt);
    return decision.dead ? { status: 'dead' } : { status: 'pending', retryInMs: decision.delayMs };
  }

  private async send(delivery: ClaimedDelivery): Promise<SendOutcome> {
    let secret: string;
    try {
      secret = openWebhookSecret(this.keyring, delivery.tenant, delivery.webhookId, delivery.secretSealed);
    } catch (error) {
      return { status: null, error: `${isCairnError(error) ? error.code : 'E_INTERNAL'}: the signing secret cannot be opened with the key file in force`, durationMs: 0 };
    }
    let target;
    try {
      target = await checkWebhookUrl(delivery.url, { allowPrivate: this.config.CAIRN_WEBHOOKS_ALLOW_PRIVATE });
    } catch (error) {
      // Refused before any connection: the name now resolves somewhere it may not go.
      return { status: null, error: `${isCairnError(error) ? error.code : 'E_INTERNAL'}: ${error instanceof Error ? error.message : String(error)}`.slice(0, 500), durationMs: 0 };
    }
    const headers = {
      [EVENT_ID_HEADER]: delivery.eventId,
      [EVENT_TYPE_HEADER]: delivery.eventType,
      [DELIVERY_ID_HEADER]: delivery.id,
      [DELIVERY_ATTEMPT_HEADER]: String(delivery.attempt),
      [SIGNATURE_HEADER]: signatureHeader(secret, Math.floor(Date.now() / 1000), delivery.body),
    };
    return sendWebhook(target, headers, delivery.body, this.config.CAIRN_WEBHOOKS_TIMEOUT_MS);
  }
}
