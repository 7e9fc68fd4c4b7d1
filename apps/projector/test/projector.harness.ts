import 'reflect-metadata';
import { randomBytes } from 'node:crypto';
import { EvidenceLog } from '@cairn/evidence-log';
import { createDataSource } from '@cairn/persistence';
import { runLifecycleEvents, sandboxSessionEvents } from '@cairn/persistence/testing';
import type { FixtureEvent } from '@cairn/persistence/testing';
import { createTestDatabase, testNatsUrl, uniqueName } from '@cairn/testing';
import type { TestDatabase } from '@cairn/testing';
import { jetstreamManager } from '@nats-io/jetstream';
import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import type { DataSource } from 'typeorm';
import type { ProjectorConfig } from '../src/projector.config.js';

/**
 * One test's own world: its stream, subject prefix, durable name and database, all named with
 * `uniqueName`, and all removed by `dispose()`.
 */
export interface ProjectorWorld {
  readonly config: ProjectorConfig;
  readonly db: TestDatabase;
  readonly dataSource: DataSource;
  readonly log: EvidenceLog;
  readonly nc: NatsConnection;
  readonly js: JetStreamClient;
  readonly jsm: JetStreamManager;
  /** `<prefix>.<chain id>`: a chain's subject, before the type the log adds (`typedSubject`). */
  subject(chainId: string): string;
  position(): Promise<number>;
  /** Waits until the projections' position reaches `streamSeq`. */
  waitForPosition(streamSeq: number, timeoutMs?: number): Promise<void>;
  count(table: string): Promise<number>;
  /** The config as environment variables, for a projector process. */
  env(): Record<string, string>;
  dispose(): Promise<void>;
}

export async function createProjectorWorld(label: string, overrides: Partial<ProjectorConfig> = {}, options: { databaseServerUrl?: string } = {}): Promise<ProjectorWorld> {
  const db = await createTestDatabase(`cairn_${label}`, options.databaseServerUrl);
  const config: ProjectorConfig = {
    CAIRN_NATS_URL: testNatsUrl(),
    CAIRN_NATS_REPLICAS: 1,
    CAIRN_EVIDENCE_STREAM: uniqueName(`PROJ_${label}`),
    CAIRN_EVIDENCE_SUBJECT_PREFIX: uniqueName(`proj_${label}`).toLowerCase(),
    CAIRN_DATABASE_URL: db.url,
    CAIRN_PROJECTOR_DURABLE: uniqueName('projector'),
    CAIRN_PROJECTOR_BATCH_SIZE: 200,
    CAIRN_PROJECTOR_LINGER_MS: 10,
    CAIRN_PROJECTOR_ACK_WAIT_MS: 10_000,
    ...overrides,
  };
  const nc = await connect({ servers: config.CAIRN_NATS_URL });
  const jsm = await jetstreamManager(nc);
  const log = await EvidenceLog.fromConnection(nc, {
    servers: config.CAIRN_NATS_URL,
    stream: config.CAIRN_EVIDENCE_STREAM,
    subjectPrefix: config.CAIRN_EVIDENCE_SUBJECT_PREFIX,
  });
  const dataSource = createDataSource(db.url, { poolSize: 2 });
  await dataSource.initialize();

  const position = async () => {
    const exists = await dataSource.query<{ t: string | null }[]>(`SELECT to_regclass('projection_positions')::text AS t`);
    if (exists[0]?.t == null) return 0;
    const rows = await dataSource.query<{ last: number }[]>('SELECT last_stream_seq::float8 AS last FROM projection_positions');
    return rows[0]?.last ?? 0;
  };
  return {
    config,
    db,
    dataSource,
    log,
    nc,
    js: jsm.jetstream(),
    jsm,
    subject: (chainId) => `${config.CAIRN_EVIDENCE_SUBJECT_PREFIX}.${chainId}`,
    position,
    async waitForPosition(streamSeq, timeoutMs = 30_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        // A database that is down (a crash test) answers later.
        const now = await position().catch(() => -1);
        if (now >= streamSeq) return;
        if (Date.now() > deadline) throw new Error(`the projections reached position ${now}, not ${streamSeq}, within ${timeoutMs} ms`);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    },
    async count(table) {
      const rows = await dataSource.query<{ n: number }[]>(`SELECT count(*)::int AS n FROM ${table}`);
      return rows[0]?.n ?? 0;
    },
    env: () => Object.fromEntries(Object.entries(config).map(([key, value]) => [key, String(value)])),
    async dispose() {
      await jsm.consumers.delete(config.CAIRN_EVIDENCE_STREAM, config.CAIRN_PROJECTOR_DURABLE).catch(() => false);
      await jsm.streams.delete(config.CAIRN_EVIDENCE_STREAM).catch(() => false);
      await log.close();
      await nc.close();
      await dataSource.destroy();
      await db.drop();
    },
  };
}

/**
 * Appends each chain's events in order through the evidence log, chains side by side;
 * `pauseMs` between a chain's events stretches the stream out over time.
 */
export async function appendChains(
  log: EvidenceLog,
  chains: FixtureChainOfEvents[],
  tenant = 'acme',
  pauseMs = 0,
): Promise<number> {
  let appended = 0;
  await Promise.all(
    chains.map(async ({ id, events, traceId }) => {
      for (const [i, event] of events.entries()) {
        // Each receipt carries a span of the chain's trace in its headers, as a traced service's appends do.
        const trace = traceId === undefined ? {} : { traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-01` };
        await log.append(id, { type: event.type, actor: event.actor, tenant, causation: i === 0 ? null : `${id}:${i}`, key: String(i), fields: event.fields, ...trace });
        appended += 1;
        if (pauseMs > 0) await new Promise((resolve) => setTimeout(resolve, pauseMs));
      }
    }),
  );
  return appended;
}

/** A chain's events to append, and the trace its messages carry (none: appended untraced). */
export interface FixtureChainOfEvents {
  id: string;
  events: FixtureEvent[];
  traceId?: string;
}

/**
 * `runs` run chains and `sandboxes` sandbox chains, named uniquely. Two runs in three, and every
 * sandbox, are appended traced (each its own trace id); the third run is appended untraced.
 */
export function mixedChains(runs: number, sandboxes: number, steps = 2): FixtureChainOfEvents[] {
  const run = Array.from({ length: runs }, () => uniqueName('run'));
  const sbx = Array.from({ length: sandboxes }, () => uniqueName('sbx'));
  const traced = (i: number) => (i % 3 === 2 ? {} : { traceId: randomBytes(16).toString('hex') });
  return [
    ...run.map((id, i) => ({ id, events: runLifecycleEvents(id, steps, i % 6).slice(0, 6 + (i % 9)), ...traced(i) })),
    ...sbx.map((id) => ({ id, events: sandboxSessionEvents(id), traceId: randomBytes(16).toString('hex') })),
  ];
}

