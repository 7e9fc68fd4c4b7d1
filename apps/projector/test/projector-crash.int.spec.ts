import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appendChains, createProjectorWorld, mixedChains } from './projector.harness.js';
import type { ProjectorWorld } from './projector.harness.js';

// The real process, built by `npm run build` (npm test builds first).
const MAIN = fileURLToPath(new URL('../dist/main.js', import.meta.url));

let world: ProjectorWorld;
const children: ChildProcess[] = [];

interface Started {
  child: ChildProcess;
  output: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

function startProcess(): Started {
  const child = spawn(process.execPath, [MAIN], {
    env: { PATH: process.env.PATH ?? '', ...world.env() },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  return { child, output: () => output, exited };
}

async function waitUntil(check: () => Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

beforeAll(async () => {
  if (!existsSync(MAIN)) throw new Error(`${MAIN} is missing: run npm run build first`);
  // Small batches make many transactions to crash between; a short ack wait makes the
  // messages the dead process held come back quickly.
  world = await createProjectorWorld('crash', { CAIRN_PROJECTOR_BATCH_SIZE: 20, CAIRN_PROJECTOR_ACK_WAIT_MS: 2000 });
});

afterAll(async () => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  await world?.dispose();
});

describe('the projector process', () => {
  it('loses and doubles nothing when killed -9 in the middle of a stream of appends', async () => {
    const first = startProcess();
    const chains = mixedChains(90, 60);
    const expected = chains.reduce((n, c) => n + c.events.length, 0);
    const appending = appendChains(world.log, chains, 'acme', 1);

    await world.waitForPosition(150, 30_000);
    // Kill it in the middle of a transaction: hold a lock its next batch needs, wait until that
    // batch is stuck on it (delivered, written in part, not committed, not acknowledged), kill -9.
    const blocker = world.dataSource.createQueryRunner();
    await blocker.startTransaction();
    try {
      await blocker.query('LOCK TABLE runs IN ACCESS EXCLUSIVE MODE');
      await waitUntil(async () => {
        const stuck = await world.dataSource.query<{ n: number }[]>(
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1 AND application_name = 'cairn-projector' AND wait_event_type = 'Lock'`,
          [world.db.name],
        );
        return stuck[0]!.n > 0;
      });
      first.child.kill('SIGKILL');
      expect(await first.exited).toEqual({ code: null, signal: 'SIGKILL' });
    } finally {
      await blocker.rollbackTransaction();
      await blocker.release();
    }
    const held = await world.jsm.consumers.info(world.config.CAIRN_EVIDENCE_STREAM, world.config.CAIRN_PROJECTOR_DURABLE);
    expect(held.num_ack_pending).toBeGreaterThan(0);
    const atKill = await world.position();

    expect(await appending).toBe(expected);
    const last = await world.log.lastStreamSeq();
    expect(last).toBe(expected);
    expect(atKill).toBeLessThan(last);

    const second = startProcess();
    await world.waitForPosition(last, 60_000);

    // Every stream message is in evidence_events exactly once, and nothing else is.
    const [summary] = await world.dataSource.query<{ n: number; distinct_seq: number; distinct_link: number; min: number; max: number }[]>(
      `SELECT count(*)::int AS n, count(DISTINCT stream_seq)::int AS distinct_seq, count(DISTINCT (chain_id, seq))::int AS distinct_link,
              min(stream_seq)::int AS min, max(stream_seq)::int AS max
         FROM evidence_events`,
    );
    expect(summary).toEqual({ n: last, distinct_seq: last, distinct_link: last, min: 1, max: last });
    expect(await world.count('poison_events')).toBe(0);
    // Each chain is complete and in order; each run counted every receipt once.
    const perChain = await world.dataSource.query<{ chain_id: string; n: number; top: number }[]>(
      'SELECT chain_id, count(*)::int AS n, max(seq)::int AS top FROM evidence_events GROUP BY chain_id',
    );
    const lengths = new Map(chains.map((c) => [c.id, c.events.length]));
    expect(perChain).toHaveLength(chains.length);
    for (const row of perChain) expect([row.n, row.top]).toEqual([lengths.get(row.chain_id), lengths.get(row.chain_id)]);
    const runs = await world.dataSource.query<{ run_id: string; event_count: number }[]>('SELECT run_id, event_count FROM runs');
    expect(runs).toHaveLength(90);
    for (const run of runs) expect(run.event_count).toBe(lengths.get(run.run_id));
    const positions = await world.dataSource.query<{ name: string; stream: string; last: number }[]>(
      'SELECT name, stream, last_stream_seq::int AS last FROM projection_positions',
    );
    expect(positions).toEqual([{ name: 'evidence', stream: world.config.CAIRN_EVIDENCE_STREAM, last }]);

    // A clean stop drains and exits.
    second.child.kill('SIGTERM');
    const exit = await second.exited;
    // SIGTERM drains and exits 0 through `exitOnSignals`, as every service does (not Nest's re-raised signal).
    expect(exit).toEqual({ code: 0, signal: null });
    expect(second.output()).toContain(`stopped at position ${last}:`);
  });

  it('fails at boot, naming the variable, when the configuration is wrong', async () => {
    const child = spawn(process.execPath, [MAIN], {
      env: { PATH: process.env.PATH ?? '', ...world.env(), CAIRN_DATABASE_URL: 'mysql://nope' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.push(child);
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const code = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
    expect(code).toBe(1);
    expect(stderr).toContain('CAIRN_DATABASE_URL');
  });
});
