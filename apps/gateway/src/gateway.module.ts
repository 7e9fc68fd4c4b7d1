import type { ArtifactStore } from '@cairn/artifact-store';
import { CommandBus, LeaseStore, PlacementQueue, WorkerDrains, WorkerRegistry } from '@cairn/operational';
import { ProjectionNotices } from '@cairn/persistence';
import { JsonLogger } from '@cairn/service-kit';
import { ImageBuilder } from '@cairn/sandbox-sessions';
import type { SandboxSessions } from '@cairn/sandbox-sessions';
import type { SecretCatalog } from '@cairn/secret-store';
import type { TransparencyLog } from '@cairn/tlog';
import type { NatsConnection } from '@nats-io/transport-node';
import { Module } from '@nestjs/common';
import type { DynamicModule } from '@nestjs/common';
import { APP_GUARD } from '@nestjs/core';
import { DataSource } from 'typeorm';
import { ApiKeyGuard } from './auth/api-key.guard.js';
import { ApiKeyRepository } from './auth/api-key.repository.js';
import type { GatewayConfig } from './gateway.config.js';
import { GATEWAY_CONFIG, GATEWAY_NATS } from './gateway.tokens.js';
import { HealthController } from './health/health.controller.js';
import { SealKeysController } from './proofs/seal-keys.controller.js';
import { GATEWAY_TLOG, TlogController } from './proofs/tlog.controller.js';
import { AdminRecorder } from './keys/admin-recorder.js';
import { KeyAdminRepository } from './keys/key-admin.repository.js';
import { KeyAdministration } from './keys/key-admin.service.js';
import { KeysController } from './keys/keys.controller.js';
import type { GatewayMetrics } from './metrics/gateway-metrics.js';
import { MetricsController } from './metrics/metrics.controller.js';
import { GATEWAY_METRICS, MetricsSources } from './metrics/metrics-sources.service.js';
import { TenantsController } from './keys/tenants.controller.js';
import { HealthService } from './health/health.service.js';
import { RateLimitGuard } from './http/rate-limit.guard.js';
import { OpenApiController } from './openapi/openapi.controller.js';
import { OutputsController } from './outputs/outputs.controller.js';
import { GATEWAY_ARTIFACTS, RunOutputsService } from './outputs/outputs.service.js';
import { PolicyController } from './policy/policy.controller.js';
import { RunApprovalsController } from './runs/run-approvals.controller.js';
import { RunApprovals } from './runs/run-approvals.service.js';
import { RunCommands } from './runs/run-commands.service.js';
import { RunEventStreams } from './runs/run-event-streams.service.js';
import { RunReadsRepository } from './runs/run-reads.repository.js';
import { RunsController } from './runs/runs.controller.js';
import { ImagesController } from './images/images.controller.js';
import { SandboxOperations } from './sandboxes/sandbox-operations.service.js';
import { SandboxReadsRepository } from './sandboxes/sandbox-reads.repository.js';
import { GATEWAY_SANDBOX_SESSIONS } from './sandboxes/sandbox-sessions.token.js';
import { SandboxesController } from './sandboxes/sandboxes.controller.js';
import { GATEWAY_SECRET_STORE } from './secrets/secret-store.token.js';
import { SecretsController } from './secrets/secrets.controller.js';
import { TenantKeysRepository } from './secrets/tenant-keys.repository.js';
import { QueueSpots } from './workers/queue-spots.js';
import { WorkersController } from './workers/workers.controller.js';
import { GatewayWebhooks } from './webhooks/gateway-webhooks.js';
import { WebhooksController } from './webhooks/webhooks.controller.js';

/** The connections the gateway runs on; `startGateway` opens them and closes them after the app. */
export interface GatewayResources {
  config: GatewayConfig;
  nc: NatsConnection;
  dataSource: DataSource;
  bus: CommandBus;
  registry: WorkerRegistry;
  /** Operators' drains of workers (ADR 0026). */
  drains: WorkerDrains;
  /** Leases (what each worker holds) and the scheduler's placement queue, for the workers' and runs' views. */
  leases: LeaseStore;
  queue: PlacementQueue;
  logger: JsonLogger;
  /** The secret catalog (ADR 0028); null when the gateway has no public key file (its routes answer E_UNAVAILABLE). */
  secrets: SecretCatalog | null;
  /** Interactive sandbox sessions (`/v1/sandboxes…`). */
  sandboxes: SandboxSessions;
  /** The projector's commit notices: reads wait on them instead of polling the projections. */
  notices: ProjectionNotices;
  /** The metrics `/metrics` serves; the request hook `startGateway` adds counts into them too. */
  metrics: GatewayMetrics;
  /** The runtime's artifact object store, opened to read: the outputs routes serve from it. */
  artifacts: ArtifactStore;
  /** The log of seal heads, read only (`/v1/tlog/…`). */
  tlog: TransparencyLog;
}

/** The HTTP wiring only: every resource comes in ready, so the module has no IO of its own to start. */
@Module({})
export class GatewayModule {
  static forRoot(resources: GatewayResources): DynamicModule {
    return {
      module: GatewayModule,
      controllers: [
        RunsController,
        ImagesController,
        OutputsController,
        SandboxesController,
        RunApprovalsController,
        WorkersController,
        SecretsController,
        WebhooksController,
        KeysController,
        TenantsController,
        HealthController,
        OpenApiController,
        PolicyController,
        SealKeysController,
        TlogController,
        MetricsController,
      ],
      providers: [
        { provide: GATEWAY_CONFIG, useValue: resources.config },
        { provide: GATEWAY_NATS, useValue: resources.nc },
        { provide: DataSource, useValue: resources.dataSource },
        { provide: CommandBus, useValue: resources.bus },
        { provide: WorkerRegistry, useValue: resources.registry },
        { provide: WorkerDrains, useValue: resources.drains },
        // Image builds a worker serves (docs/adr/0038): the gateway has no engine.
        {
          provide: ImageBuilder,
          useFactory: () =>
            new ImageBuilder({
              nc: resources.nc,
              registry: resources.registry,
              drains: resources.drains,
              config: { commandSubjectPrefix: resources.bus.subjectPrefix, staleAfterMs: resources.config.CAIRN_WORKER_STALE_AFTER_MS },
            }),
        },
        { provide: LeaseStore, useValue: resources.leases },
        { provide: PlacementQueue, useValue: resources.queue },
        QueueSpots,
        { provide: JsonLogger, useValue: resources.logger },
        { provide: GATEWAY_SECRET_STORE, useValue: { store: resources.secrets } },
        { provide: GATEWAY_SANDBOX_SESSIONS, useValue: resources.sandboxes },
        { provide: ProjectionNotices, useValue: resources.notices },
        { provide: GATEWAY_METRICS, useValue: resources.metrics },
        { provide: GATEWAY_TLOG, useValue: resources.tlog },
        MetricsSources,
        { provide: GATEWAY_ARTIFACTS, useValue: resources.artifacts },
        RunOutputsService,
        { provide: GatewayWebhooks, useFactory: () => GatewayWebhooks.open(resources.config, resources.logger) },
        ApiKeyRepository,
        RunReadsRepository,
        RunCommands,
        RunApprovals,
        RunEventStreams,
        SandboxReadsRepository,
        SandboxOperations,
        TenantKeysRepository,
        HealthService,
        KeyAdminRepository,
        KeyAdministration,
        AdminRecorder,
        // In this order: the key is verified, then its bucket is charged.
        { provide: APP_GUARD, useClass: ApiKeyGuard },
        { provide: APP_GUARD, useClass: RateLimitGuard },
      ],
    };
  }
}
