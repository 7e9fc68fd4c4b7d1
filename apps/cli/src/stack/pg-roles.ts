import { createHash, createHmac, pbkdf2Sync, randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { PG_FUNCTIONS, PG_SERVICES, PG_TABLES, pgRoleName } from '@cairn/config';
import type { PgService } from '@cairn/config';
import { CairnError } from '@cairn/contracts';
import pg from 'pg';

/*
 * PostgreSQL roles per service (docs/adr/0032): `cairn up` makes `<database>_<service>` for each
 * service of PG_SERVICES with a password generated once into `<home>/pg/<service>.password` (0600),
 * makes its own (admin) role a member of each (so `cairn backup`, `restore` and `projections
 * rebuild` keep working), hands every existing table to the owner PG_TABLES names and grants
 * exactly what the table says — on every up, so an old stack's tables (all the admin's) move over.
 */

/** Where a stack keeps its roles' password files. */
export function pgRolesDirOf(home: string): string {
  return join(home, 'pg');
}

export function pgPasswordFileOf(home: string, service: PgService): string {
  return join(pgRolesDirOf(home), `${service}.password`);
}

/** The database a URL names (its path), for the roles' names. */
export function databaseOf(url: string): string {
  const name = decodeURIComponent(new URL(url).pathname.replace(/^\//, ''));
  if (!/^[A-Za-z0-9_-]{1,63}$/.test(name)) throw new CairnError('E_INPUT', 'invalid configuration: CAIRN_DATABASE_URL: names no database of [A-Za-z0-9_-] (the roles are named for it)', { variables: ['CAIRN_DATABASE_URL'] });
  return name;
}

/** The URL a service is handed: the admin's host, port, database and options, the service's role, no password. */
export function serviceDatabaseUrl(adminUrl: string, service: PgService): string {
  const url = new URL(adminUrl);
  url.username = encodeURIComponent(pgRoleName(databaseOf(adminUrl), service));
  url.password = '';
  return url.toString();
}

/** The same URL with its password in (in memory only: for the migrations `cairn up` runs as the owners). */
export function withPassword(url: string, password: string): string {
  const parsed = new URL(url);
  parsed.password = encodeURIComponent(password);
  return parsed.toString();
}

/**
 * A SCRAM-SHA-256 verifier of `password` (RFC 7677, as PostgreSQL stores it): sent instead of the
 * password, so the password itself never crosses the wire nor reaches a server log.
 */
export function scramVerifier(password: string, salt: Buffer = randomBytes(16), iterations = 4096): string {
  const salted = pbkdf2Sync(password.normalize('NFKC'), salt, iterations, 32, 'sha256');
  const clientKey = createHmac('sha256', salted).update('Client Key').digest();
  const storedKey = createHash('sha256').update(clientKey).digest();
  const serverKey = createHmac('sha256', salted).update('Server Key').digest();
  return `SCRAM-SHA-256$${iterations}:${salt.toString('base64')}$${storedKey.toString('base64')}:${serverKey.toString('base64')}`;
}

const quoteIdent = (name: string) => `"${name.replace(/"/g, '""')}"`;
const quoteLiteral = (text: string) => `'${text.replace(/'/g, "''")}'`;

/** One statement per grant of PG_TABLES for a table that exists (pure: `roles` maps services to role names). */
export function tableGrantStatements(table: string, currentOwner: string, roles: Record<PgService, string>): string[] {
  const grant = PG_TABLES[table];
  if (grant === undefined) return [];
  const owner = roles[grant.owner];
  const others = PG_SERVICES.filter((s) => s !== grant.owner).map((s) => quoteIdent(roles[s]));
  const t = `public.${quoteIdent(table)}`;
  return [
    ...(currentOwner === owner ? [] : [`ALTER TABLE ${t} OWNER TO ${quoteIdent(owner)}`]),
    `REVOKE ALL ON TABLE ${t} FROM PUBLIC, ${others.join(', ')}`,
    ...(grant.reads.length === 0 ? [] : [`GRANT SELECT ON TABLE ${t} TO ${grant.reads.map((s) => quoteIdent(roles[s])).join(', ')}`]),
    ...Object.entries(grant.writes ?? {}).flatMap(([service, writes]) =>
      writes === undefined || writes.length === 0 ? [] : [`GRANT ${writes.join(', ')} ON TABLE ${t} TO ${quoteIdent(roles[service as PgService])}`],
    ),
  ];
}

export interface PgGrantsOutcome {
  /** Tables whose owner changed (an upgraded stack's, or one a restore made). */
  transferred: string[];
  /** Tables of the public schema PG_TABLES does not name: left as they are, and told. */
  unknown: string[];
}

function rolesOf(database: string): Record<PgService, string> {
  return Object.fromEntries(PG_SERVICES.map((s) => [s, pgRoleName(database, s)])) as Record<PgService, string>;
}

/** The advisory lock `cairn up` takes while it changes roles and grants (one up at a time per server). */
const ROLES_LOCK: [number, number] = [1667328370, 32];

async function inAdminTransaction<T>(adminUrl: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: adminUrl, connectionTimeoutMillis: 10_000, application_name: 'cairn-up-roles' });
  await client.connect();
  try {
    await client.query('BEGIN');
    try {
      await client.query('SELECT pg_advisory_xact_lock($1, $2)', ROLES_LOCK);
      const result = await work(client);
      await client.query('COMMIT');
      return result;
    } catch (error) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw error;
    }
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** PostgreSQL's refusal to make roles, as an error that says what the admin role lacks. */
function rolesError(error: unknown): unknown {
  if (typeof error === 'object' && error !== null && 'code' in error && error.code === '42501') {
    const message = error instanceof Error ? error.message : 'insufficient privilege';
    return new CairnError(
      'E_UNAVAILABLE',
      `cannot make the services' PostgreSQL roles (${message}): the role of CAIRN_DATABASE_URL needs CREATEROLE and must own the database (\`ALTER ROLE <it> CREATEROLE\` as a superuser; docs/operations.md)`,
      { sqlstate: '42501' },
    );
  }
  return error;
}

/** Hands each table of PG_TABLES that exists to its owner and grants what it says; one transaction. */
export async function applyPgGrants(adminUrl: string): Promise<PgGrantsOutcome> {
  const roles = rolesOf(databaseOf(adminUrl));
  try {
    return await inAdminTransaction(adminUrl, async (client) => {
      const tables = await client.query<{ tablename: string; tableowner: string }>(`SELECT tablename, tableowner FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename`);
      const transferred: string[] = [];
      const unknown: string[] = [];
      for (const { tablename, tableowner } of tables.rows) {
        const grant = PG_TABLES[tablename];
        if (grant === undefined) {
          unknown.push(tablename);
          continue;
        }
        if (tableowner !== roles[grant.owner]) transferred.push(tablename);
        for (const statement of tableGrantStatements(tablename, tableowner, roles)) await client.query(statement);
      }
      const functions = await client.query<{ proname: string; owner: string; args: string }>(
        `SELECT p.proname, pg_get_userbyid(p.proowner) AS owner, pg_get_function_identity_arguments(p.oid) AS args FROM pg_proc p WHERE p.pronamespace = 'public'::regnamespace`,
      );
      for (const { proname, owner, args } of functions.rows) {
        const wanted = PG_FUNCTIONS[proname];
        if (wanted !== undefined && owner !== roles[wanted]) await client.query(`ALTER FUNCTION public.${quoteIdent(proname)}(${args}) OWNER TO ${quoteIdent(roles[wanted])}`);
      }
      return { transferred, unknown };
    });
  } catch (error) {
    throw rolesError(error);
  }
}

export interface StackPgRoles {
  /** Per service: its role, the URL it is handed (no password) and its password file. */
  services: Record<PgService, { role: string; url: string; passwordFile: string }>;
  /** Password files made by this call (the roles of a new stack, or one upgraded now). */
  created: PgService[];
  /** In memory only, for the migrations run as the owners; never logged or printed. */
  passwords: Record<PgService, string>;
}

/** Where each role's password is: `cairn up`'s `<home>/pg/<service>.password` (made here), or files another made (`cairn init-keys`). */
export interface PgPasswordFiles {
  fileOf: (service: PgService) => string;
  /** Make a file that is absent (0600, a new password), or refuse (E_INPUT naming it). */
  create: boolean;
}

export function stackPasswordFiles(home: string): PgPasswordFiles {
  return { fileOf: (service) => pgPasswordFileOf(home, service), create: true };
}

async function readPasswords(files: PgPasswordFiles): Promise<{ passwords: Record<PgService, string>; created: PgService[] }> {
  const { createKeyFileOnce, readKeyFileText } = await import('@cairn/secret-store');
  const created: PgService[] = [];
  const passwords = {} as Record<PgService, string>;
  for (const service of PG_SERVICES) {
    const file = files.fileOf(service);
    if (files.create && (await createKeyFileOnce(file, 'database password file', () => `${randomBytes(24).toString('base64url')}\n`))) created.push(service);
    const password = (await readKeyFileText(file, 'database password file', { private: true })).replace(/\r?\n$/, '');
    if (password === '' || /[\r\n]/.test(password)) throw new CairnError('E_INPUT', `the database password file ${file} must hold one line, the password`, { path: file });
    passwords[service] = password;
  }
  return { passwords, created };
}

/**
 * Makes (or brings back to what they must be) the roles of the stack's database: LOGIN and nothing
 * else (no superuser, no CREATEDB, no CREATEROLE), the password of its file, the admin a member,
 * USAGE and CREATE on the public schema (each owns tables and runs their migrations).
 */
export async function ensureStackPgRoles(adminUrl: string, files: PgPasswordFiles): Promise<StackPgRoles> {
  const database = databaseOf(adminUrl);
  const { passwords, created } = await readPasswords(files);
  const roles = rolesOf(database);
  try {
    await inAdminTransaction(adminUrl, async (client) => {
      for (const service of PG_SERVICES) {
        const role = quoteIdent(roles[service]);
        const existing = await client.query<{ rolsuper: boolean; rolreplication: boolean; rolbypassrls: boolean }>('SELECT rolsuper, rolreplication, rolbypassrls FROM pg_roles WHERE rolname = $1', [roles[service]]);
        const found = existing.rows[0];
        // Only a superuser may change these three: a role that has one is not ours to fix, and stops the up.
        if (found !== undefined && (found.rolsuper || found.rolreplication || found.rolbypassrls)) {
          throw new CairnError('E_CONFLICT', `the role ${roles[service]} exists with SUPERUSER, REPLICATION or BYPASSRLS; a service's role has none of them (drop or alter it as a superuser)`, { role: roles[service] });
        }
        const attributes = `LOGIN NOCREATEDB NOCREATEROLE INHERIT PASSWORD ${quoteLiteral(scramVerifier(passwords[service]))}`;
        await client.query(found === undefined ? `CREATE ROLE ${role} NOSUPERUSER NOREPLICATION NOBYPASSRLS ${attributes}` : `ALTER ROLE ${role} ${attributes}`);
        const member = await client.query('SELECT 1 FROM pg_auth_members m JOIN pg_roles r ON r.oid = m.roleid WHERE r.rolname = $1 AND m.member = (SELECT oid FROM pg_roles WHERE rolname = current_user)', [roles[service]]);
        if (member.rowCount === 0) await client.query(`GRANT ${role} TO CURRENT_USER`);
        await client.query(`GRANT USAGE, CREATE ON SCHEMA public TO ${role}`);
      }
    });
  } catch (error) {
    throw rolesError(error);
  }
  const services = Object.fromEntries(
    PG_SERVICES.map((service) => [service, { role: roles[service], url: serviceDatabaseUrl(adminUrl, service), passwordFile: files.fileOf(service) }]),
  ) as StackPgRoles['services'];
  return { services, created, passwords };
}

export interface PreparedDatabase {
  roles: StackPgRoles;
  /** The projections' migrations run now. */
  applied: string[];
  transferred: string[];
  unknown: string[];
}

/**
 * Everything a stack's database needs before its services start (`cairn up`, `cairn db-roles` for
 * compose and Kubernetes): the roles, the existing tables handed to their owners, the migration sets
 * two services open run as their owners (the projections as the projector, the webhook store as the
 * webhooks service), and what those made granted.
 */
export async function prepareStackDatabase(adminUrl: string, files: PgPasswordFiles): Promise<PreparedDatabase> {
  const roles = await ensureStackPgRoles(adminUrl, files);
  const { transferred } = await applyPgGrants(adminUrl);
  const { migrate } = await import('@cairn/persistence');
  const applied = await migrate(withPassword(roles.services.projector.url, roles.passwords.projector));
  const { WebhookStore } = await import('@cairn/webhooks');
  await (await WebhookStore.open({ url: withPassword(roles.services.webhooks.url, roles.passwords.webhooks), applicationName: 'cairn-migrate' })).close();
  const { unknown } = await applyPgGrants(adminUrl);
  return { roles, applied, transferred, unknown };
}

/** The stack configuration's note that its services have roles of their own: the roles' directory. */
export const ROLES_DIR_VARIABLE = 'CAIRN_DATABASE_ROLES_DIR';

/**
 * What a service's environment says about PostgreSQL on a stack with roles: its own role's URL and
 * password file for a service of PG_SERVICES, nothing at all for the others (null: a stack started
 * before roles, whose services keep the stack's URL).
 */
export function serviceDatabaseEnv(config: Record<string, string>, service: string): Record<string, string> | null {
  const dir = config[ROLES_DIR_VARIABLE];
  const adminUrl = config.CAIRN_DATABASE_URL;
  if (dir === undefined || adminUrl === undefined) return null;
  if (!(PG_SERVICES as readonly string[]).includes(service)) return {};
  const pgService = service as PgService;
  return { CAIRN_DATABASE_URL: serviceDatabaseUrl(adminUrl, pgService), CAIRN_DATABASE_PASSWORD_FILE: join(dir, `${pgService}.password`) };
}
