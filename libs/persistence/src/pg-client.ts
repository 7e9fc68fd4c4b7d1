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
   * true: COMMIT returns once the WAL is on disk (`synchronous_commit = on`, this transaction only),
   * whatever the server's default — for a commit something is acknowledged after (the projector acks
   * the stream messages it covers). false: it returns before (`off`): an OS crash, or a stop with
   * `-m immediate`, can then lose the last few transactions whole. Unset: the server's setting.
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
  const sync = options.synchronousCommit === undefined ? [] : [`SET LOCAL synchronous_commit = ${options.synchronousCommit ? 'on' : 'off'}`];
  const opening = ['BEGIN', ...sync, ...(options.first === undefined ? [] : [options.first])];
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
