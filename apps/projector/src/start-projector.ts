import { migrate } from '@cairn/persistence';
import type { INestApplicationContext, LoggerService, LogLevel } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type { ProjectorConfig } from './projector.config.js';
import { openProjectorConnections } from './projector.connections.js';
import { ProjectorModule } from './projector.module.js';
import { ProjectorService } from './projector.service.js';
import type { ProjectorStats } from './projector.service.js';

export interface RunningProjector {
  readonly app: INestApplicationContext;
  /** Settles when the projector stops consuming: resolves after `stop()`, rejects on a fatal error. */
  readonly done: Promise<void>;
  stats(): ProjectorStats;
  /** Drains: stops pulling, finishes the batch in hand, closes NATS and the database. */
  stop(): Promise<void>;
}

export interface StartProjectorOptions {
  logger?: LoggerService | LogLevel[] | false;
}

/**
 * Migrates the projections database, opens and checks NATS (stream, durable consumer) and the
 * database, then starts a Nest application context that consumes the evidence stream.
 */
export async function startProjector(config: ProjectorConfig, options: StartProjectorOptions = {}): Promise<RunningProjector> {
  await migrate(config.CAIRN_DATABASE_URL);
  const connections = await openProjectorConnections(config);
  let app: INestApplicationContext;
  try {
    app = await NestFactory.createApplicationContext(ProjectorModule.forRoot(config, connections), {
      logger: options.logger ?? ['log', 'warn', 'error', 'fatal'],
      abortOnError: false,
    });
  } catch (error) {
    // Bootstrap failed after the connections opened: Nest runs no shutdown hook then.
    await connections.close().catch(() => undefined);
    throw error;
  }
  const service = app.get(ProjectorService);
  let stopped: Promise<void> | null = null;
  return {
    app,
    done: service.done,
    stats: () => service.stats(),
    stop: () => (stopped ??= app.close()),
  };
}
