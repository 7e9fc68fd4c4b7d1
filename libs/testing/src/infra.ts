import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { PG_SERVICES, pgRoleName } from '@cairn/config';

/**
 * Helpers for integration tests on the real NATS and PostgreSQL. Tests that run in parallel
 * (and helpers sharing this machine) must never collide: every test names its own stream,
 * subjects, database and container labels with `uniqueName`.
 */
export function uniqueName(prefix: string): string {
  return `${prefix}_${Date.now().toString(36)}_${randomBytes(4).toString('hex')}`;
}

export function testNatsUrl(): string {
  return process.env.CAIRN_TEST_NATS_URL ?? 'nats://127.0.0.1:4222';
}

/** The server-level URL tests use to create their own databases (the role needs CREATEDB). */
export function testDatabaseUrl(): string {
  return process.env.CAIRN_TEST_DATABASE_URL ?? 'postgres://cairn:cairn@127.0.0.1:5432/cairn';
}

export interface TestDatabase {
  name: string;
  url: string;
  drop(): Promise<void>;
}

/**
 * Creates an empty database of the test's own; `drop()` removes it (and ends its sessions). On the
 * machine's server, or on the one `serverUrl` names (a test's own, `startOwnPostgres`).
 */
export async function createTestDatabase(prefix = 'cairn_test', serverUrl: string = testDatabaseUrl()): Promise<TestDatabase> {
  const name = uniqueName(prefix).toLowerCase();
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE "${name}"`);
  } finally {
    await admin.end();
  }
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return {
    name,
    url: url.toString(),
    async drop() {
      const client = new pg.Client({ connectionString: serverUrl });
      await client.connect();
      try {
        await client.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
        // The roles `cairn up` made for it (ADR 0032): the server's, so they outlive the database unless dropped.
        for (const service of PG_SERVICES) await client.query(`DROP ROLE IF EXISTS "${pgRoleName(name, service)}"`);
      } finally {
        await client.end();
      }
    },
  };
}
