import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PG_SERVICES, PG_TABLES, pgRoleName } from '@cairn/config';
import type { PgService } from '@cairn/config';
import pg from 'pg';
import { testDatabaseUrl, testNatsUrl, uniqueName } from '@cairn/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCairn } from './cli.harness.js';
import { TestStack } from './stack.harness.js';

/*
 * PostgreSQL roles per service (docs/adr/0032): a stack whose tables were all the admin's (as every
 * stack before roles) is brought up; each service's role then connects with its own password and is
 * refused, by the server, what PG_TABLES does not grant it (42501 insufficient_privilege).
 */

let stack: TestStack;
const clients: pg.Client[] = [];
let database = '';
const runId = 'run_pgroles_before_roles';

/** A session as `service`'s role, with the password of its file under the stack's home. */
async function as(service: PgService, password?: string): Promise<pg.Client> {
  const url = new URL(stack.database.url);
  url.username = pgRoleName(database, service);
  url.password = encodeURIComponent(password ?? (await readFile(join(stack.home, 'pg', `${service}.password`), 'utf8')).trim());
  const client = new pg.Client({ connectionString: url.toString() });
  await client.connect();
  clients.push(client);
  return client;
}

/** The SQLSTATE the server answers `sql` with, or `ok`. */
async function attempt(client: pg.Client, sql: string): Promise<string> {
  try {
    await client.query(sql);
    return 'ok';
  } catch (error) {
    return (error as { code?: string }).code ?? String(error);
  }
}

beforeAll(async () => {
  stack = await TestStack.create('pg-roles');
  database = stack.database.name;
  // A stack from before roles: the projections made, and written, by the admin role.
  const { migrate } = await import('@cairn/persistence');
  await migrate(stack.database.url);
  const admin = new pg.Client({ connectionString: stack.database.url });
  await admin.connect();
  try {
    // A gateway role left as it must not be (CREATEDB, another password): the up brings it back to what it must be.
    await admin.query(`CREATE ROLE "${pgRoleName(database, 'gateway')}" LOGIN CREATEDB PASSWORD 'left-over'`);
    await admin.query(`INSERT INTO runs (run_id, tenant, state, created_at, updated_at, last_seq, head_hash, event_count, sealed, last_stream_seq) VALUES ($1, 'default', 'SUBMITTED', now(), now(), 1, $2, 1, false, 1)`, [runId, 'a'.repeat(64)]);
  } finally {
    await admin.end();
  }
  await stack.up();
}, 240_000);

afterAll(async () => {
  for (const client of clients) await client.end().catch(() => undefined);
  await stack?.dispose();
});

