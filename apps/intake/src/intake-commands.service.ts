import { CommandBus } from '@cairn/operational';
import type { CommandServer } from '@cairn/operational';
import { JsonLogger, SERVICE_CONFIG, SERVICE_LOGGER } from '@cairn/service-kit';
import { Inject, Injectable } from '@nestjs/common';
import type { OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { AdminCommandHandler } from './admin-command.handler.js';
import { ApproveRunHandler } from './approve-run.handler.js';
import { CancelRunHandler } from './cancel-run.handler.js';
import { RegradeRunHandler } from './regrade-run.handler.js';
import { CreateSandboxHandler } from './create-sandbox.handler.js';
import type { IntakeConfig } from './intake.config.js';
import { SubmitRunHandler } from './submit-run.handler.js';

/** Serves `submit`, `cancel`, `approve`, `regrade`, `sandbox_create` and the admin commands from the command stream while the service is up. */
@Injectable()
export class IntakeCommandsService implements OnApplicationBootstrap, OnModuleDestroy {
  private servers: CommandServer[] = [];

  constructor(
    private readonly bus: CommandBus,
    private readonly submit: SubmitRunHandler,
    private readonly cancel: CancelRunHandler,
    private readonly approve: ApproveRunHandler,
    private readonly regrade: RegradeRunHandler,
    private readonly createSandbox: CreateSandboxHandler,
    private readonly admin: AdminCommandHandler,
    private readonly dataSource: DataSource,
    @Inject(SERVICE_CONFIG) private readonly config: IntakeConfig,
    @Inject(SERVICE_LOGGER) private readonly logger: JsonLogger,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    const prefix = this.config.CAIRN_INTAKE_DURABLE_PREFIX;
    const options = {
      concurrency: this.config.CAIRN_INTAKE_CONCURRENCY,
      onError: (error: unknown) => this.logger.write('fatal', 'stopped serving commands: the consumer failed', { error: String(error) }),
    };
    this.servers = [
      await this.bus.serve('submit', `${prefix}-submit`, (command) => this.submit.handle(command), options),
      await this.bus.serve('cancel', `${prefix}-cancel`, (command) => this.cancel.handle(command), options),
      await this.bus.serve('approve', `${prefix}-approve`, (command) => this.approve.handle(command), options),
      await this.bus.serve('regrade', `${prefix}-regrade`, (command) => this.regrade.handle(command), options),
      await this.bus.serve('sandbox_create', `${prefix}-sandbox-create`, (command) => this.createSandbox.handle(command), options),
      await this.bus.serve('tenant_create', `${prefix}-tenant-create`, (command) => this.admin.createTenant(command), options),
      await this.bus.serve('key_create', `${prefix}-key-create`, (command) => this.admin.createKey(command), options),
      await this.bus.serve('key_rotate', `${prefix}-key-rotate`, (command) => this.admin.rotateKey(command), options),
      await this.bus.serve('key_revoke', `${prefix}-key-revoke`, (command) => this.admin.revokeKey(command), options),
    ];
    this.logger.write('info', 'serving commands', { stream: this.bus.streamName, verbs: this.servers.map((s) => s.verb) });
  }

  /** Before the NATS connection drains: stop taking commands, finish those in hand, close the database. */
  async onModuleDestroy(): Promise<void> {
    const stopped = await Promise.allSettled(this.servers.map((server) => server.stop()));
    for (const result of stopped) if (result.status === 'rejected') this.logger.write('error', 'a command server failed', { error: String(result.reason) });
    this.servers = [];
    if (this.dataSource.isInitialized) await this.dataSource.destroy();
  }
}
