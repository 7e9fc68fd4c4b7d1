import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { NatsArtifactStore } from '@cairn/artifact-store';
import { CairnError } from '@cairn/contracts';
import { connectNats, EvidenceLog, evidenceLogOptionsFromConfig } from '@cairn/evidence-log';
import { CommandBus, commandBusOptionsFromConfig, LeaseStore, PlacementQueue, WorkerDrains, WorkerRegistry } from '@cairn/operational';
import { drainsBucketFor, natsInboxPrefix, queueBucketFor, SERVICE_ROUTES, tlogNames } from '@cairn/config';
import { ProjectionNotices } from '@cairn/persistence';
import { openSandboxSessions } from '@cairn/sandbox-sessions';
import { JsonLogger } from '@cairn/service-kit';
import { TransparencyLog } from '@cairn/tlog';
import { nameServerSpanHook } from '@cairn/tracing';
import type { NatsConnection } from '@nats-io/transport-node';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import type { DataSource } from 'typeorm';
import { readApiKeyFile } from './auth/api-key.file.js';
import { ensureApiKey } from './auth/api-key.store.js';
import { dashboardDir, registerDashboard } from './dashboard/dashboard.routes.js';
import { CairnExceptionFilter } from './errors/cairn-exception.filter.js';
import { createGatewayDataSource, runGatewayMigrations } from './gateway-data-source.js';
import { BODY_LIMIT_BYTES } from './gateway.config.js';
import type { GatewayConfig } from './gateway.config.js';
import { GatewayModule } from './gateway.module.js';
import { handleBadUrl, handleClientError } from './http/client-error.handler.js';
import { InputValidationPipe } from './http/input-validation.pipe.js';
import { registerRequestMetrics } from './http/request-metrics.js';
import { createGatewayMetrics } from './metrics/gateway-metrics.js';
import { registerFileBodyParser } from './sandboxes/file-body.parser.js';
import { openGatewaySecrets } from './secrets/open-gateway-secrets.js';
import { parseStrictJsonBody } from './http/strict-json-body.js';

export const GATEWAY_SERVICE = 'gateway';

export interface RunningGateway {
  /** `http://<host>:<port>`, the port the server actually got (CAIRN_GATEWAY_PORT=0 picks one). */
  readonly url: string;
  readonly port: number;
  readonly app: NestFastifyApplication;
  /** Ends open event streams, stops the server, then closes PostgreSQL and NATS. Idempotent. */
  close(): Promise<void>;
}

export interface StartGatewayOptions {
  /** The gateway's JSON log (stderr by default). */
  logger?: JsonLogger;
}

function hostForUrl(host: string): string {
  return host.includes(':') ? `[${host}]` : host;
}

/**
 * Starts the REST gateway: connects NATS and PostgreSQL, runs the gateway's own migration,
 * ensures the bootstrap key (CAIRN_API_KEY; its creation is recorded on the admin chain by the
 * recorder once intake answers) and listens. Used by `main.ts` and by tests that run
 * the gateway in-process. Fails with a CairnError naming what is missing.
 */
