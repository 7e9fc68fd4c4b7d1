import { runMigrationsUnderLock } from '@cairn/persistence';
import { DataSource } from 'typeorm';
import { WebhookStore1796400000000 } from './migrations/1796400000000-webhook-store.migration.js';
import { WebhookDeletions1796400000001 } from './migrations/1796400000001-webhook-deletions.migration.js';

/** The store's own migrations table, so it never meets the projections', intake's, the gateway's or the secret store's. */
export const WEBHOOK_STORE_MIGRATIONS_TABLE = 'webhook_store_migrations';
export const WEBHOOK_STORE_MIGRATIONS = [WebhookStore1796400000000, WebhookDeletions1796400000001];

/** The webhook store's connection: plain SQL and its hand-written migration, nothing automatic. */
export function createWebhookStoreDataSource(url: string, options: { poolSize?: number; applicationName?: string } = {}): DataSource {
  return new DataSource({
    type: 'postgres',
    url,
    applicationName: options.applicationName ?? 'cairn-webhook-store',
    entities: [],
    migrations: WEBHOOK_STORE_MIGRATIONS,
    migrationsTableName: WEBHOOK_STORE_MIGRATIONS_TABLE,
    migrationsTransactionMode: 'all',
    synchronize: false,
    migrationsRun: false,
    // Parameters include sealed secrets and payloads; TypeORM's own query log would print them.
    logging: false,
    extra: { max: options.poolSize ?? 2 },
  });
}

/** The store's own migration lock (7 intake, 11 gateway, 13 secret store, 2 projections). */
const MIGRATION_LOCK_ID = 17;

export function runWebhookStoreMigrations(dataSource: DataSource): Promise<string[]> {
  return runMigrationsUnderLock(dataSource, MIGRATION_LOCK_ID);
}