describe('PostgreSQL roles per service', () => {
  it('hands an old stack’s tables to their owners, rows kept, and every table of the database is in PG_TABLES', async () => {
    const projector = await as('projector');
    const owners = await projector.query<{ tablename: string; tableowner: string }>(`SELECT tablename, tableowner FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename`);
    expect(owners.rows.length).toBeGreaterThanOrEqual(Object.keys(PG_TABLES).length - 3);
    for (const { tablename, tableowner } of owners.rows) {
      const grant = PG_TABLES[tablename];
      expect(grant, `${tablename} has a row in PG_TABLES`).toBeDefined();
      expect(tableowner, tablename).toBe(pgRoleName(database, grant!.owner));
    }
    const kept = await projector.query<{ run_id: string }>('SELECT run_id FROM runs WHERE run_id = $1', [runId]);
    expect(kept.rows).toEqual([{ run_id: runId }]);
  });

  it('grants each role on each table exactly what PG_TABLES says, as the server reports it', async () => {
    const probe = await as('projector');
    const tables = (await probe.query<{ tablename: string }>(`SELECT tablename FROM pg_tables WHERE schemaname = 'public'`)).rows.map((r) => r.tablename);
    const mismatches: string[] = [];
    for (const service of PG_SERVICES) {
      for (const table of tables) {
        const grant = PG_TABLES[table]!;
        const granted = new Set<string>(grant.owner === service ? ['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE'] : [...(grant.reads.includes(service) ? ['SELECT'] : []), ...(grant.writes?.[service] ?? [])]);
        for (const privilege of ['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE']) {
          const { rows } = await probe.query<{ has: boolean }>('SELECT has_table_privilege($1, $2, $3) AS has', [pgRoleName(database, service), `public.${table}`, privilege]);
          if (rows[0]!.has !== granted.has(privilege)) mismatches.push(`${service} ${privilege} ${table}: server ${rows[0]!.has}`);
        }
      }
    }
    expect(mismatches).toEqual([]);
  });

  it('refuses the gateway a write to a projection, intake’s keys and the delivery queue; lets it read the views', async () => {
    const gateway = await as('gateway');
    expect(await attempt(gateway, 'SELECT count(*) FROM runs')).toBe('ok');
    expect(await attempt(gateway, `INSERT INTO runs (run_id, tenant, state, created_at, updated_at, last_seq, head_hash, event_count, sealed, last_stream_seq) VALUES ('run_x', 'default', 'SUBMITTED', now(), now(), 1, 'x', 1, false, 1)`)).toBe('42501');
    expect(await attempt(gateway, `UPDATE runs SET state = 'SEALED'`)).toBe('42501');
    expect(await attempt(gateway, 'DELETE FROM evidence_events')).toBe('42501');
    expect(await attempt(gateway, 'SELECT * FROM intake_idempotency')).toBe('42501');
    expect(await attempt(gateway, 'DELETE FROM webhook_deliveries')).toBe('42501');
    expect(await attempt(gateway, 'DROP TABLE runs')).toBe('42501');
  });

  it('refuses the gateway every write to the webhooks tables (registration and deletion are the webhooks service\'s commands), and lets it read them', async () => {
    const gateway = await as('gateway');
    expect(await attempt(gateway, 'SELECT count(*) FROM webhooks')).toBe('ok');
    expect(await attempt(gateway, 'SELECT count(*) FROM webhook_deliveries')).toBe('ok');
    expect(await attempt(gateway, `INSERT INTO webhooks (id, tenant, url, events, secret_sealed, key_id) VALUES ('wh_${'0'.repeat(24)}', 'default', 'https://93.184.215.14/', '{*}', '\\x00', '${'0'.repeat(16)}')`)).toBe('42501');
    expect(await attempt(gateway, 'DELETE FROM webhooks')).toBe('42501');
    expect(await attempt(gateway, 'UPDATE webhooks SET url = url')).toBe('42501');
    expect(await attempt(gateway, 'SELECT * FROM webhook_deletions')).toBe('42501');
    const webhooks = await as('webhooks');
    expect(await attempt(webhooks, 'SELECT count(*) FROM webhook_deletions')).toBe('ok');
  });

  it('refuses the projector intake’s idempotency table, the gateway’s keys and the webhooks’ queue', async () => {
    const projector = await as('projector');
    expect(await attempt(projector, 'SELECT * FROM intake_idempotency')).toBe('42501');
    expect(await attempt(projector, `INSERT INTO intake_idempotency (tenant, key_sha256, body_sha256, run_id) VALUES ('t', 'k', 'b', 'r')`)).toBe('42501');
    expect(await attempt(projector, 'SELECT * FROM api_keys')).toBe('42501');
    expect(await attempt(projector, 'SELECT * FROM webhook_deliveries')).toBe('42501');
    expect(await attempt(projector, `UPDATE runs SET tenant = tenant WHERE run_id = '${runId}'`)).toBe('ok');
  });

  it('refuses intake the runs (read or update) and every table but its own', async () => {
    const intake = await as('intake');
    expect(await attempt(intake, `UPDATE runs SET state = 'SEALED'`)).toBe('42501');
    expect(await attempt(intake, 'SELECT * FROM runs')).toBe('42501');
    expect(await attempt(intake, 'SELECT * FROM evidence_events')).toBe('42501');
    expect(await attempt(intake, 'SELECT * FROM webhooks')).toBe('42501');
    expect(await attempt(intake, 'SELECT count(*) FROM intake_idempotency')).toBe('ok');
  });

  it('refuses the webhooks service the projections and the gateway’s keys', async () => {
    const webhooks = await as('webhooks');
    expect(await attempt(webhooks, 'SELECT * FROM runs')).toBe('42501');
    expect(await attempt(webhooks, `UPDATE api_keys SET tenant = tenant`)).toBe('42501');
    expect(await attempt(webhooks, 'SELECT count(*) FROM webhook_deliveries')).toBe('ok');
  });

  it('gives no role a power over roles or databases, and refuses a wrong password', async () => {
    for (const service of PG_SERVICES) {
      const client = await as(service);
      expect(await attempt(client, `CREATE ROLE ${service}_intruder`), service).toBe('42501');
      expect(await attempt(client, `CREATE DATABASE ${service}_intruder`), service).toBe('42501');
      expect(await attempt(client, `ALTER ROLE ${pgRoleName(database, service)} SUPERUSER`), service).toBe('42501');
    }
    const refused = await as('gateway', 'not-the-password').then(
      () => 'connected',
      (error: unknown) => (error as { code?: string }).code,
    );
    expect(refused).toBe('28P01');
  });

  it('keeps the passwords in 0600 files and out of every service’s environment and command line; non-users get no URL', async () => {
    const passwords: string[] = [];
    for (const service of PG_SERVICES) {
      const file = join(stack.home, 'pg', `${service}.password`);
      expect((await stat(file)).mode & 0o777).toBe(0o600);
      passwords.push((await readFile(file, 'utf8')).trim());
    }
    const adminPassword = new URL(stack.database.url).password;
    const { services } = await stack.stackFile();
    expect(Object.keys(services).length).toBeGreaterThan(PG_SERVICES.length);
    for (const [service, { pid }] of Object.entries(services)) {
      const environ = (await readFile(`/proc/${pid}/environ`, 'utf8')).split('\0');
      const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8');
      for (const password of passwords) {
        expect(environ.join('\n').includes(password), `${service}: a role's password in its environment`).toBe(false);
        expect(cmdline.includes(password), `${service}: a password in its argv`).toBe(false);
      }
      const url = environ.find((line) => line.startsWith('CAIRN_DATABASE_URL='));
      if ((PG_SERVICES as readonly string[]).includes(service)) {
        const parsed = new URL(url!.slice('CAIRN_DATABASE_URL='.length));
        expect(decodeURIComponent(parsed.username), service).toBe(pgRoleName(database, service as PgService));
        expect(parsed.password, service).toBe('');
        expect(environ, service).toContain(`CAIRN_DATABASE_PASSWORD_FILE=${join(stack.home, 'pg', `${service}.password`)}`);
      } else {
        expect(url, `${service} has no database URL`).toBeUndefined();
      }
      if (adminPassword !== '') expect(environ.some((line) => line.startsWith('CAIRN_DATABASE_URL=') && line.includes(`:${adminPassword}@`)), service).toBe(false);
    }
  });

  it('brought a role that was there back to what it must be: no CREATEDB, the password of its file', async () => {
    const gateway = await as('gateway');
    const { rows } = await gateway.query<{ rolcreatedb: boolean; rolcreaterole: boolean }>('SELECT rolcreatedb, rolcreaterole FROM pg_roles WHERE rolname = current_user');
    expect(rows).toEqual([{ rolcreatedb: false, rolcreaterole: false }]);
    const stale = await as('gateway', 'left-over').then(
      () => 'connected',
      (error: unknown) => (error as { code?: string }).code,
    );
    expect(stale).toBe('28P01');
  });

  it('stops an up whose admin role may not make roles, E_UNAVAILABLE saying so, before any service starts or any role is made', async () => {
    const name = uniqueName('cairn_pgroles_weak').toLowerCase();
    const server = new pg.Client({ connectionString: testDatabaseUrl() });
    await server.connect();
    const home = await mkdtemp(join(tmpdir(), 'cairn-pgroles-weak-'));
    try {
      // An admin that owns its database but has no CREATEROLE (the machine's `cairn` makes both, and is a member to hand it over).
      await server.query(`CREATE ROLE "${name}" LOGIN PASSWORD 'weak-admin'`);
      await server.query(`GRANT "${name}" TO CURRENT_USER`);
      await server.query(`CREATE DATABASE "${name}" OWNER "${name}"`);
      const url = new URL(testDatabaseUrl());
      url.username = name;
      url.password = 'weak-admin';
      url.pathname = `/${name}`;
      const run = await runCairn(['up', '--no-setup', '--json', '--timeout', '30'], {
        CAIRN_HOME: home,
        CAIRN_STACK_ID: name.replace(/_/g, '-'),
        CAIRN_NATS_URL: testNatsUrl(),
        CAIRN_DATABASE_URL: url.toString(),
        CAIRN_GATEWAY_PORT: '0',
      });
      expect(run.code, run.stderr).toBe(1);
      const error = (JSON.parse(run.stdout) as { error: { code: string; message: string } }).error;
      expect(error.code).toBe('E_UNAVAILABLE');
      expect(error.message).toContain('CREATEROLE');
      expect(error.message).not.toContain('weak-admin');
      expect(await stat(join(home, 'stack.json')).catch(() => null)).toBeNull();
      const made = await server.query(`SELECT rolname FROM pg_roles WHERE rolname LIKE $1`, [`${name}\\_%`]);
      expect(made.rows).toEqual([]);
    } finally {
      await server.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`).catch(() => undefined);
      await server.query(`DROP ROLE IF EXISTS "${name}"`).catch(() => undefined);
      await server.end();
      await rm(home, { recursive: true, force: true });
    }
  });
});
