import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync } from 'node:fs';
import { chmod, chown, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';

/*
 * A PostgreSQL cluster of a test's own — `initdb` and `pg_ctl` on a temp directory and a free
 * loopback port — for tests that crash the database (`pg_ctl stop -m immediate`). Never the
 * machine's shared server on 5432, which others use. As root it runs as the `postgres` user
 * (PostgreSQL refuses root); otherwise as the test's own user.
 */

const run = promisify(execFile);

export interface OwnPostgresOptions {
  /** Server settings (`-c name=value`), e.g. `synchronous_commit: 'off'`. */
  settings?: Record<string, string>;
}

export interface OwnPostgres {
  /** A server-level URL (the role may create databases), as `createTestDatabase` takes it. */
  readonly url: string;
  readonly port: number;
  readonly dataDir: string;
  /** `pg_ctl stop -m <mode>`: `immediate` is a crash (no checkpoint; recovery from the WAL on start). */
  stop(mode?: 'immediate' | 'fast'): Promise<void>;
  /** `tcp: false`: only its Unix socket answers (`socketClient`), so nothing else connects first. */
  start(options?: { tcp?: boolean }): Promise<void>;
  /** A client (not yet connected) to `database` over the Unix socket. */
  socketClient(database: string): pg.Client;
  running(): Promise<boolean>;
  /** Stops it (immediately) and removes its files. */
  dispose(): Promise<void>;
}

/** The newest PostgreSQL under /usr/lib/postgresql (Debian's layout), or CAIRN_TEST_PG_BIN. */
function pgBin(): string {
  const given = process.env.CAIRN_TEST_PG_BIN;
  if (given !== undefined && given !== '') return given;
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root) ? readdirSync(root).filter((name) => /^\d+$/.test(name)) : [];
  const newest = versions.sort((a, b) => Number(a) - Number(b)).at(-1);
  if (newest === undefined || !existsSync(join(root, newest, 'bin', 'initdb'))) {
    throw new Error(`no PostgreSQL server binaries (initdb, pg_ctl) under ${root}: install Debian's postgresql, or set CAIRN_TEST_PG_BIN to their directory`);
  }
  return join(root, newest, 'bin');
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new Error('no free loopback port');
  return address.port;
}

export async function startOwnPostgres(options: OwnPostgresOptions = {}): Promise<OwnPostgres> {
  const bin = pgBin();
  const asRoot = process.getuid?.() === 0;
  const dir = await mkdtemp(join(tmpdir(), 'cairn-own-pg-'));
  const dataDir = join(dir, 'data');
  const port = await freePort();
  const password = randomBytes(12).toString('hex');
  const exec = (command: string, args: string[]) => (asRoot ? run('runuser', ['-u', 'postgres', '--', join(bin, command), ...args]) : run(join(bin, command), args));
  await writeFile(join(dir, 'pwfile'), `${password}\n`, { mode: 0o600 });
  // As root, everything belongs to `postgres`, which runs the server.
  const owner = asRoot ? { uid: Number((await run('id', ['-u', 'postgres'])).stdout.trim()), gid: Number((await run('id', ['-g', 'postgres'])).stdout.trim()) } : null;
  const own = async (path: string) => {
    if (owner !== null) await chown(path, owner.uid, owner.gid);
  };
  await own(dir);
  await own(join(dir, 'pwfile'));
  await chmod(dir, 0o700);
  await exec('initdb', ['-D', dataDir, '-U', 'cairn', '--auth=scram-sha-256', `--pwfile=${join(dir, 'pwfile')}`, '-E', 'UTF8', '--no-sync', '--no-instructions']);
  const settings: Record<string, string> = {
    listen_addresses: '127.0.0.1',
    port: String(port),
    unix_socket_directories: dir,
    fsync: 'on',
    ...options.settings,
  };
  await writeFile(
    join(dataDir, 'postgresql.auto.conf'),
    Object.entries(settings)
      .map(([key, value]) => `${key} = '${value.replace(/'/g, "''")}'`)
      .join('\n') + '\n',
  );
  await own(join(dataDir, 'postgresql.auto.conf'));
  const logFile = join(dir, 'postgres.log');
  const url = `postgres://cairn:${password}@127.0.0.1:${port}/postgres`;
  const running = async () => {
    const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 1_000 });
    try {
      await client.connect();
      await client.query('SELECT 1');
      return true;
    } catch {
      return false;
    } finally {
      await client.end().catch(() => undefined);
    }
  };
  const server: OwnPostgres = {
    url,
    port,
    dataDir,
    async start(startOptions = {}) {
      const tcp = startOptions.tcp ?? true;
      await exec('pg_ctl', ['-D', dataDir, '-l', logFile, '-w', '-t', '60', ...(tcp ? [] : ['-o', "-c listen_addresses=''"]), 'start']);
      if (tcp && !(await running())) throw new Error(`the test's PostgreSQL on ${port} started but does not answer (log ${logFile})`);
    },
    socketClient: (database) => new pg.Client({ host: dir, port, user: 'cairn', password, database }),
    async stop(mode = 'fast') {
      await exec('pg_ctl', ['-D', dataDir, '-m', mode, '-w', 'stop']);
    },
    running,
    async dispose() {
      await exec('pg_ctl', ['-D', dataDir, '-m', 'immediate', '-w', 'stop']).catch(() => undefined);
      await rm(dir, { recursive: true, force: true });
    },
  };
  try {
    await server.start();
  } catch (error) {
    await server.dispose();
    throw error;
  }
  return server;
}
