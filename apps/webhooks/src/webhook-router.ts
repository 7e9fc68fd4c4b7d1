import { EvidenceLog, parseEvidenceSubject } from '@cairn/evidence-log';
import { EVIDENCE_LOG, EvidenceReactor, JsonLogger, NATS_CONNECTION, PeriodicTask, SERVICE_CONFIG, SERVICE_LOGGER } from '@cairn/service-kit';
import type { ReactorHandler } from '@cairn/service-kit';
import { WebhookStore } from '@cairn/webhooks';
import { jetstreamManager } from '@nats-io/jetstream';
import type { ConsumerInfo, JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { Inject, Injectable } from '@nestjs/common';
import type { BeforeApplicationShutdown, OnApplicationBootstrap } from '@nestjs/common';
import { WebhookFanoutHandler } from './webhook-fanout.handler.js';
import { isWebhooksDurable, planRoute, routedTypes } from './webhook-routes.js';
import type { ExistingDurable, FilterGroup } from './webhook-routes.js';
import type { WebhooksConfig } from './webhooks.config.js';

/**
 * Keeps the webhooks service's consumer on the receipt types the webhooks in force want
 * (webhook-routes.ts): at boot, and whenever a look at the registrations (every
 * `CAIRN_WEBHOOKS_ROUTES_POLL_MS`) finds another set of types. One change at a time: the old
 * reactor drains, the new durable is made where the plan says, then the old durables go.
 */
@Injectable()
export class WebhookRouter implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private reactor: EvidenceReactor | null = null;
  private current: string | null = null;
  private routedKey: string | null = null;
  private poll: PeriodicTask | null = null;

  constructor(
    private readonly store: WebhookStore,
    private readonly fanout: WebhookFanoutHandler,
    @Inject(NATS_CONNECTION) private readonly nc: NatsConnection,
    @Inject(EVIDENCE_LOG) private readonly log: EvidenceLog,
    @Inject(SERVICE_CONFIG) private readonly config: WebhooksConfig,
    @Inject(SERVICE_LOGGER) private readonly logger: JsonLogger,
  ) {}

  /** The durable the service consumes through now (null before boot and after shutdown). */
  get durable(): string | null {
    return this.reactor === null ? null : this.current;
  }

  async onApplicationBootstrap(): Promise<void> {
    await this.route(await this.store.filterGroups());
    this.poll = new PeriodicTask(this.config.CAIRN_WEBHOOKS_ROUTES_POLL_MS, () => this.look(), (error) => {
      this.logger.write('warn', 'cannot look at the webhooks in force; will look again', { error: error instanceof Error ? error.message : String(error) });
    });
    this.poll.start();
  }

  async beforeApplicationShutdown(): Promise<void> {
    await this.poll?.stop();
    await this.reactor?.stop();
    this.reactor = null;
  }

  private async look(): Promise<void> {
    const groups = await this.store.filterGroups();
    if (routedTypes(groups).join(' ') !== this.routedKey) await this.route(groups);
  }

  private async route(groups: readonly FilterGroup[]): Promise<void> {
    const jsm = await jetstreamManager(this.nc);
    const plan = planRoute(groups, await this.existing(jsm));
    if (this.reactor !== null && this.current !== plan.durable) {
      await this.reactor.stop();
      this.reactor = null;
    }
    if (this.reactor === null) {
      const startAt = plan.create === null ? undefined : await this.startOf(plan.create);
      const handler: ReactorHandler = { types: plan.types, handle: (ctx) => this.fanout.handle(ctx), giveUp: (ctx, error) => this.fanout.giveUp(ctx, error) };
      const reactor = new EvidenceReactor({
        service: 'webhooks',
        durable: plan.durable,
        nc: this.nc,
        log: this.log,
        handler,
        logger: this.logger,
        ackWaitMs: this.config.CAIRN_WEBHOOKS_ACK_WAIT_MS,
        ...(startAt === undefined ? {} : { startAt }),
      });
      await reactor.start();
      this.reactor = reactor;
      this.current = plan.durable;
      this.logger.write('info', 'routing receipts to webhooks', { durable: plan.durable, types: [...plan.types], ...(startAt === undefined ? {} : { start: startAt }) });
    }
    for (const name of plan.remove) {
      // Another instance may have removed it first.
      await jsm.consumers.delete(this.log.streamName, name).catch(() => undefined);
    }
    this.routedKey = [...plan.types].join(' ');
  }

  private async startOf(create: { fromSeq: number | null; fromTime: Date | null }): Promise<{ seq: number } | 'new'> {
    const seqs = [create.fromSeq, create.fromTime === null ? null : await this.log.firstSeqAtOrAfter(create.fromTime)].filter((seq): seq is number => seq !== null);
    return seqs.length === 0 ? 'new' : { seq: Math.min(...seqs) };
  }

  private async existing(jsm: JetStreamManager): Promise<ExistingDurable[]> {
    const found: ExistingDurable[] = [];
    for await (const info of jsm.consumers.list(this.log.streamName)) {
      if (isWebhooksDurable(info.name)) found.push({ name: info.name, types: this.typesOf(info), nextSeq: info.ack_floor.stream_seq + 1 });
    }
    return found;
  }

  /** The types a durable's filters name; null when one of them takes every type (`<prefix>.>`, the layout before). */
  private typesOf(info: ConsumerInfo): ReadonlySet<string> | null {
    const filters = info.config.filter_subjects ?? (info.config.filter_subject ? [info.config.filter_subject] : []);
    const types = new Set<string>();
    for (const filter of filters) {
      const parsed = parseEvidenceSubject(this.log.subjectPrefix, filter);
      if (parsed === null || parsed.chainId !== '*' || parsed.type.includes('*') || parsed.type.includes('>')) return null;
      types.add(parsed.type);
    }
    return filters.length === 0 ? null : types;
  }
}
