import 'reflect-metadata';
import { isCairnError } from '@cairn/contracts';
import { createTestDatabase } from '@cairn/testing';
import type { TestDatabase } from '@cairn/testing';
import type { DataSource } from 'typeorm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDataSource, runMigrations } from './data-source.js';
import { checkProjections } from './projection-check.js';
import type { RawEvidenceMessage } from './projection-fold.js';
import { rebuildProjections } from './projection-rebuild.js';
import type { ProjectionSource } from './projection-rebuild.js';
import { memorySource as memoryStream } from './testing/memory-source.js';
import { ProjectionWriter } from './projection-writer.js';
import { encodeReceipt, FixtureChain, runLifecycleEvents, sandboxSessionEvents, typedSubject } from './testing/evidence.fixture.js';
import { dumpProjections } from './testing/projection-dump.js';

const STREAM = 'CHECK_TEST';
const PREFIX = 'cairn.check';
const memorySource = (messages: readonly RawEvidenceMessage[], streamName = STREAM): ProjectionSource => memoryStream(messages, streamName, PREFIX);

let db: TestDatabase;
let dataSource: DataSource;

beforeAll(async () => {
  db = await createTestDatabase('cairn_projection_check');
  dataSource = createDataSource(db.url, { poolSize: 2 });
  await dataSource.initialize();
  await runMigrations(dataSource);
});

afterAll(async () => {
  await dataSource?.destroy();
  await db?.drop();
});

/** Two runs and a sandbox session, interleaved, with one message that is no receipt. */
function stream(): RawEvidenceMessage[] {
  const bodies: [string, Uint8Array][] = [];
  const chains = [
    { id: 'run_c1', chain: new FixtureChain('run_c1', 'acme'), events: runLifecycleEvents('run_c1', 2) },
    { id: 'run_c2', chain: new FixtureChain('run_c2', 'acme'), events: runLifecycleEvents('run_c2', 1) },
    { id: 'sbx_c1', chain: new FixtureChain('sbx_c1', 'beta'), events: sandboxSessionEvents('sbx_c1') },
  ];
  const longest = Math.max(...chains.map((c) => c.events.length));
  for (let i = 0; i < longest; i++) {
    for (const { id, chain, events } of chains) {
      const event = events[i];
      if (event !== undefined) bodies.push([id, encodeReceipt(chain.next(event))]);
    }
    if (i === 1) bodies.push(['run_c1', new TextEncoder().encode('{"not":"a receipt"')]);
  }
  return bodies.map(([chain, data], i) => ({ streamSeq: i + 1, subject: typedSubject(`${PREFIX}.${chain}`, data), data, traceparent: null }));
}

const messages = stream();

/** `runs`' columns after `run_id`, for copying a row under another id. */
const RUN_COLUMNS_AFTER_ID =
  'tenant, name, state, error_code, verdict, score, max_score, upper_bound, created_at, updated_at, last_seq, head_hash, event_count, sealed, last_stream_seq, job, cpus, started_at, ended_at, trace_id, placed';


async function projectAll(): Promise<void> {
  await rebuildProjections({ dataSource, log: memorySource([]) });
  const writer = new ProjectionWriter(dataSource, { stream: STREAM, subjectPrefix: PREFIX });
  await writer.applyBatch(messages);
}

