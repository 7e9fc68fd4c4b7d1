import { createDataSource, rebuildProjections } from '@cairn/persistence';
import { encodeReceipt, FixtureChain, runLifecycleEvents, typedSubject } from '@cairn/persistence/testing';
import { createTestDatabase, uniqueName } from '@cairn/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startProjector } from '../src/start-projector.js';
import type { RunningProjector } from '../src/start-projector.js';
import { dumpProjections } from '@cairn/persistence/testing';
import { appendChains, createProjectorWorld, mixedChains } from './projector.harness.js';
import type { ProjectorWorld } from './projector.harness.js';

let world: ProjectorWorld;
let projector: RunningProjector | null = null;

beforeAll(async () => {
  world = await createProjectorWorld('rebuild', { CAIRN_PROJECTOR_BATCH_SIZE: 100 });
  projector = await startProjector(world.config, { logger: false });
});

afterAll(async () => {
  await projector?.stop();
  await world?.dispose();
});

/** A few poison messages of different kinds, spread out in time. */
async function publishPoison(): Promise<number> {
  const pause = () => new Promise((resolve) => setTimeout(resolve, 15));
  const gap = new FixtureChain(uniqueName('run'));
  const events = runLifecycleEvents(gap.chainId);
  gap.next(events[0]!); // seq 1 and 2 are never published: seq 3 comes out of nowhere
  gap.next(events[1]!);
  const afterGap = gap.next(events[2]!);
  const bodies: [string, Uint8Array | string][] = [
    [world.subject(uniqueName('run')), '{"v":1,'],
    [world.subject(uniqueName('sbx')), encodeReceipt(new FixtureChain(uniqueName('sbx')).next({ type: 'sbx.unheard_of', actor: 'runtime', fields: {} }))],
    [world.subject(gap.chainId), encodeReceipt(afterGap)],
    [world.subject(uniqueName('run')), encodeReceipt(new FixtureChain(uniqueName('run')).next({ ...events[0]!, fields: {} }))],
    [world.subject('not_a_chain'), 'x'],
    [world.subject(uniqueName('run')), new Uint8Array([0xc3, 0x28])],
  ];
  for (const [subject, data] of bodies) {
    await world.js.publish(typedSubject(subject, data), data);
    await pause();
  }
  return bodies.length;
}

describe('projections rebuilt from the stream (I-10)', () => {
  it('equal the live projections after thousands of events over many chains, poison included', async () => {
    const chains = mixedChains(220, 130);
    const [appended, poisoned] = await Promise.all([appendChains(world.log, chains), publishPoison()]);
    const last = await world.log.lastStreamSeq();
    expect(last).toBe(appended + poisoned);
    expect(appended).toBeGreaterThan(2500);
    await world.waitForPosition(last, 60_000);

    const live = await dumpProjections(world.dataSource);
    expect(live.evidence_events).toHaveLength(appended);
    expect(live.poison_events).toHaveLength(poisoned);
    expect(live.runs).toHaveLength(220);
    // Every session folded past its first receipts: destroyed (an operation recorded), not a fault.
    expect(live.sandboxes).toHaveLength(130);
    const sessions = (live.sandboxes ?? []) as { state: string; operations: number }[];
    expect(sessions.every((row) => row.state === 'DESTROYED' && row.operations === 3)).toBe(true);
    // Each run's trace id is its run.submitted's traceparent header (none for the runs appended untraced).
    const traceIds = Object.fromEntries(((live.runs ?? []) as { run_id: string; trace_id: string | null }[]).map((row) => [row.run_id, row.trace_id]));
    const runChains = chains.filter((chain) => chain.id.startsWith('run_'));
    expect(traceIds).toEqual(Object.fromEntries(runChains.map((chain) => [chain.id, chain.traceId ?? null])));
    expect(Object.values(traceIds).filter((id) => id !== null).length).toBeGreaterThan(100);
    expect(Object.values(traceIds)).toContain(null);

    // Into a fresh database, by URL (it migrates itself).
    const fresh = await createTestDatabase('cairn_rebuild_fresh');
    try {
      const result = await rebuildProjections({ url: fresh.url, log: world.log });
      expect(result).toMatchObject({ events: appended, poison: poisoned, runs: 220, sandboxes: 130, lastStreamSeq: last });
      const other = createDataSource(fresh.url, { poolSize: 1 });
      await other.initialize();
      try {
        expect(await dumpProjections(other)).toEqual(live);
      } finally {
        await other.destroy();
      }
    } finally {
      await fresh.drop();
    }

    // In place, over the live tables.
    const progress: number[] = [];
    const inPlace = await rebuildProjections({ dataSource: world.dataSource, log: world.log, progressEvery: 1000, onProgress: (p) => progress.push(p.streamSeq) });
    expect(inPlace).toMatchObject({ events: appended, poison: poisoned, runs: 220, sandboxes: 130, lastStreamSeq: last });
    expect(progress.length).toBeGreaterThanOrEqual(2);
    expect(await dumpProjections(world.dataSource)).toEqual(live);
  });

  it('serializes with the live projector: rebuilding while events are appended and projected loses and doubles nothing', async () => {
    const chains = mixedChains(60, 40);
    const before = await world.log.lastStreamSeq();
    let appended = false;
    // About a second of appends (a pause between each chain's events), rebuilt over and over meanwhile.
    const appending = appendChains(world.log, chains, 'acme', 80).finally(() => (appended = true));
    const rebuilds = [];
    while (!appended) {
      rebuilds.push(await rebuildProjections({ dataSource: world.dataSource, log: world.log }));
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    await appending;
    const last = await world.log.lastStreamSeq();
    await world.waitForPosition(last, 60_000);
    // At least one rebuild ran while the stream was growing, and the projector carried on after it.
    expect(rebuilds.some((r) => r.lastStreamSeq > before && r.lastStreamSeq < last)).toBe(true);
    expect(rebuilds.map((r) => r.lastStreamSeq)).toEqual([...rebuilds.map((r) => r.lastStreamSeq)].sort((a, b) => a - b));

    const live = await dumpProjections(world.dataSource);
    const [summary] = await world.dataSource.query<{ n: number; distinct_seq: number }[]>(
      'SELECT count(*)::int AS n, count(DISTINCT stream_seq)::int AS distinct_seq FROM evidence_events',
    );
    expect(summary!.n + (await world.count('poison_events'))).toBe(last);
    expect(summary!.distinct_seq).toBe(summary!.n);
    await rebuildProjections({ dataSource: world.dataSource, log: world.log });
    expect(await dumpProjections(world.dataSource)).toEqual(live);
  });
});
