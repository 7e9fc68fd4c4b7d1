import { isCairnError } from '@cairn/contracts';
import { createTestDatabase } from '@cairn/testing';
import type { TestDatabase } from '@cairn/testing';
import { createServer } from 'node:net';
import type { AddressInfo, Server, Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDataSource, PROJECTIONS_MIGRATION_LOCK, runMigrations } from './data-source.js';
import { PG_CONNECT_TIMEOUT_MS, pgUnavailable } from './pg-bounds.js';
import { ProjectionNotices } from './projection-notices.js';

/** A loopback port of this test's own that accepts connections and never says a word. */
let silent: Server;
let silentPort = 0;
const accepted: Socket[] = [];
let db: TestDatabase;

beforeAll(async () => {
  silent = createServer((socket) => accepted.push(socket));
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  silentPort = (silent.address() as AddressInfo).port;
  db = await createTestDatabase('cairn_pgbounds');
});

afterAll(async () => {
  for (const socket of accepted) socket.destroy();
  await new Promise((resolve) => silent.close(resolve));
  await db?.drop();
});

describe('bounded waits on PostgreSQL', () => {
  it('a server that accepts and never answers: the pool gives up within its connect timeout, E_UNAVAILABLE naming why', async () => {
    const dataSource = createDataSource(`postgres://cairn:cairn@127.0.0.1:${silentPort}/nothing`, { poolSize: 1, bounds: { connectTimeoutMs: 400 } });
    const started = Date.now();
    const error = await dataSource.initialize().then(
      () => null,
      (e: unknown) => pgUnavailable(e, 'CAIRN_DATABASE_URL'),
    );
    const took = Date.now() - started;
    expect(accepted.length).toBeGreaterThan(0);
    expect(isCairnError(error) && error.code).toBe('E_UNAVAILABLE');
    expect(String((error as Error).message)).toMatch(/^PostgreSQL \(CAIRN_DATABASE_URL\) did not answer the connection in time: /);
    expect(took).toBeLessThan(3000);
  });

  it('the notices listener gives up its connect within the bound too: it opens not live (readers poll) and retries behind', async () => {
    const started = Date.now();
    const notices = await ProjectionNotices.open(`postgres://cairn:cairn@127.0.0.1:${silentPort}/nothing`);
    try {
      expect(Date.now() - started).toBeLessThan(PG_CONNECT_TIMEOUT_MS + 2000);
      expect(notices.live).toBe(false);
    } finally {
      await notices.close();
    }
  });

  it('a statement past its statement_timeout on the real server: cancelled by the server, E_UNAVAILABLE', async () => {
    const dataSource = createDataSource(db.url, { poolSize: 1, bounds: { statementTimeoutMs: 300 } });
    await dataSource.initialize();
    try {
      const started = Date.now();
      const error = await dataSource.query('SELECT pg_sleep(5)').then(
        () => null,
        (e: unknown) => pgUnavailable(e, 'the test'),
      );
      expect(Date.now() - started).toBeLessThan(3000);
      expect(isCairnError(error) && error.code).toBe('E_UNAVAILABLE');
      expect(String((error as Error).message)).toContain('PostgreSQL (the test) did not finish a statement in time (statement_timeout)');
      // The pool is still usable, and a quick statement is untouched.
      expect(await dataSource.query('SELECT 1 AS one')).toEqual([{ one: 1 }]);
      expect(await dataSource.query('SHOW statement_timeout')).toEqual([{ statement_timeout: '300ms' }]);
    } finally {
      await dataSource.destroy();
    }
  });

  it('waiting for another process’s migration lock is not bounded by the statement timeout', async () => {
    const holder = createDataSource(db.url, { poolSize: 2 });
    const migrating = createDataSource(db.url, { poolSize: 2, bounds: { statementTimeoutMs: 300 } });
    await holder.initialize();
    await migrating.initialize();
    const lock = holder.createQueryRunner();
    try {
      await lock.query('SELECT pg_advisory_lock($1, $2)', [1667328370, PROJECTIONS_MIGRATION_LOCK]);
      const ran = runMigrations(migrating);
      await new Promise((resolve) => setTimeout(resolve, 1000));
      await lock.query('SELECT pg_advisory_unlock($1, $2)', [1667328370, PROJECTIONS_MIGRATION_LOCK]);
      expect((await ran).length).toBeGreaterThan(0);
    } finally {
      await lock.release();
      await holder.destroy();
      await migrating.destroy();
    }
  });

  it('other failures are not made E_UNAVAILABLE', () => {
    const syntax = Object.assign(new Error('syntax error at or near "SELEC"'), { code: '42601' });
    expect(pgUnavailable(syntax, 'x')).toBe(syntax);
  });
});