describe('checkProjections', () => {
  it('finds nothing when the live writer projected the log, and counts what the log folds to', async () => {
    await projectAll();
    const result = await checkProjections({ dataSource, log: memorySource(messages) });
    expect(result).toMatchObject({ lastStreamSeq: messages.length, poison: 1, runs: 2, sandboxes: 1, drift: [], driftCount: 0 });
    expect(result.events).toBe(messages.length - 1);
  });

  it('compares at the projections’ position: receipts the projector has not reached yet are no drift', async () => {
    await rebuildProjections({ dataSource, log: memorySource(messages.slice(0, 7)) });
    const result = await checkProjections({ dataSource, log: memorySource(messages) });
    expect(result).toMatchObject({ lastStreamSeq: 7, driftCount: 0 });
    expect(result.events).toBe(6);
  });

  it('names each edited, deleted and added row, column by column, and changes nothing', async () => {
    await projectAll();
    await dataSource.query(`UPDATE runs SET state = 'FAILED', score = 0 WHERE run_id = 'run_c1'`);
    await dataSource.query(`DELETE FROM sandboxes WHERE sandbox_id = 'sbx_c1'`);
    await dataSource.query(`INSERT INTO runs (run_id, ${RUN_COLUMNS_AFTER_ID}) SELECT 'run_forged', ${RUN_COLUMNS_AFTER_ID} FROM runs WHERE run_id = 'run_c2'`);
    // evidence_events refuses UPDATE and DELETE by trigger: only its owner, switching it off, gets past.
    await dataSource.query('ALTER TABLE evidence_events DISABLE TRIGGER USER');
    await dataSource.query(`UPDATE evidence_events SET receipt = jsonb_set(receipt::jsonb, '{exit_code}', '7')::json WHERE chain_id = 'run_c2' AND type = 'step.completed'`);
    await dataSource.query(`DELETE FROM evidence_events WHERE chain_id = 'sbx_c1' AND seq = 1`);
    await dataSource.query('ALTER TABLE evidence_events ENABLE TRIGGER USER');
    const before = await dumpProjections(dataSource);

    const result = await checkProjections({ dataSource, log: memorySource(messages) });

    expect(result.driftCount).toBe(5);
    const byKey = new Map(result.drift.map((d) => [`${d.table} ${d.key}`, d]));
    expect(byKey.get('runs run_c1')).toEqual({
      table: 'runs',
      key: 'run_c1',
      kind: 'edited',
      columns: ['score', 'state'],
      live: { score: 0, state: 'FAILED' },
      log: { score: 3, state: 'SEALED' },
    });
    expect(byKey.get('sandboxes sbx_c1')).toMatchObject({ kind: 'missing', live: null, log: { sandbox_id: 'sbx_c1' } });
    expect(byKey.get('runs run_forged')).toMatchObject({ kind: 'extra', live: { run_id: 'run_forged' }, log: null });
    const step = (await dataSource.query<{ stream_seq: string }[]>(`SELECT stream_seq FROM evidence_events WHERE chain_id = 'run_c2' AND type = 'step.completed'`))[0]!;
    expect(byKey.get(`evidence_events ${step.stream_seq}`)).toMatchObject({ kind: 'edited', columns: ['receipt'] });
    const edited = byKey.get(`evidence_events ${step.stream_seq}`)!;
    expect((edited.live?.['receipt'] as { exit_code: number }).exit_code).toBe(7);
    expect((edited.log?.['receipt'] as { exit_code: number }).exit_code).toBe(0);
    expect([...byKey.values()].filter((d) => d.table === 'evidence_events' && d.kind === 'missing')).toHaveLength(1);

    // Nothing written, nothing left: the tables as they were, no copy of them kept.
    expect(await dumpProjections(dataSource)).toEqual(before);
    expect(await dataSource.query(`SELECT relname FROM pg_class WHERE relname LIKE 'cairn_check_%'`)).toEqual([]);

    // At most `limit` rows per table; the count is of all of them.
    const limited = await checkProjections({ dataSource, log: memorySource(messages), limit: 1 });
    expect(limited.driftCount).toBe(5);
    expect(limited.drift.filter((d) => d.table === 'runs')).toHaveLength(1);

    // A rebuild from the log replaces them, and the check then agrees.
    await rebuildProjections({ dataSource, log: memorySource(messages) });
    expect((await checkProjections({ dataSource, log: memorySource(messages) })).driftCount).toBe(0);
  });

  it('refuses to compare the projections of one stream with another stream: E_CONFLICT naming both', async () => {
    await projectAll();
    const error: unknown = await checkProjections({ dataSource, log: memorySource(messages, 'OTHER_STREAM') }).catch((e: unknown) => e);
    expect(isCairnError(error) && error.code).toBe('E_CONFLICT');
    expect(isCairnError(error) && error.details).toEqual({ projected: STREAM, stream: 'OTHER_STREAM' });
  });
});
