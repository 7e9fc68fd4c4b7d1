import 'reflect-metadata';
import { createTestDatabase } from '@cairn/testing';
import type { TestDatabase } from '@cairn/testing';
import type { DataSource } from 'typeorm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDataSource, runMigrations } from './data-source.js';
import { RunEntity } from './entities/run.entity.js';
import { SandboxEntity } from './entities/sandbox.entity.js';
import type { RawEvidenceMessage } from './projection-fold.js';
import { inTransaction, withPgClient } from './pg-client.js';
import { ProjectionWriter } from './projection-writer.js';
import { checkSchemaMatchesEntities } from './schema-check.js';
import { encodeReceipt, FixtureChain, runLifecycleEvents, sandboxSessionEvents, typedSubject } from './testing/evidence.fixture.js';

const STREAM = 'WRITER_TEST';
const PREFIX = 'cairn.writer';

let db: TestDatabase;
let dataSource: DataSource;

beforeAll(async () => {
  db = await createTestDatabase('cairn_persist');
  dataSource = createDataSource(db.url);
  await dataSource.initialize();
  await runMigrations(dataSource);
});

afterAll(async () => {
  await dataSource?.destroy();
  await db?.drop();
});

/** Interleaves run and sandbox chains into one stream of messages, numbered from `from`. */
function streamOf(chains: { id: string; events: ReturnType<typeof runLifecycleEvents> }[], from = 1): RawEvidenceMessage[] {
  const sealers = new Map(chains.map((c) => [c.id, new FixtureChain(c.id)]));
  const messages: RawEvidenceMessage[] = [];
  const longest = Math.max(...chains.map((c) => c.events.length));
  for (let i = 0; i < longest; i++) {
    for (const chain of chains) {
      const event = chain.events[i];
      if (event === undefined) continue;
      const receipt = sealers.get(chain.id)!.next(event);
      const data = encodeReceipt(receipt);
      messages.push({ streamSeq: from + messages.length, subject: typedSubject(`${PREFIX}.${chain.id}`, data), data, traceparent: null });
    }
  }
  return messages;
}

async function count(table: string): Promise<number> {
  const rows = await dataSource.query<{ n: number }[]>(`SELECT count(*)::int AS n FROM ${table}`);
  return rows[0]!.n;
}

describe('migrations', () => {
  it('leave a schema that matches the entities', async () => {
    const check = await checkSchemaMatchesEntities(dataSource);
    expect(check.differences).toEqual([]);
    expect(check.matches).toBe(true);
  });

  it('go down and up again', async () => {
    const scratch = await createTestDatabase('cairn_persist_down');
    const ds = createDataSource(scratch.url, { poolSize: 2 });
    try {
      await ds.initialize();
      const all = ['EvidenceProjections1796004095823', 'ReceiptAsJson1796007606211', 'RunBudgetColumns1796300000000', 'SandboxesProjection1796400000000', 'RunTraceId1796600000000', 'RunPlaced1796700000000'];
      expect(await runMigrations(ds)).toEqual(all);
      expect(await runMigrations(ds)).toEqual([]);
      for (let i = 0; i < all.length; i++) await ds.undoLastMigration();
      const left = await ds.query<{ n: number }[]>(
        `SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = 'public' AND tablename IN ('evidence_events', 'runs', 'sandboxes', 'poison_events', 'projection_positions')`,
      );
      expect(left[0]!.n).toBe(0);
      expect(await runMigrations(ds)).toEqual(all);
      expect((await checkSchemaMatchesEntities(ds)).matches).toBe(true);
    } finally {
      await ds.destroy();
      await scratch.drop();
    }
  });

  it('notice a schema that drifted from the entities', async () => {
    const scratch = await createTestDatabase('cairn_persist_drift');
    const ds = createDataSource(scratch.url, { poolSize: 2 });
    try {
      await ds.initialize();
      await runMigrations(ds);
      await ds.query('DROP INDEX ix_runs_tenant_created');
      const check = await checkSchemaMatchesEntities(ds);
      expect(check.matches).toBe(false);
      expect(check.differences.join('\n')).toContain('ix_runs_tenant_created');
    } finally {
      await ds.destroy();
      await scratch.drop();
    }
  });
});

