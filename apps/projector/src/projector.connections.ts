import { natsInboxPrefix } from '@cairn/config';
import { connectNats } from '@cairn/evidence-log';
import type { EvidenceLog } from '@cairn/evidence-log';
import { createDataSource, pgUnavailable } from '@cairn/persistence';
import type { Consumer } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import type { DataSource } from 'typeorm';
import { openEvidenceConsumer } from './evidence-consumer.adapter.js';
import type { ProjectorConfig } from './projector.config.js';

/** What the projector talks to, opened and checked together, closed together. */
export interface ProjectorConnections {
  readonly nc: NatsConnection;
  readonly consumer: Consumer;
  /** The evidence log on the same connection: what the projector reads back to fill a hole. */
  readonly log: EvidenceLog;
  readonly dataSource: DataSource;
  /** Drains NATS and closes the database pool; safe to call twice. */
  close(): Promise<void>;
}

/** Opens NATS (checking the stream and the durable consumer) and the database, or nothing. */
export async function openProjectorConnections(config: ProjectorConfig): Promise<ProjectorConnections> {
  const nc = await connectNats({
    servers: config.CAIRN_NATS_URL,
    name: 'cairn-projector',
    inboxPrefix: natsInboxPrefix('projector', ''),
    ...(config.CAIRN_NATS_CREDS_FILE === undefined ? {} : { credsFile: config.CAIRN_NATS_CREDS_FILE }),
  });
  const dataSource = createDataSource(config.CAIRN_DATABASE_URL, { applicationName: 'cairn-projector' });
  const close = async () => {
    if (!nc.isClosed()) await nc.drain();
    if (dataSource.isInitialized) await dataSource.destroy();
  };
  try {
    const { consumer, log } = await openEvidenceConsumer(nc, config);
    await dataSource.initialize().catch((error: unknown) => {
      throw pgUnavailable(error, 'CAIRN_DATABASE_URL');
    });
    return { nc, consumer, log, dataSource, close };
  } catch (error) {
    await close().catch(() => undefined);
    throw error;
  }
}
