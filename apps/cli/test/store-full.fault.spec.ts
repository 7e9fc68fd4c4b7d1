import { scenarioClock } from '@cairn/fault-testing';
import { startNatsServers } from '@cairn/testing';
import type { NatsServers } from '@cairn/testing';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FaultScenario, sealed, sleep } from './fault-stack.harness.js';
import { TestStack } from './stack.harness.js';

/*
 * The fault matrix's "the NATS store filling up" (issue 18, docs/testing.md): a whole `cairn up`
 * stack on a nats-server of the test's own whose store is a small tmpfs — a disk, not a JetStream
 * limit, so it fills as a real one does (ENOSPC under the server). Something else on that disk (a
 * stream of the test's own) fills it while a run's step runs; a submit then is refused, not lost.
 * The space is freed and the server restarted (a stream it failed to write stays unwritable until
 * then); the run ends, new runs seal, and the checker judges the whole log.
 */

const STORE_MIB = 96;
let nats: NatsServers;
let stack: TestStack;
let nc: NatsConnection;
let scenario: FaultScenario;
const clock = scenarioClock();

/**
 * Fills the store from streams of the test's own (`<prefix>_<n>`): big pieces, then smaller ones,
 * each size into a new stream, since the server gives up on a stream after its first failed write.
 * Returns the streams and the bytes written.
 */
async function fillStore(prefix: string): Promise<{ streams: string[]; bytes: number }> {
  const jsm = await jetstreamManager(nc);
  const js = jetstream(nc);
  const streams: string[] = [];
  let bytes = 0;
  for (const size of [1024 * 1024, 64 * 1024, 4 * 1024, 512, 64]) {
    const stream = `${prefix}_${streams.length + 1}`;
    await jsm.streams.add({ name: stream, subjects: [`${stream.toLowerCase()}.>`] }).catch(() => null);
    streams.push(stream);
    for (;;) {
      try {
        await js.publish(`${stream.toLowerCase()}.fill`, new Uint8Array(size), { timeout: 2000 });
        bytes += size;
      } catch {
        break;
      }
    }
  }
  return { streams, bytes };
}

beforeAll(async () => {
  nats = await startNatsServers({ nodes: 1, label: 'cairn-full', storeSizeMiB: STORE_MIB });
  stack = await TestStack.create('full-fault', { CAIRN_NATS_URL: nats.urls, CAIRN_ARTIFACT_STORE_MAX_BYTES: String(8 * 1024 * 1024) });
  expect((await stack.up()).outcome).toBe('started');
  nc = await connect({ servers: nats.urls.split(','), maxReconnectAttempts: -1, reconnectTimeWait: 250 });
  scenario = new FaultScenario(stack, nc, clock);
}, 180_000);

afterAll(async () => {
  await nc?.close().catch(() => undefined);
  await stack?.dispose();
  await nats?.stop();
});

describe('fault: the NATS store fills up mid-run', () => {
  it('a submit while it is full is refused, not lost; once there is room the run ends, new runs seal, every invariant holds', async () => {
    const runId = await scenario.submit('store full', [{ argv: ['sleep', '3'] }, { argv: ['echo', 'done'] }]);
    await scenario.waitForType(runId, 'step.started');
    const filled = await fillStore('FILLER');
    console.log(`filled the store with ${(filled.bytes / 1024 / 1024).toFixed(1)} MiB in ${filled.streams.length} streams; server log:\n${await nats.logTail(nats.nodes[0]!.name, 8)}`);
    await sleep(5000);
    const started = Date.now();
    const during = await scenario.post('submitted while full');
    console.log(`a submit with the store full answered ${during.status} ${during.body.code ?? ''} in ${Date.now() - started} ms`);
    if (during.status !== 202) expect(['E_UNAVAILABLE', 'E_CAPACITY']).toContain(during.body.code);

    const jsm = await jetstreamManager(nc);
    for (const stream of filled.streams) await jsm.streams.delete(stream).catch(() => false);
    // A stream the server failed to write stays unwritable until nats-server starts again on its
    // store (its "critical write error"): the operator's remedy, docs/operations.md.
    const node = nats.nodes[0]!;
    await node.kill('SIGTERM');
    await node.start();
    const run = await stack.waitForRun(runId, sealed, 120_000);
    console.log(`the run in flight ended ${run.state} ${run.errorCode ?? ''}`);
    expect(run.sealed).toBe(true);
    if (during.status === 202) await stack.waitForRun(during.body.runId!, sealed, 120_000);
    await scenario.expectSealedSupports(await scenario.submit('after the store has room'), 120_000);
    await scenario.expectInvariants();
  }, 400_000);
});

describe('fault: the artifact store fills up mid-run', () => {
  it("the step whose output does not fit fails the run E_CAPACITY, sealed, naming the store; smaller outputs still fit; every invariant holds", async () => {
    // 8 MiB of store (CAIRN_ARTIFACT_STORE_MAX_BYTES above) and steps of 1 MB of noise each (the
    // default step output cap is 1 MiB): the ninth cannot fit, whatever the store held before.
    const noise = { argv: ['sh', '-c', 'head -c 1000000 /dev/urandom'] };
    const runId = await scenario.submit('artifact store full', [...Array.from({ length: 10 }, () => noise), { argv: ['echo', 'done'] }], { wallSeconds: 120 });
    const run = await stack.waitForRun(runId, sealed, 120_000);
    expect(run).toMatchObject({ state: 'FAILED', errorCode: 'E_CAPACITY', sealed: true });
    const events = (await (await stack.api(`/v1/runs/${runId}/events?after=0&limit=1000`)).json()) as { items: Record<string, unknown>[] };
    const steps = events.items.filter((r) => r.type === 'step.completed');
    const full = steps.find((r) => r.error_code === 'E_CAPACITY');
    expect(full, JSON.stringify(steps.map((s) => s.error_code ?? 'ok'))).toBeDefined();
    // No receipt names bytes the store lacks: the step that did not fit names the empty artifact.
    expect(full).toMatchObject({ output_truncated: true, stdout_sha256: 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855' });
    expect(steps.indexOf(full!)).toBeGreaterThanOrEqual(7);
    expect(steps.at(-1)).toBe(full); // nothing ran after it
    const failed = events.items.find((r) => r.type === 'run.failed');
    expect(String(failed?.message)).toContain('CAIRN_ARTIFACT_STORE_MAX_BYTES');
    expect(await stack.containers(runId)).toEqual([]);
    await stack.expectCleanAndVerifiable(runId);

    // The store is full for a megabyte, not for a run's few bytes: the next run seals.
    await scenario.expectSealedSupports(await scenario.submit('after the artifact store filled'), 120_000);
    await scenario.expectInvariants();
  }, 300_000);
});
