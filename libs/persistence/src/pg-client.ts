import type pg from 'pg';
import type { DataSource } from 'typeorm';

/**
 * Runs `work` on one pooled `pg` client of the data source: the projection hot paths use plain
 * SQL (unnest inserts, COPY) on the driver rather than the entity layer.
 */
export async function withPgClient<T>(dataSource: DataSource, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const runner = dataSource.createQueryRunner();
  try {
    const connection: unknown = await runner.connect();
    if (!isPgClient(connection)) throw new TypeError('the data source did not hand out a pg client');
    return await work(connection);
  } finally {
    await runner.release();
  }
}

export interface TransactionOptions {
  /**
   * false: COMMIT returns before the WAL reaches the disk (`synchronous_commit = off`, this
   * transaction only). An OS crash can then lose the last few transactions whole — never half of
   * one — which only state rebuilt from the log may accept (a projection and its position move
   * together, so the projector applies the lost ones again).
   */
  synchronousCommit?: boolean;
  /**
   * A statement without parameters run first, in the same round trip as BEGIN (and the
   * synchronous_commit setting): e.g. taking a transaction-scoped advisory lock.
   */
  first?: string;
}

/** BEGIN … COMMIT around `work`; any error rolls back and is rethrown. */
export async function inTransaction<T>(client: pg.PoolClient, work: () => Promise<T>, options: TransactionOptions = {}): Promise<T> {
  // One simple-protocol query: the statements before `work` cost one round trip, not three.
  const opening = ['BEGIN', ...(options.synchronousCommit === false ? ['SET LOCAL synchronous_commit = off'] : []), ...(options.first === undefined ? [] : [options.first])];
  try {
    await client.query(opening.join('; '));
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  }
  try {
    const result = await work();
    await client.query('COMMIT');
    return result;
  } catch (error) {
    // The rollback can itself fail on a broken connection; the first error is the one to report.
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  }
}

function isPgClient(value: unknown): value is pg.PoolClient {
  return typeof value === 'object' && value !== null && 'query' in value && typeof value.query === 'function' && 'release' in value;
}
