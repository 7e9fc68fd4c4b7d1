import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { createDataSource, rebuildProjections } from '@cairn/persistence';
import { createTestDatabase, startOwnPostgres } from '@cairn/testing';
import type { OwnPostgres } from '@cairn/testing';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dumpProjections } from '@cairn/persistence/testing';
import { appendChains, createProjectorWorld, mixedChains } from './projector.harness.js';
import type { ProjectorWorld } from './projector.harness.js';

/*
 * The projector against a PostgreSQL of the test's own, crashed (`pg_ctl stop -m immediate`) and
 * restored under it. The server's default is `synchronous_commit = off` with a 10 s WAL writer: a
 * commit that does not itself wait for the disk is still in memory when the server dies. What the
 * projector acknowledges must be on disk all the same; what the database loses anyway (a restore
 * from a copy) is read again from the stream, not stalled behind.
 */

const MAIN = fileURLToPath(new URL('../dist/main.js', import.meta.url));

let server: OwnPostgres;
let world: ProjectorWorld;
const children: ChildProcess[] = [];

interface Started {
  child: ChildProcess;
  output: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

function startProcess(): Started {
  const child = spawn(process.execPath, [MAIN], { env: { PATH: process.env.PATH ?? '', ...world.env() }, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  return { child, output: () => output, exited };
}

async function stopProcess(started: Started): Promise<string> {
  started.child.kill('SIGTERM');
  const exit = await started.exited;
  // SIGTERM drains and exits 0 through `exitOnSignals`, as every service does (not Nest's re-raised signal).
  expect(exit, started.output()).toEqual({ code: 0, signal: null });
  return started.output();
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function waitUntil(check: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check().catch(() => false))) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await sleep(5);
  }
}

/** Runs `sql` on the server's maintenance database (not through the world's pool). */
async function admin(sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: server.url });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

async function ackFloor(): Promise<number> {
  return (await world.jsm.consumers.info(world.config.CAIRN_EVIDENCE_STREAM, world.config.CAIRN_PROJECTOR_DURABLE)).ack_floor.stream_seq;
}

/** The live projections equal those rebuilt from the stream into a fresh database. */
async function expectEqualToRebuild(): Promise<void> {
  const live = await dumpProjections(world.dataSource);
  const fresh = await createTestDatabase('cairn_pgcrash_fresh', server.url);
  try {
    await rebuildProjections({ url: fresh.url, log: world.log });
    const rebuilt = createDataSource(fresh.url, { poolSize: 1 });
    await rebuilt.initialize();
    try {
      expect(await dumpProjections(rebuilt)).toEqual(live);
    } finally {
      await rebuilt.destroy();
    }
  } finally {
    await fresh.drop();
  }
}

beforeAll(async () => {
  if (!existsSync(MAIN)) throw new Error(`${MAIN} is missing: run npm run build first`);
  server = await startOwnPostgres({ settings: { synchronous_commit: 'off', wal_writer_delay: '10s' } });
  world = await createProjectorWorld('pgcrash', { CAIRN_PROJECTOR_BATCH_SIZE: 20, CAIRN_PROJECTOR_ACK_WAIT_MS: 2000 }, { databaseServerUrl: server.url });
});

afterAll(async () => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  await world?.dispose();
  await server?.dispose();
});

describe('the projector and a PostgreSQL that crashes', () => {
  it('acknowledges only what is on disk: stopped -m immediate mid-batch and started again, the projections equal a fresh rebuild', async () => {
    const projector = startProcess();
    const chains = mixedChains(80, 40);
    const expected = chains.reduce((n, c) => n + c.events.length, 0);
    const appending = appendChains(world.log, chains, 'acme', 2);

    await world.waitForPosition(120, 30_000);
    // Mid-batch: one of the projector's transactions is open when the server dies.
    await waitUntil(
      async () => {
        const open = await world.dataSource.query<{ n: number }[]>(
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1 AND application_name = 'cairn-projector' AND xact_start IS NOT NULL`,
          [world.db.name],
        );
        return open[0]!.n > 0;
      },
      10_000,
      'a projector transaction in flight',
    );
    await server.stop('immediate');
    // Acks of commits that returned just before may still be on their way to the server.
    await sleep(300);
    const acknowledged = await ackFloor();
    expect(acknowledged).toBeGreaterThan(0);

    // Back with only its socket, so the projector cannot write before the position is read: every
    // message JetStream counts as acknowledged survived the crash.
    await server.start({ tcp: false });
    const probe = server.socketClient(world.db.name);
    await probe.connect();
    const recovered = (await probe.query<{ last: number }>('SELECT last_stream_seq::float8 AS last FROM projection_positions')).rows[0]!.last;
    await probe.end();
    expect(recovered).toBeGreaterThanOrEqual(acknowledged);
    await server.stop('fast');
    await server.start();

    expect(await appending).toBe(expected);
    const last = await world.log.lastStreamSeq();
    await world.waitForPosition(last, 60_000);
    await expectEqualToRebuild();
    const output = await stopProcess(projector);
    expect(output).toContain(`stopped at position ${last}:`);
    // Nothing had to be read again: no acknowledged commit was lost.
    expect(output).toMatch(/ 0 read again,/);
  });

  it('reads a hole nobody will deliver again from the stream, instead of stalling behind it: the database restored from an older copy', async () => {
    const copy = `${world.db.name}_copy`;
    const restore = async () => {
      await admin(`DROP DATABASE "${world.db.name}" WITH (FORCE)`);
      await admin(`CREATE DATABASE "${world.db.name}" TEMPLATE "${copy}"`);
    };
    // A copy of the projections as they are now.
    const copiedAt = await world.position();
    await admin(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '${world.db.name}'`);
    await admin(`CREATE DATABASE "${copy}" TEMPLATE "${world.db.name}"`);
    try {
      // While running: it projects more, the database goes back to the copy under it, more comes.
      const projector = startProcess();
      await appendChains(world.log, mixedChains(20, 10), 'acme', 1);
      const before = await world.log.lastStreamSeq();
      await world.waitForPosition(before, 30_000);
      expect(await ackFloor()).toBe(before);
      await restore();
      expect(await world.position()).toBe(copiedAt);
      await appendChains(world.log, mixedChains(5, 5), 'acme', 1);
      const last = await world.log.lastStreamSeq();
      // Only the stream holds seqs copiedAt+1..before now: JetStream will not deliver them again.
      await world.waitForPosition(last, 30_000);
      await expectEqualToRebuild();
      const output = await stopProcess(projector);
      expect(output).toContain(`are not projected and will not be delivered again`);
      expect(output).toContain(`stopped at position ${last}:`);
      expect(output).not.toMatch(/ 0 read again,/);

      // At start: it finds the consumer ahead of the projections and reads the hole before consuming.
      await restore();
      const restarted = startProcess();
      await world.waitForPosition(last, 30_000);
      await expectEqualToRebuild();
      const again = await stopProcess(restarted);
      expect(again).toContain(`reading them from the stream up to ${last}`);
    } finally {
      await admin(`DROP DATABASE IF EXISTS "${copy}" WITH (FORCE)`);
    }
  });
});
