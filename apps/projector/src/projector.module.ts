import { ProjectionWriter } from '@cairn/persistence';
import { Inject, Injectable, Module } from '@nestjs/common';
import type { DynamicModule, OnApplicationShutdown } from '@nestjs/common';
import { DataSource } from 'typeorm';
import type { ProjectorConfig } from './projector.config.js';
import { PROJECTOR_CONFIG } from './projector.config.js';
import type { ProjectorConnections } from './projector.connections.js';
import { ProjectorService } from './projector.service.js';
import { EVIDENCE_CONSUMER, EVIDENCE_SOURCE, PROJECTOR_CONNECTIONS } from './projector.tokens.js';

/** Closes the connections after every other shutdown hook (the consumer drains first). */
@Injectable()
class ConnectionsCloser implements OnApplicationShutdown {
  constructor(@Inject(PROJECTOR_CONNECTIONS) private readonly connections: ProjectorConnections) {}

  onApplicationShutdown(): Promise<void> {
    return this.connections.close();
  }
}

/**
 * The projector: a service over the projection writer, fed by the durable consumer. The
 * connections are opened (and checked) before the module is built, so a failure at boot
 * leaves nothing open; the module closes them on shutdown.
 */
@Module({})
export class ProjectorModule {
  static forRoot(config: ProjectorConfig, connections: ProjectorConnections): DynamicModule {
    return {
      module: ProjectorModule,
      providers: [
        { provide: PROJECTOR_CONFIG, useValue: config },
        { provide: PROJECTOR_CONNECTIONS, useValue: connections },
        { provide: DataSource, useValue: connections.dataSource },
        { provide: EVIDENCE_CONSUMER, useValue: connections.consumer },
        { provide: EVIDENCE_SOURCE, useValue: connections.log },
        {
          provide: ProjectionWriter,
          useFactory: (dataSource: DataSource) =>
            new ProjectionWriter(dataSource, { stream: config.CAIRN_EVIDENCE_STREAM, subjectPrefix: config.CAIRN_EVIDENCE_SUBJECT_PREFIX }),
          inject: [DataSource],
        },
        ProjectorService,
        ConnectionsCloser,
      ],
    };
  }
}
