import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { createServer, connect as connectTcp } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';

/*
 * What a benchmark needs to count Cairn's own CPU per run: a NATS server of its own (the pinned
 * binary with deploy/nats's config on a free loopback port, so other people's tests on the
 * machine's server are not counted), and each process's CPU from /proc — the stack's services,
 * that server, and the PostgreSQL backends serving the stack's database.
 */

const REPO = fileURLToPath(new URL('../../../', import.meta.url));

/** CPU ms (user + system) of a process so far, from /proc (Linux; clock ticks are 1/100 s); null when gone. */
export async function processCpuMs(pid: number): Promise<number | null> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => null);
  if (stat === null) return null;
  // Fields after the command name, which may hold spaces and parentheses: utime and stime are 14 and 15.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

export interface BenchNats {
  url: string;
  pid: number;
  close(): Promise<void>;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

async function portOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connectTcp({ host: '127.0.0.1', port }, () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** The pinned nats-server binary as tools/ensure-services.sh caches it, or null when it is not there. */
export function pinnedNatsServer(): string | null {
  const version = readFileSync(join(REPO, 'deploy/nats/VERSION'), 'utf8').trim();
  const binary = join(process.env.CAIRN_TOOLS_DIR ?? '/var/cache/cairn', 'nats-server', version, 'nats-server');
  return existsSync(binary) ? binary : null;
}

/**
 * Starts the pinned nats-server from deploy/nats/nats-server.conf on free loopback ports with a
 * store of its own (removed by `close`); null when the binary is not installed.
 */
export async function startBenchNats(): Promise<BenchNats | null> {
  const binary = pinnedNatsServer();
  if (binary === null) return null;
  const [port, httpPort] = [await freePort(), await freePort()];
  const store = await mkdtemp(join(tmpdir(), 'cairn-bench-nats-'));
  const child: ChildProcess = spawn(
    binary,
    ['-c', join(REPO, 'deploy/nats/nats-server.conf'), '-a', '127.0.0.1', '-p', String(port), '-m', String(httpPort), '-sd', store, '-n', `cairn-bench-${port}`],
    { stdio: 'ignore' },
  );
  const close = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 5000))]);
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }
    await rm(store, { recursive: true, force: true });
  };
  for (let i = 0; i < 100; i++) {
    if (child.exitCode !== null) break;
    if (await portOpen(port)) return { url: `nats://127.0.0.1:${port}`, pid: child.pid!, close };
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  await close();
  throw new Error(`nats-server ${binary} did not start on port ${port}`);
}

/** The PostgreSQL backends serving `databaseUrl`'s database now (their pids), seen from a connection of its own. */
async function databaseBackends(databaseUrl: string): Promise<number[]> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const { rows } = await client.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()');
    return rows.map((r) => r.pid);
  } finally {
    await client.end();
  }
}

/** PostgreSQL's own background processes (checkpointer, WAL writer, …): the server's, shared with anyone else using it. */
async function postgresBackground(): Promise<number[]> {
  const pids: number[] = [];
  for (const entry of await readdir('/proc').catch(() => [] as string[])) {
    if (!/^\d+$/.test(entry)) continue;
    const cmdline = await readFile(`/proc/${entry}/cmdline`, 'utf8').catch(() => '');
    if (/^postgres: (\S+ )?(checkpointer|background writer|walwriter|autovacuum launcher|logical replication launcher)/.test(cmdline)) pids.push(Number(entry));
  }
  return pids;
}

export interface CpuSources {
  /** Each service's pid, by name (the stack file). */
  services: () => Promise<Record<string, number>>;
  /** The bench's own nats-server, when it runs one. */
  natsPid: number | null;
  databaseUrl: string;
}

/**
 * Adds up each process's CPU over the phases it is asked to count: `start()` before a phase,
 * `stop()` after it. PostgreSQL backends are looked up at both ends (a pooled connection that
 * came and went in between is not counted).
 */
export class CpuMeter {
  private readonly used: Record<string, number> = {};
  private before: Map<string, Map<number, number>> = new Map();

  constructor(private readonly sources: CpuSources) {}

  private async sample(): Promise<Map<string, Map<number, number>>> {
    const groups = new Map<string, number[]>();
    for (const [name, pid] of Object.entries(await this.sources.services())) groups.set(name, [pid]);
    if (this.sources.natsPid !== null) groups.set('nats-server', [this.sources.natsPid]);
    groups.set('postgres', await databaseBackends(this.sources.databaseUrl));
    groups.set('postgres (shared background)', await postgresBackground());
    const sample = new Map<string, Map<number, number>>();
    for (const [name, pids] of groups) {
      const byPid = new Map<number, number>();
      for (const pid of pids) {
        const cpu = await processCpuMs(pid);
        if (cpu !== null) byPid.set(pid, cpu);
      }
      sample.set(name, byPid);
    }
    return sample;
  }

  async start(): Promise<void> {
    this.before = await this.sample();
  }

  async stop(): Promise<void> {
    const after = await this.sample();
    for (const [name, byPid] of after) {
      const then = this.before.get(name) ?? new Map<number, number>();
      for (const [pid, cpu] of byPid) {
        const was = then.get(pid);
        if (was !== undefined) this.used[name] = (this.used[name] ?? 0) + cpu - was;
      }
      this.used[name] ??= 0;
    }
  }

  /** CPU ms per run of each process group over everything counted. */
  perRun(runs: number): Record<string, number> {
    return Object.fromEntries(Object.entries(this.used).map(([name, ms]) => [name, ms / runs]));
  }
}
