import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase } from './infra.js';
import { startOwnPostgres } from './own-postgres.js';
import type { OwnPostgres } from './own-postgres.js';

let server: OwnPostgres;

beforeAll(async () => {
  server = await startOwnPostgres({ settings: { synchronous_commit: 'off' } });
});

afterAll(async () => {
  await server?.dispose();
});

describe('startOwnPostgres', () => {
  it('runs a PostgreSQL of the test’s own, on another port, with the settings asked for; a crash and a restart keep what was committed durably', async () => {
    expect(server.port).not.toBe(5432);
    const db = await createTestDatabase('cairn_own_pg', server.url);
    const pg = (await import('pg')).default;
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    expect((await client.query<{ s: string }>("SELECT current_setting('synchronous_commit') AS s")).rows[0]?.s).toBe('off');
    await client.query('CREATE TABLE t (n int)');
    await client.query('BEGIN; SET LOCAL synchronous_commit = on; INSERT INTO t VALUES (1); COMMIT');
    await client.end();

    await server.stop('immediate');
    expect(await server.running()).toBe(false);
    // Only its socket: nothing reaches it over TCP.
    await server.start({ tcp: false });
    expect(await server.running()).toBe(false);
    const overSocket = server.socketClient(db.name);
    await overSocket.connect();
    expect((await overSocket.query<{ n: number }>('SELECT count(*)::int AS n FROM t')).rows[0]?.n).toBe(1);
    await overSocket.end();
    await server.stop('fast');
    await server.start();
    expect(await server.running()).toBe(true);
    await db.drop();
  });
});
