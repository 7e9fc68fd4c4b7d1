import { cp, open, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { isolatedStackStreams } from '@cairn/operational';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestStack } from './stack.harness.js';
import type { RunOutcome } from './stack.harness.js';

/*
 * The restore drill (issue 19): a stack with sealed runs is backed up while it runs (pg_dump, then
 * a snapshot of each stream), then everything is deleted — streams, buckets, every table — and
 * restored: the chains verify, the projections equal what the live projector had made, and the
 * stack comes back up and seals a new run.
 */

let stack: TestStack;
let nc: NatsConnection;
const CAPS = { wallSeconds: 20, memoryMiB: 32, pids: 32, diskMiB: 8, cpus: 0.5 };

beforeAll(async () => {
  stack = await TestStack.create('backup-e2e');
  await stack.up();
  nc = await connect({ servers: stack.env.CAIRN_NATS_URL! });
}, 120_000);

afterAll(async () => {
  await nc?.close();
  await stack?.dispose();
}, 120_000);

async function sealedRun(name: string, argv: string[]): Promise<string> {
  const spec = await stack.specFile(name, { name, image: 'cairn/sandbox-busybox:1', steps: [{ argv }], caps: CAPS, network: 'none' });
  const cli = await stack.cairn(['run', spec, '--wait', '--json']);
  const outcome = JSON.parse(cli.stdout) as RunOutcome;
  expect(outcome.state, cli.stderr).toBe('SEALED');
  return outcome.runId;
}

async function projections(): Promise<Record<string, unknown[]>> {
  // Loaded on use, as the CLI loads it.
  const { createDataSource } = await import('@cairn/persistence');
  const { dumpProjections } = await import('@cairn/persistence/testing');
  const dataSource = createDataSource(stack.env.CAIRN_DATABASE_URL!, { poolSize: 1 });
  await dataSource.initialize();
  try {
    return await dumpProjections(dataSource);
  } finally {
    await dataSource.destroy();
  }
}

async function streamCounts(): Promise<Record<string, number | null>> {
  const jsm = await jetstreamManager(nc);
  const counts: Record<string, number | null> = {};
  for (const stream of isolatedStackStreams(stack.stackId)) counts[stream] = await jsm.streams.info(stream).then((i) => i.state.messages, () => null);
  return counts;
}

async function deleteEverything(): Promise<void> {
  const jsm = await jetstreamManager(nc);
  for (const stream of isolatedStackStreams(stack.stackId)) await jsm.streams.delete(stream).catch(() => false);
  const client = new pg.Client({ connectionString: stack.env.CAIRN_DATABASE_URL });
  await client.connect();
  try {
    await client.query('DROP SCHEMA public CASCADE');
    await client.query('CREATE SCHEMA public');
  } finally {
    await client.end();
  }
}

describe('cairn backup and cairn restore', () => {
  it('restores a deleted stack: streams and database back, chains verify, projections equal the live ones, and it runs again', async () => {
    const runs = [await sealedRun('backup one', ['echo', 'one']), await sealedRun('backup two', ['sh', '-c', 'echo two; echo err >&2'])];
    // The projector has caught up with both seals.
    for (const runId of runs) await stack.waitForRun(runId, (r) => r.sealed);
    const dir = join(stack.home, 'backup');

    const backup = await stack.cairn(['backup', dir, '--json']);
    expect(backup.code, backup.stderr).toBe(0);
    const { manifest } = JSON.parse(backup.stdout) as { manifest: { streams: { stream: string; messages: number }[]; database: { bytes: number } } };
    expect(manifest.streams[0]!.stream).toBe(stack.names.evidenceStream);
    expect(manifest.database.bytes).toBeGreaterThan(0);
    expect((await stat(join(dir, 'manifest.json'))).mode & 0o777).toBe(0o600);
    // Nothing secret in it: the operator's API key is not in any file.
    for (const file of ['manifest.json', 'database.dump']) expect((await readFile(join(dir, file))).includes(Buffer.from(stack.apiKey))).toBe(false);

    // A second backup into the same directory is refused; a restore while the stack runs is refused.
    const again = await stack.cairn(['backup', dir]);
    expect(again.code).not.toBe(0);
    expect(again.stderr).toMatch(/^error E_CONFLICT: .* is not empty/);
    const busy = await stack.cairn(['restore', dir]);
    expect(busy.code).not.toBe(0);
    expect(busy.stderr).toMatch(/^error E_CONFLICT: the stack is running/);

    const live = await projections();
    expect((await stack.cairn(['down', '--timeout', '10'])).code).toBe(0);
    await deleteEverything();
    expect(Object.values(await streamCounts()).every((n) => n === null)).toBe(true);

    // A damaged backup restores nothing.
    const damaged = join(stack.home, 'damaged');
    await cp(dir, damaged, { recursive: true });
    const snapshot = join(damaged, 'streams', `${stack.names.evidenceStream}.snapshot`);
    const handle = await open(snapshot, 'r+');
    await handle.write(Buffer.from([0xff]), 0, 1, 100);
    await handle.close();
    const refused = await stack.cairn(['restore', damaged]);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(/^error E_INPUT: streams\/.*\.snapshot is not the file the manifest recorded/);
    expect(Object.values(await streamCounts()).every((n) => n === null)).toBe(true);

    const restore = await stack.cairn(['restore', dir, '--json']);
    expect(restore.code, restore.stderr).toBe(0);
    expect(JSON.parse(restore.stdout)).toMatchObject({ ok: true, rebuilt: { runs: 2 } });
    const restored = await streamCounts();
    for (const { stream, messages } of manifest.streams) expect(restored[stream], stream).toBe(messages);
    expect(manifest.streams.find((m) => m.stream === stack.names.evidenceStream)!.messages).toBeGreaterThan(20);
    // Rebuilt from the restored log, the projections are what the live projector had made.
    expect(await projections()).toEqual(live);

    // Restoring again over the restored streams needs --replace.
    const over = await stack.cairn(['restore', dir]);
    expect(over.code).not.toBe(0);
    expect(over.stderr).toMatch(/^error E_CONFLICT: streams? .* exists?: .*--replace/m);

    await stack.up();
    for (const runId of runs) await stack.expectCleanAndVerifiable(runId);
    await sealedRun('after restore', ['echo', 'three']);
  }, 240_000);
});