describe('ProjectionWriter', () => {
  const writer = () => new ProjectionWriter(dataSource, { stream: STREAM, subjectPrefix: PREFIX });
  const messages = streamOf([
    { id: 'run_w1', events: runLifecycleEvents('run_w1') },
    { id: 'sbx_w1', events: sandboxSessionEvents('sbx_w1') },
    { id: 'run_w2', events: runLifecycleEvents('run_w2', 1).slice(0, 5) },
  ]);

  it('projects a batch once; the same messages again are skipped', async () => {
    const first = await writer().applyBatch(messages.slice(0, 20));
    expect(first).toEqual({ projected: 20, poison: 0, skipped: 0, deferred: [], position: 20 });
    const again = await writer().applyBatch(messages.slice(0, 25));
    expect(again).toEqual({ projected: 5, poison: 0, skipped: 20, deferred: [], position: 25 });
    expect(await count('evidence_events')).toBe(25);
  });

  it('defers messages past a hole instead of skipping over it', async () => {
    expect(messages).toHaveLength(27);
    // 26 is missing (still in flight, say): 27 must wait for it.
    const result = await writer().applyBatch([messages[26]!]);
    expect(result).toEqual({ projected: 0, poison: 0, skipped: 0, deferred: [27], position: 25 });
    const rest = await writer().applyBatch([messages[26]!, messages[24]!, messages[25]!]);
    expect(rest).toEqual({ projected: 2, poison: 0, skipped: 1, deferred: [], position: 27 });
    expect(await count('evidence_events')).toBe(27);
  });

  it('folds runs into the runs table and sandbox chains into the sandboxes table', async () => {
    const runs = await dataSource.getRepository(RunEntity).find({ order: { runId: 'ASC' } });
    expect(runs.map((r) => [r.runId, r.state, r.sealed, r.eventCount])).toEqual([
      ['run_w1', 'SEALED', true, 14],
      ['run_w2', 'RUNNING', false, 5],
    ]);
    expect(runs[0]!.lastStreamSeq).toBeGreaterThan(runs[1]!.lastStreamSeq);
    expect(runs[0]!.createdAt).toBeInstanceOf(Date);
    // Written over two batches (20, then the rest): the second folded on from the stored row.
    const sandboxes = await dataSource.getRepository(SandboxEntity).find();
    expect(sandboxes.map((s) => [s.sandboxId, s.state, s.destroyReason, s.operations, s.headSeq, s.caps, s.network])).toEqual([
      ['sbx_w1', 'DESTROYED', 'deleted', 3, 8, { wall_seconds: 600, memory_mib: 512, pids: 64, disk_mib: 256, cpus: 1 }, 'none'],
    ]);
    expect(sandboxes[0]!.readyAt).toBeInstanceOf(Date);
  });

  it('records poison with its reason and keeps projecting good messages after it', async () => {
    const position = await writer().position();
    const chain = new FixtureChain('run_p1');
    const events = runLifecycleEvents('run_p1');
    const good1 = chain.next(events[0]!);
    const good2 = chain.next(events[1]!);
    const batch: RawEvidenceMessage[] = [
      { streamSeq: position + 1, subject: `${PREFIX}.run_p1.not.typed`, data: new TextEncoder().encode('garbage\u0000'), traceparent: null },
      { streamSeq: position + 2, subject: typedSubject(`${PREFIX}.run_p1`, encodeReceipt(good1)), data: encodeReceipt(good1), traceparent: null },
      { streamSeq: position + 3, subject: typedSubject(`${PREFIX}.run_p1`, encodeReceipt(good1)), data: encodeReceipt(good1), traceparent: null },
      { streamSeq: position + 4, subject: typedSubject(`${PREFIX}.run_p1`, encodeReceipt(good2)), data: encodeReceipt(good2), traceparent: null },
    ];
    expect(await writer().applyBatch(batch)).toEqual({ projected: 2, poison: 2, skipped: 0, deferred: [], position: position + 4 });
    const poison = await dataSource.query<{ stream_seq: string; reason: string; raw_length: number; detail: string }[]>(
      'SELECT stream_seq, reason, raw_length, detail FROM poison_events ORDER BY stream_seq',
    );
    expect(poison.map((p) => [Number(p.stream_seq), p.reason, p.raw_length])).toEqual([
      [position + 1, 'not_json', 8],
      [position + 3, 'duplicate_seq', good1 === undefined ? 0 : encodeReceipt(good1).byteLength],
    ]);
    expect(poison[0]!.detail).not.toContain('\u0000');
    const run = await dataSource.getRepository(RunEntity).findOneByOrFail({ runId: 'run_p1' });
    expect([run.lastSeq, run.eventCount, run.state]).toEqual([2, 2, 'SUBMITTED']);
  });

  it('refuses to follow a different stream than the one it projected', async () => {
    const other = new ProjectionWriter(dataSource, { stream: 'ANOTHER_STREAM', subjectPrefix: PREFIX });
    await expect(other.applyBatch(messages.slice(0, 1))).rejects.toMatchObject({ code: 'E_CONFLICT' });
  });

  it('rolls a failing batch back whole, position included', async () => {
    const before = { position: await writer().position(), events: await count('evidence_events') };
    const chain = new FixtureChain('run_f1');
    const receipt = chain.next(runLifecycleEvents('run_f1')[0]!);
    const batch: RawEvidenceMessage[] = [{ streamSeq: before.position + 1, subject: typedSubject(`${PREFIX}.run_f1`, encodeReceipt(receipt)), data: encodeReceipt(receipt), traceparent: null }];
    // Hold a lock the batch needs, and give the writer's connections a short lock timeout.
    const impatient = createDataSource(`${db.url}?options=${encodeURIComponent('-c lock_timeout=200')}`, { poolSize: 1 });
    await impatient.initialize();
    const blocker = dataSource.createQueryRunner();
    await blocker.startTransaction();
    try {
      await blocker.query('LOCK TABLE runs IN ACCESS EXCLUSIVE MODE');
      const timedOut = new ProjectionWriter(impatient, { stream: STREAM, subjectPrefix: PREFIX });
      await expect(timedOut.applyBatch(batch)).rejects.toThrow(/lock timeout/);
    } finally {
      await blocker.rollbackTransaction();
      await blocker.release();
      await impatient.destroy();
    }
    expect({ position: await writer().position(), events: await count('evidence_events') }).toEqual(before);
  });
});

