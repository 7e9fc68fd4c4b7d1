import { CommandBus, WorkerRegistry } from '@cairn/operational';
import { JsonLogger } from '@cairn/service-kit';
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
import { HealthService } from './health/health.service.js';
import { OpenApiController } from './openapi/openapi.controller.js';
import { RunCommands } from './runs/run-commands.service.js';
import { RunEventStreams } from './runs/run-event-streams.service.js';
import { RunReadsRepository } from './runs/run-reads.repository.js';
import { RunsController } from './runs/runs.controller.js';
import { WorkersController } from './workers/workers.controller.js';

/** The connections the gateway runs on; `startGateway` opens them and closes them after the app. */
export interface GatewayResources {
  config: GatewayConfig;
  nc: NatsConnection;
  dataSource: DataSource;
  bus: CommandBus;
  registry: WorkerRegistry;
  logger: JsonLogger;
}

/** The HTTP wiring only: every resource comes in ready, so the module has no IO of its own to start. */
@Module({})
export class GatewayModule {
  static forRoot(resources: GatewayResources): DynamicModule {
    return {
      module: GatewayModule,
      controllers: [RunsController, WorkersController, HealthController, OpenApiController],
      providers: [
        { provide: GATEWAY_CONFIG, useValue: resources.config },
        { provide: GATEWAY_NATS, useValue: resources.nc },
        { provide: DataSource, useValue: resources.dataSource },
        { provide: CommandBus, useValue: resources.bus },
        { provide: WorkerRegistry, useValue: resources.registry },
        { provide: JsonLogger, useValue: resources.logger },
        ApiKeyRepository,
        RunReadsRepository,
        RunCommands,
        RunEventStreams,
        HealthService,
        { provide: APP_GUARD, useClass: ApiKeyGuard },
      ],
    };
  }
}
