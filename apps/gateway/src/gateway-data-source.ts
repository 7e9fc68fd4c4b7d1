import { boundedPgSettings, runMigrationsUnderLock } from '@cairn/persistence';
import { DataSource } from 'typeorm';
import { ApiKeyEntity } from './auth/api-key.entity.js';
import { TenantEntity } from './auth/tenant.entity.js';
import { GatewayApiKeys1796200000000 } from './migrations/1796200000000-gateway-api-keys.migration.js';
import { GatewaySecretsScope1796200000001 } from './migrations/1796200000001-gateway-secrets-scope.migration.js';
import { GatewaySecretsUseScope1796200000002 } from './migrations/1796200000002-gateway-secrets-use-scope.migration.js';
import { GatewayKeyAdmin1796200000003 } from './migrations/1796200000003-gateway-key-admin.migration.js';
import { GatewayMetricsScope1796200000004 } from './migrations/1796200000004-gateway-metrics-scope.migration.js';

/** The gateway's own migrations table, so it never meets the projections' or intake's migrations. */
export const GATEWAY_MIGRATIONS_TABLE = 'gateway_migrations';
export const GATEWAY_MIGRATIONS = [GatewayApiKeys1796200000000, GatewaySecretsScope1796200000001, GatewaySecretsUseScope1796200000002, GatewayKeyAdmin1796200000003, GatewayMetricsScope1796200000004];

/**
 * The gateway's connection to PostgreSQL: its own tables (`api_keys`, `tenants`, by hand-written migration)
 * and read-only SQL over the projections (`runs`, `evidence_events`). Nothing automatic.
 */
export function createGatewayDataSource(url: string, poolSize = 8): DataSource {
  return new DataSource({
    type: 'postgres',
    url,
    applicationName: 'cairn-gateway',
    entities: [ApiKeyEntity, TenantEntity],
    migrations: GATEWAY_MIGRATIONS,
    migrationsTableName: GATEWAY_MIGRATIONS_TABLE,
    migrationsTransactionMode: 'all',
    synchronize: false,
    migrationsRun: false,
    // Failures surface as CairnErrors in the JSON log; TypeORM's own lines would echo SQL parameters.
    logging: false,
    extra: { max: poolSize, ...boundedPgSettings() },
  });
}

/** The gateway's own migration lock (the projections and the other services use others). */
const MIGRATION_LOCK_ID = 11;

/** Runs the gateway's pending migrations under its advisory lock; returns the names of those it ran. */
export function runGatewayMigrations(dataSource: DataSource): Promise<string[]> {
  return runMigrationsUnderLock(dataSource, MIGRATION_LOCK_ID);
}

/** Connects to `url`, brings the gateway's table up to date and disconnects (the CLI's `cairn up`). */
export async function migrateGateway(url: string): Promise<string[]> {
  const dataSource = createGatewayDataSource(url, 2);
  await dataSource.initialize();
  try {
    return await runGatewayMigrations(dataSource);
  } finally {
    await dataSource.destroy();
  }
}