describe('the append-only trigger on evidence_events', () => {
  it('refuses UPDATE, DELETE and TRUNCATE', async () => {
    expect(await count('evidence_events')).toBeGreaterThan(0);
    await expect(dataSource.query(`UPDATE evidence_events SET actor = 'forger'`)).rejects.toThrow(/append-only: UPDATE refused/);
    await expect(dataSource.query('DELETE FROM evidence_events WHERE false')).rejects.toThrow(/append-only: DELETE refused/);
    await expect(dataSource.query('TRUNCATE evidence_events')).rejects.toThrow(/append-only: TRUNCATE refused/);
  });

  it('lets TRUNCATE through only with cairn.projection_rebuild on in the transaction', async () => {
    const before = await count('evidence_events');
    const runner = dataSource.createQueryRunner();
    await runner.startTransaction();
    try {
      await runner.query(`SET LOCAL cairn.projection_rebuild = 'on'`);
      await runner.query('TRUNCATE evidence_events');
      const inside = (await runner.query('SELECT count(*)::int AS n FROM evidence_events')) as { n: number }[];
      expect(inside[0]!.n).toBe(0);
      await expect(runner.query(`UPDATE evidence_events SET actor = 'forger'`)).rejects.toThrow(/UPDATE refused/);
    } finally {
      await runner.rollbackTransaction();
      await runner.release();
    }
    expect(await count('evidence_events')).toBe(before);
    // SET LOCAL ended with its transaction: the next TRUNCATE on a reused connection is refused again.
    await expect(dataSource.query('TRUNCATE evidence_events')).rejects.toThrow(/TRUNCATE refused/);
  });
});

describe('inTransaction', () => {
  it('waits for the disk, or not, only when asked, and only for that transaction', async () => {
    const setting = (options?: { synchronousCommit?: boolean }) =>
      withPgClient(dataSource, (client) =>
        inTransaction(client, async () => (await client.query<{ synchronous_commit: string }>('SHOW synchronous_commit')).rows[0]!.synchronous_commit, options),
      );
    const serverDefault = await setting();
    expect(await setting({ synchronousCommit: false })).toBe('off');
    expect(await setting({ synchronousCommit: true })).toBe('on');
    // SET LOCAL ends with its transaction: the pooled connection is back at the server's setting.
    expect(await setting()).toBe(serverDefault);
  });
});
