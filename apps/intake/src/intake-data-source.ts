import { boundedPgSettings, runMigrationsUnderLock } from '@cairn/persistence';
import { DataSource } from 'typeorm';
import { IntakeIdempotencyEntity } from './intake-idempotency.entity.js';
import { IntakeIdempotency1796100000000 } from './migrations/1796100000000-intake-idempotency.migration.js';

/** Intake's own migrations table, so it never meets the projections' migrations in a shared database. */
export const INTAKE_MIGRATIONS_TABLE = 'intake_migrations';
export const INTAKE_MIGRATIONS = [IntakeIdempotency1796100000000];

/** Intake's database: its entity and hand-written migrations, nothing automatic. Call `initialize()`. */
export function createIntakeDataSource(url: string, poolSize = 4): DataSource {
  return new DataSource({
    type: 'postgres',
    url,
    applicationName: 'cairn-intake',
    entities: [IntakeIdempotencyEntity],
    migrations: INTAKE_MIGRATIONS,
    migrationsTableName: INTAKE_MIGRATIONS_TABLE,
    migrationsTransactionMode: 'all',
    synchronize: false,
    migrationsRun: false,
    logging: ['error'],
    extra: { max: poolSize, ...boundedPgSettings() },
  });
}

/** The intake's own migration lock (the projections and the other services use others). */
const MIGRATION_LOCK_ID = 7;

/** Runs the intake's pending migrations under its advisory lock; returns the names of those it ran. */
export function runIntakeMigrations(dataSource: DataSource): Promise<string[]> {
  return runMigrationsUnderLock(dataSource, MIGRATION_LOCK_ID);
}
