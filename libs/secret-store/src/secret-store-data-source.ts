import { boundedPgSettings, runMigrationsUnderLock } from '@cairn/persistence';
import { DataSource } from 'typeorm';
import { SecretStore1796300000000 } from './migrations/1796300000000-secret-store.migration.js';
import { SecretGrants1796500000000 } from './migrations/1796500000000-secret-grants.migration.js';
import { SecretGrantEntity } from './secret-grant.entity.js';
import { SecretEntity } from './secret.entity.js';

/** The store's own migrations table, so it never meets the projections', intake's or the gateway's. */
export const SECRET_STORE_MIGRATIONS_TABLE = 'secret_store_migrations';
export const SECRET_STORE_MIGRATIONS = [SecretStore1796300000000, SecretGrants1796500000000];

/** The secret store's connection: its entity and hand-written migration, nothing automatic. */
export function createSecretStoreDataSource(url: string, options: { poolSize?: number; applicationName?: string } = {}): DataSource {
  return new DataSource({
    type: 'postgres',
    url,
    applicationName: options.applicationName ?? 'cairn-secret-store',
    entities: [SecretEntity, SecretGrantEntity],
    migrations: SECRET_STORE_MIGRATIONS,
    migrationsTableName: SECRET_STORE_MIGRATIONS_TABLE,
    migrationsTransactionMode: 'all',
    synchronize: false,
    migrationsRun: false,
    // Parameters may be sealed values; TypeORM's own query log would print them.
    logging: false,
    extra: { max: options.poolSize ?? 2, ...boundedPgSettings() },
  });
}

/** The store's own migration lock (the projections, intake and the gateway use others). */
const MIGRATION_LOCK_ID = 13;

/** Runs the store's pending migrations under its advisory lock; returns the names of those it ran. */
export function runSecretStoreMigrations(dataSource: DataSource): Promise<string[]> {
  return runMigrationsUnderLock(dataSource, MIGRATION_LOCK_ID);
}
