import { EvidenceLog, evidenceStreamConfig, resolveEvidenceLogOptions } from '@cairn/evidence-log';
import { RunEntity } from '@cairn/persistence';
import { encodeReceipt, FixtureChain, runLifecycleEvents, typedSubject } from '@cairn/persistence/testing';
import { uniqueName } from '@cairn/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startProjector } from '../src/start-projector.js';
import type { RunningProjector } from '../src/start-projector.js';
import { appendChains, createProjectorWorld, mixedChains } from './projector.harness.js';
import type { ProjectorWorld } from './projector.harness.js';

let world: ProjectorWorld;
let projector: RunningProjector | null = null;

beforeAll(async () => {
  world = await createProjectorWorld('live');
  projector = await startProjector(world.config, { logger: false });
});

afterAll(async () => {
  await projector?.stop();
  await world?.dispose();
});

describe('the projector, in process', () => {
  it('projects every appended receipt once into evidence_events, and runs into runs', async () => {
    const chains = mixedChains(12, 6);
    const appended = await appendChains(world.log, chains);
    const last = await world.log.lastStreamSeq();
    expect(last).toBe(appended);
    await world.waitForPosition(last);

    expect(await world.count('evidence_events')).toBe(appended);
    const dupes = await world.dataSource.query<{ n: number }[]>(
      'SELECT count(*)::int AS n FROM (SELECT chain_id, seq FROM evidence_events GROUP BY 1, 2 HAVING count(*) > 1) d',
    );
    expect(dupes[0]!.n).toBe(0);
    const runs = await world.dataSource.getRepository(RunEntity).find();
    expect(runs).toHaveLength(12);
    for (const chain of chains.filter((c) => c.id.startsWith('run_'))) {
      const run = runs.find((r) => r.runId === chain.id);
      expect(run?.eventCount).toBe(chain.events.length);
      expect(run?.lastSeq).toBe(chain.events.length);
    }
    expect(runs.some((r) => r.state === 'SEALED')).toBe(true);
    expect(await world.count('poison_events')).toBe(0);
    expect(projector!.stats().position).toBe(last);
  });

  it('records poison with its reason and keeps projecting the good events after it', async () => {
    // Past the evidence log, at the subject it would use for the type each names.
    const publish = (subject: string, data: Uint8Array | string) => world.js.publish(typedSubject(subject, data), data);
    const unknown = new FixtureChain(uniqueName('run')).next({ type: 'run.teleported', actor: 'intake', fields: {} });
    const gapChain = new FixtureChain(uniqueName('run'));
    const events = runLifecycleEvents(gapChain.chainId);
    gapChain.next(events[0]!);
    const skipped = gapChain.next(events[1]!); // never published: a hole in the chain
    const afterGap = gapChain.next(events[2]!);
    const forked = new FixtureChain(uniqueName('sbx')).next({ type: 'sandbox.expired', actor: 'runtime', fields: { ttl_seconds: 5, expires_at: '2026-01-01T00:00:05.000Z' } });

    const acks = [
      await publish(world.subject(uniqueName('run')), 'this is not json'),
      await publish(world.subject(String(unknown.run_id)), encodeReceipt(unknown)),
      await publish(world.subject(gapChain.chainId), encodeReceipt(afterGap)),
      await publish(world.subject(uniqueName('sbx')), encodeReceipt(forked)),
      await publish(world.subject('job_1'), encodeReceipt(forked)),
    ];
    expect(skipped.seq).toBe(2);
    const good = mixedChains(3, 2);
    const appended = await appendChains(world.log, good);
    const last = await world.log.lastStreamSeq();
    await world.waitForPosition(last);

    const poison = await world.dataSource.query<{ stream_seq: string; reason: string }[]>('SELECT stream_seq, reason FROM poison_events ORDER BY stream_seq');
    expect(poison.map((p) => [Number(p.stream_seq), p.reason])).toEqual([
      [acks[0]!.seq, 'not_json'],
      [acks[1]!.seq, 'unknown_type'],
      [acks[2]!.seq, 'seq_gap'],
      [acks[3]!.seq, 'chain_id_mismatch'],
      [acks[4]!.seq, 'invalid_subject'],
    ]);
    const projectedGood = await world.dataSource.query<{ n: number }[]>('SELECT count(*)::int AS n FROM evidence_events WHERE stream_seq > $1', [
      acks[4]!.seq,
    ]);
    expect(projectedGood[0]!.n).toBe(appended);
    // Poison never reaches evidence_events or runs.
    const touched = await world.dataSource.query<{ n: number }[]>('SELECT count(*)::int AS n FROM evidence_events WHERE stream_seq = ANY($1::int8[])', [
      acks.map((a) => a.seq),
    ]);
    expect(touched[0]!.n).toBe(0);
    expect(await world.dataSource.getRepository(RunEntity).findOneBy({ runId: gapChain.chainId })).toBeNull();
  });

  it('picks up where it stopped after a restart, without projecting anything twice', async () => {
    await projector!.stop();
    await projector!.done;
    const chains = mixedChains(4, 2);
    const appended = await appendChains(world.log, chains);
    const before = await world.count('evidence_events');
    projector = await startProjector(world.config, { logger: false });
    const last = await world.log.lastStreamSeq();
    await world.waitForPosition(last);
    expect(await world.count('evidence_events')).toBe(before + appended);
    expect(await world.count('evidence_events')).toBe(last - (await world.count('poison_events')));
  });
});

describe('the projector at boot', () => {
  it('refuses a stream that ends before its projections (the stream was made anew), naming the rebuild', async () => {
    const replaced = await createProjectorWorld('replaced');
    try {
      const running = await startProjector(replaced.config, { logger: false });
      await appendChains(replaced.log, mixedChains(2, 0));
      await replaced.waitForPosition(await replaced.log.lastStreamSeq());
      await running.stop();
      await running.done;
      // The stream goes and comes back empty; one new chain ends far below the old position.
      await replaced.jsm.streams.delete(replaced.config.CAIRN_EVIDENCE_STREAM);
      const fresh = await EvidenceLog.fromConnection(replaced.nc, {
        servers: replaced.config.CAIRN_NATS_URL,
        stream: replaced.config.CAIRN_EVIDENCE_STREAM,
        subjectPrefix: replaced.config.CAIRN_EVIDENCE_SUBJECT_PREFIX,
      });
      await appendChains(fresh, mixedChains(1, 0));
      expect(await replaced.position()).toBeGreaterThan(await fresh.lastStreamSeq());
      await expect(startProjector(replaced.config, { logger: false })).rejects.toMatchObject({
        code: 'E_CONFLICT',
        message: expect.stringContaining('cairn projections rebuild') as unknown,
      });
    } finally {
      await replaced.dispose();
    }
  });

  it('refuses a stream that holds other subjects too (its position could never pass their sequences)', async () => {
    const other = await createProjectorWorld('mixed');
    try {
      // The world's log created the stream; widen it to a second subject.
      const options = resolveEvidenceLogOptions({
        servers: other.config.CAIRN_NATS_URL,
        stream: other.config.CAIRN_EVIDENCE_STREAM,
        subjectPrefix: other.config.CAIRN_EVIDENCE_SUBJECT_PREFIX,
      });
      const config = evidenceStreamConfig(options);
      await other.jsm.streams.update(config.name, { subjects: [...(config.subjects ?? []), `${uniqueName('elsewhere')}.>`] });
      await expect(startProjector(other.config, { logger: false })).rejects.toMatchObject({ code: 'E_CONFLICT' });
    } finally {
      await other.dispose();
    }
  });
});
