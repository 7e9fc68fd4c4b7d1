import { isNatsService, natsInboxPrefix, SERVICE_ROUTES } from '@cairn/config';
import type { EvidenceLogConfig } from '@cairn/config';
import { connectNats, EvidenceLog, evidenceLogOptionsFromConfig } from '@cairn/evidence-log';
import { Inject, Injectable, Module } from '@nestjs/common';
import type { DynamicModule, OnApplicationBootstrap, OnApplicationShutdown, Provider, Type } from '@nestjs/common';
import type { NatsConnection } from '@nats-io/transport-node';
import { EvidenceReactor } from './evidence-reactor.js';
import type { ReactorHandler } from './evidence-reactor.js';
import { JsonLogger } from './json-logger.js';
import { EVIDENCE_LOG, NATS_CONNECTION, REACTOR_HANDLER, SERVICE_CONFIG, SERVICE_LOGGER, SERVICE_NAME } from './service.tokens.js';

export interface ServiceModuleOptions<C extends EvidenceLogConfig> {
  /** `policy`, `scheduler`, … — the actor on every receipt the service appends. */
  service: string;
  config: C;
  /** The service's reactor handler; omit for services that only serve (e.g. a gateway). */
  handler?: Type<ReactorHandler>;
  /** Durable consumer name; defaults to `cairn-<service>`. */
  durable?: string;
  concurrency?: number;
  ackWaitMs?: number;
  /** The longest one reaction may take before it is retried (see `EvidenceReactorOptions`). */
  handlerTimeoutMs?: number;
  providers?: Provider[];
  imports?: DynamicModule['imports'];
  exports?: DynamicModule['exports'];
}

/** The connection's credentials file, when the process has one (CAIRN_NATS_CREDS_FILE). */
export function credsOf(config: EvidenceLogConfig): { credsFile?: string } {
  return config.CAIRN_NATS_CREDS_FILE === undefined ? {} : { credsFile: config.CAIRN_NATS_CREDS_FILE };
}

/**
 * The prefix of the service's inboxes (ADR 0022): its NATS user may subscribe to no other. A name
 * outside SERVICE_ROUTES keeps nats.js's default; a runtime's is its worker's own.
 */
export function inboxPrefixOf(service: string, config: object): { inboxPrefix?: string } {
  if (!isNatsService(service)) return {};
  const workerId = (config as { CAIRN_WORKER_ID?: unknown }).CAIRN_WORKER_ID;
  if (service === 'runtime' && (typeof workerId !== 'string' || workerId === '')) throw new RangeError('a runtime connects to NATS only once its worker id is known');
  return { inboxPrefix: natsInboxPrefix(service, typeof workerId === 'string' ? workerId : '') };
}

/** A service appends only the types of its row of SERVICE_ROUTES (docs/adr/0022); a name outside the table, any. */
export function appendsOf(service: string): { appends?: ReadonlySet<string> } {
  return isNatsService(service) ? { appends: new Set(SERVICE_ROUTES[service].appends) } : {};
}

/** Starts the reactor once the module is up and stops it (and NATS) on shutdown. */
@Injectable()
class ReactorLifecycle implements OnApplicationBootstrap, OnApplicationShutdown {
  private reactor: EvidenceReactor | null = null;

  constructor(
    @Inject(SERVICE_NAME) private readonly service: string,
    @Inject(NATS_CONNECTION) private readonly nc: NatsConnection,
    @Inject(EVIDENCE_LOG) private readonly log: EvidenceLog,
    @Inject(SERVICE_LOGGER) private readonly logger: JsonLogger,
    @Inject(REACTOR_HANDLER) private readonly handler: ReactorHandler | null,
    @Inject('cairn.reactor-options') private readonly reactorOptions: { durable: string; concurrency?: number; ackWaitMs?: number; handlerTimeoutMs?: number },
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    if (this.handler === null) return;
    this.reactor = new EvidenceReactor({
      service: this.service,
      nc: this.nc,
      log: this.log,
      handler: this.handler,
      logger: this.logger,
      ...this.reactorOptions,
    });
    await this.reactor.start();
    this.logger.write('info', 'reacting to the evidence stream', { durable: this.reactorOptions.durable, types: [...this.handler.types] });
  }

  async onApplicationShutdown(): Promise<void> {
    await this.reactor?.stop();
    await this.log.close();
    if (!this.nc.isClosed()) await this.nc.drain();
  }
}

/**
 * The shared wiring of a Cairn service: config, one NATS connection, the evidence log, a JSON
 * logger, and (when given) the service's reactor over the evidence stream.
 */
@Module({})
export class ServiceRuntimeModule {
  static forRoot<C extends EvidenceLogConfig>(options: ServiceModuleOptions<C>): DynamicModule {
    const logger = new JsonLogger(options.service);
    const handlerProviders: Provider[] = options.handler
      ? [options.handler, { provide: REACTOR_HANDLER, useExisting: options.handler }]
      : [{ provide: REACTOR_HANDLER, useValue: null }];
    return {
      module: ServiceRuntimeModule,
      global: true,
      imports: options.imports ?? [],
      providers: [
        { provide: SERVICE_NAME, useValue: options.service },
        { provide: SERVICE_CONFIG, useValue: options.config },
        { provide: SERVICE_LOGGER, useValue: logger },
        {
          provide: 'cairn.reactor-options',
          useValue: {
            durable: options.durable ?? `cairn-${options.service}`,
            ...(options.concurrency === undefined ? {} : { concurrency: options.concurrency }),
            ...(options.ackWaitMs === undefined ? {} : { ackWaitMs: options.ackWaitMs }),
            ...(options.handlerTimeoutMs === undefined ? {} : { handlerTimeoutMs: options.handlerTimeoutMs }),
          },
        },
        {
          provide: NATS_CONNECTION,
          useFactory: async (): Promise<NatsConnection> => {
            return connectNats({
              servers: options.config.CAIRN_NATS_URL,
              name: `cairn-${options.service}`,
              maxReconnectAttempts: -1,
              ...credsOf(options.config),
              ...inboxPrefixOf(options.service, options.config),
            });
          },
        },
        {
          provide: EVIDENCE_LOG,
          inject: [NATS_CONNECTION],
          useFactory: (nc: NatsConnection) => EvidenceLog.fromConnection(nc, evidenceLogOptionsFromConfig(options.config, appendsOf(options.service))),
        },
        ...handlerProviders,
        ReactorLifecycle,
        ...(options.providers ?? []),
      ],
      exports: [SERVICE_NAME, SERVICE_CONFIG, SERVICE_LOGGER, NATS_CONNECTION, EVIDENCE_LOG, ...(options.exports ?? [])],
    };
  }
}
