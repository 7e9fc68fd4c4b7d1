import { pgUnavailable } from '@cairn/persistence';
import { CommandBus, commandBusOptionsFromConfig } from '@cairn/operational';
import { NATS_CONNECTION, ServiceRuntimeModule } from '@cairn/service-kit';
import type { NatsConnection } from '@nats-io/transport-node';
import type { DynamicModule } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { AdminCommandHandler } from './admin-command.handler.js';
import { ApproveRunHandler } from './approve-run.handler.js';
import { CancelRunHandler } from './cancel-run.handler.js';
import { RegradeRunHandler } from './regrade-run.handler.js';
import { CreateSandboxHandler } from './create-sandbox.handler.js';
import { IdempotencyRepository } from './idempotency.repository.js';
import { IntakeCommandsService } from './intake-commands.service.js';
import { createIntakeDataSource, runIntakeMigrations } from './intake-data-source.js';
import type { IntakeConfig } from './intake.config.js';
import { SubmitRunHandler } from './submit-run.handler.js';

export const INTAKE_SERVICE = 'intake';

/** Intake: serves the command stream (no reactor); migrates its own table at start. */
export function intakeModule(config: IntakeConfig): DynamicModule {
  return ServiceRuntimeModule.forRoot({
    service: INTAKE_SERVICE,
    config,
    providers: [
      {
        provide: DataSource,
        useFactory: async (): Promise<DataSource> => {
          const dataSource = await createIntakeDataSource(config.CAIRN_DATABASE_URL)
            .initialize()
            .catch((error: unknown) => {
              throw pgUnavailable(error, 'CAIRN_DATABASE_URL');
            });
          try {
            await runIntakeMigrations(dataSource);
          } catch (error) {
            await dataSource.destroy();
            throw error;
          }
          return dataSource;
        },
      },
      {
        provide: CommandBus,
        inject: [NATS_CONNECTION],
        useFactory: (nc: NatsConnection) => CommandBus.open(nc, commandBusOptionsFromConfig(config)),
      },
      IdempotencyRepository,
      SubmitRunHandler,
      CancelRunHandler,
      RegradeRunHandler,
      ApproveRunHandler,
      CreateSandboxHandler,
      AdminCommandHandler,
      IntakeCommandsService,
    ],
  });
}
