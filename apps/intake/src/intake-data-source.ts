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
    extra: { max: poolSize },
  });
}

// A session lock of intake's own (the projections use another), so intakes starting together migrate one at a time.
const MIGRATION_LOCK = '1667328370, 7';

/** Runs intake's pending migrations under an advisory lock; returns the names of those it ran. */
export async function runIntakeMigrations(dataSource: DataSource): Promise<string[]> {
  const lock = dataSource.createQueryRunner();
  try {
    await lock.query(`SELECT pg_advisory_lock(${MIGRATION_LOCK})`);
    try {
      const ran = await dataSource.runMigrations({ transaction: 'all' });
      return ran.map((migration) => migration.name);
    } finally {
      await lock.query(`SELECT pg_advisory_unlock(${MIGRATION_LOCK})`);
    }
  } finally {
    await lock.release();
  }
}