export async function startGateway(config: GatewayConfig, options: StartGatewayOptions = {}): Promise<RunningGateway> {
  const logger = options.logger ?? new JsonLogger(GATEWAY_SERVICE);
  const cleanups: (() => Promise<unknown>)[] = [];
  const unwind = async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
  };
  try {
    const nc: NatsConnection = await connectNats({
      servers: config.CAIRN_NATS_URL,
      name: 'cairn-gateway',
      maxReconnectAttempts: -1,
      inboxPrefix: natsInboxPrefix('gateway', ''),
      ...(config.CAIRN_NATS_CREDS_FILE === undefined ? {} : { credsFile: config.CAIRN_NATS_CREDS_FILE }),
    });
    cleanups.push(() => nc.drain());

    const dataSource: DataSource = createGatewayDataSource(config.CAIRN_DATABASE_URL);
    try {
      await dataSource.initialize();
    } catch (error) {
      throw new CairnError('E_UNAVAILABLE', `cannot connect to PostgreSQL (CAIRN_DATABASE_URL): ${error instanceof Error ? error.message : String(error)}`);
    }
    cleanups.push(() => dataSource.destroy());
    await runGatewayMigrations(dataSource);
    const notices = await ProjectionNotices.open(config.CAIRN_DATABASE_URL);
    cleanups.push(() => notices.close());
    const bootstrapKey = config.CAIRN_API_KEY_FILE === undefined ? config.CAIRN_API_KEY : await readApiKeyFile(config.CAIRN_API_KEY_FILE);
    if (bootstrapKey !== undefined) {
      const { id, created, superseded } = await ensureApiKey(dataSource, bootstrapKey, { tenant: 'default', scopes: ['admin'] });
      if (superseded) {
        // Rotated since: the earlier secret is not registered again (the current one is in $CAIRN_HOME/api-key).
        logger.write('warn', 'CAIRN_API_KEY is an earlier secret of a rotated key; it is not registered', { keyId: id });
      } else logger.write('info', created ? 'bootstrap API key stored' : 'bootstrap API key present', { keyId: id });
    }

    const secrets = await openGatewaySecrets(config, nc, logger);

    const bus = await CommandBus.open(nc, commandBusOptionsFromConfig(config));
    const registry = await WorkerRegistry.open(nc, { bucket: config.CAIRN_WORKERS_BUCKET, replicas: config.CAIRN_NATS_REPLICAS, observe: true });
    const drains = await WorkerDrains.open(nc, { bucket: drainsBucketFor(config.CAIRN_WORKERS_BUCKET), replicas: config.CAIRN_NATS_REPLICAS });
    cleanups.push(() => Promise.resolve(drains.close()));
    // What workers hold, and what waits for room: operational state the views show as it is now.
    const leases = await LeaseStore.open(nc, { bucket: config.CAIRN_LEASES_BUCKET, replicas: config.CAIRN_NATS_REPLICAS });
    const queue = await PlacementQueue.open(nc, { bucket: config.CAIRN_QUEUE_BUCKET ?? queueBucketFor(config.CAIRN_LEASES_BUCKET), replicas: config.CAIRN_NATS_REPLICAS });
    cleanups.push(() => Promise.resolve(queue.close()));
    // Interactive sandbox sessions: created through intake, operated on the worker that holds each one.
    // The gateway appends nothing itself (SERVICE_ROUTES): what it asks for goes through commands.
    const log = await EvidenceLog.fromConnection(nc, evidenceLogOptionsFromConfig(config, { appends: new Set(SERVICE_ROUTES.gateway.appends) }));
    // Opened, never created: the runtime writes it, from whichever host it runs on.
    const artifacts = await NatsArtifactStore.open(nc, { bucket: config.CAIRN_ARTIFACT_BUCKET });
    cleanups.push(() => log.close());
    const sandboxes = await openSandboxSessions({ nc, log, bus, config: { commandTimeoutMs: config.CAIRN_GATEWAY_COMMAND_TIMEOUT_MS } });
    cleanups.push(() => sandboxes.close());

    // The log of seal heads, read only: the grader keeps it; nothing is created here.
    const tlog = await TransparencyLog.open(nc, { ...tlogNames(config), replicas: config.CAIRN_NATS_REPLICAS }, 'reader');
    cleanups.push(() => Promise.resolve(tlog.close()));
    const metrics = createGatewayMetrics();
    const adapter = new FastifyAdapter({ bodyLimit: BODY_LIMIT_BYTES, logger: false, routerOptions: { maxParamLength: 128, onBadUrl: handleBadUrl }, clientErrorHandler: handleClientError });
    const app = await NestFactory.create<NestFastifyApplication>(GatewayModule.forRoot({ config, nc, dataSource, bus, registry, drains, leases, queue, logger, secrets, sandboxes, notices, metrics, artifacts, tlog }), adapter, {
      // Nest's own messages from warnings up: not a line per route at every start.
      logger: new JsonLogger(GATEWAY_SERVICE, 'warn'),
      abortOnError: false,
    });
    cleanups.push(() => app.close());
    const fastify = app.getHttpAdapter().getInstance();
    // Before the routes are registered (at listen): every one of them, and the 404s, is counted, and
    // each request's server span is named by its route (`GET /v1/runs/:id`; nothing when tracing is off).
    registerRequestMetrics(fastify, metrics);
    fastify.addHook('onRequest', nameServerSpanHook);
    const jsonParser = fastify.getDefaultJsonParser('error', 'error');
    // Fastify's JSON parser refuses an empty body; here it is "no body", which each route judges.
    // Bad UTF-8, duplicate names and excessive depth are E_INPUT (strict-json-body.ts).
    app.useBodyParser<Server>('application/json', { bodyLimit: BODY_LIMIT_BYTES }, (request, body, done) => {
      parseStrictJsonBody(body, done, (text, next) => void jsonParser(request, text, next));
    });
    // A secret's value (PUT /v1/secrets/:name) arrives as text/plain and stays bytes: checked as UTF-8, never decoded loosely.
    app.useBodyParser<Server>('text/plain', { bodyLimit: BODY_LIMIT_BYTES }, (_request, body, done) => done(null, body));
    // A sandbox file's bytes (PUT /v1/sandboxes/:id/files, up to 16 MiB on that route only) stay bytes.
    registerFileBodyParser(fastify, BODY_LIMIT_BYTES);
    app.useGlobalFilters(new CairnExceptionFilter(logger));
    app.useGlobalPipes(new InputValidationPipe());
    // The admin dashboard's static files (apps/dashboard), outside the API's route table.
    registerDashboard(fastify, dashboardDir(config.CAIRN_DASHBOARD_DIR), logger);
    await app.listen(config.CAIRN_GATEWAY_PORT, config.CAIRN_GATEWAY_HOST);

    const address = fastify.server.address() as AddressInfo | null;
    const port = address?.port ?? config.CAIRN_GATEWAY_PORT;
    const url = `http://${hostForUrl(config.CAIRN_GATEWAY_HOST)}:${port}`;
    let closing: Promise<void> | null = null;
    return { url, port, app, close: () => (closing ??= unwind()) };
  } catch (error) {
    await unwind();
    throw error;
  }
}
