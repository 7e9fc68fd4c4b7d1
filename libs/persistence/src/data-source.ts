import { DataSource } from 'typeorm';
import { boundedPgSettings } from './pg-bounds.js';
import type { PgBounds } from './pg-bounds.js';
import { EvidenceEventEntity } from './entities/evidence-event.entity.js';
import { PoisonEventEntity } from './entities/poison-event.entity.js';
import { ProjectionPositionEntity } from './entities/projection-position.entity.js';
import { RunEntity } from './entities/run.entity.js';
import { SandboxEntity } from './entities/sandbox.entity.js';
import { EvidenceProjections1796004095823 } from './migrations/1796004095823-evidence-projections.migration.js';
import { ReceiptAsJson1796007606211 } from './migrations/1796007606211-receipt-as-json.migration.js';
import { RunBudgetColumns1796300000000 } from './migrations/1796300000000-run-budget-columns.migration.js';
import { SandboxesProjection1796400000000 } from './migrations/1796400000000-sandboxes-projection.migration.js';
import { RunTraceId1796600000000 } from './migrations/1796600000000-run-trace-id.migration.js';
import { RunPlaced1796700000000 } from './migrations/1796700000000-run-placed.migration.js';

export const PERSISTENCE_ENTITIES = [EvidenceEventEntity, RunEntity, SandboxEntity, PoisonEventEntity, ProjectionPositionEntity];
export const PERSISTENCE_MIGRATIONS = [
  EvidenceProjections1796004095823,
  ReceiptAsJson1796007606211,
  RunBudgetColumns1796300000000,
  SandboxesProjection1796400000000,
  RunTraceId1796600000000,
  RunPlaced1796700000000,
];
export const MIGRATIONS_TABLE = 'cairn_migrations';

export interface DataSourceOptions {
  /** Connections in the pool; default 4. */
  poolSize?: number;
  /** Shown in pg_stat_activity. */
  applicationName?: string;
  /** Connect and statement timeouts (pg-bounds.ts); keepalive is always on. */
  bounds?: PgBounds;
}

/**
 * The one way to reach the projections database: entities and hand-written migrations, and
 * nothing automatic (no synchronize, no migrations on connect). Call `initialize()` on it.
 */
export function createDataSource(url: string, options: DataSourceOptions = {}): DataSource {
  return new DataSource({
    type: 'postgres',
    url,
    applicationName: options.applicationName ?? 'cairn',
    entities: PERSISTENCE_ENTITIES,
    migrations: PERSISTENCE_MIGRATIONS,
    migrationsTableName: MIGRATIONS_TABLE,
    migrationsTransactionMode: 'all',
    synchronize: false,
    migrationsRun: false,
    logging: ['error'],
    extra: { max: options.poolSize ?? 4, ...boundedPgSettings(options.bounds) },
  });
}

/** The advisory-lock namespace every Cairn migration set takes its own lock in. */
const MIGRATION_LOCK_NAMESPACE = 1667328370;
/** The projections' lock in that namespace (intake and the gateway use their own). */
export const PROJECTIONS_MIGRATION_LOCK = 2;

/**
 * Runs a data source's pending migrations under a session advisory lock (TypeORM takes none), so
 * processes starting together migrate one at a time; returns the names of those it ran. Each
 * migration set (projections, intake, gateway) passes its own `lockId`. Holds one pooled
 * connection for the lock while TypeORM migrates on another (pool size ≥ 2).
 */
export async function runMigrationsUnderLock(dataSource: DataSource, lockId: number): Promise<string[]> {
  const lock = dataSource.createQueryRunner();
  try {
    // Waiting for another process's migrations is not a hung server: unbounded, then the session's bound again.
    await lock.query('SET statement_timeout = 0');
    await lock.query('SELECT pg_advisory_lock($1, $2)', [MIGRATION_LOCK_NAMESPACE, lockId]);
    await lock.query('RESET statement_timeout');
    try {
      const ran = await dataSource.runMigrations({ transaction: 'all' });
      return ran.map((migration) => migration.name);
    } finally {
      await lock.query('SELECT pg_advisory_unlock($1, $2)', [MIGRATION_LOCK_NAMESPACE, lockId]);
    }
  } finally {
    await lock.release();
  }
}

/** Runs the projections' pending migrations; returns the names of those it ran. */
export function runMigrations(dataSource: DataSource): Promise<string[]> {
  return runMigrationsUnderLock(dataSource, PROJECTIONS_MIGRATION_LOCK);
}

/** Connects to `url`, brings its schema up to date and disconnects; returns the migrations it ran. */
export async function migrate(url: string): Promise<string[]> {
  // A migration may rewrite a large table: bounded to connect, not per statement.
  const dataSource = createDataSource(url, { poolSize: 2, applicationName: 'cairn-migrate', bounds: { statementTimeoutMs: 0 } });
  await dataSource.initialize();
  try {
    return await runMigrations(dataSource);
  } finally {
    await dataSource.destroy();
  }
}
