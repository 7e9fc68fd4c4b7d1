import 'reflect-metadata';
import { createTestDatabase } from '@cairn/testing';
import type { TestDatabase } from '@cairn/testing';
import type { DataSource } from 'typeorm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDataSource, runMigrations } from './data-source.js';
import { ProjectionNotices } from './projection-notices.js';
import { ProjectionWriter } from './projection-writer.js';
import { encodeReceipt, FixtureChain, runLifecycleEvents, typedSubject } from './testing/evidence.fixture.js';

/*
 * The projector's commit notices on a real PostgreSQL: a listener hears each chain a batch moved,
 * with its new head, when the batch commits — and nothing of a batch that rolled back.
 */
const STREAM = 'NOTICES_TEST';
const PREFIX = 'cairn.notices';

let db: TestDatabase;
let dataSource: DataSource;
let notices: ProjectionNotices;

beforeAll(async () => {
  db = await createTestDatabase('cairn_notices');
  dataSource = createDataSource(db.url, { poolSize: 2 });
  await dataSource.initialize();
  await runMigrations(dataSource);
  notices = await ProjectionNotices.open(db.url);
});

afterAll(async () => {
  await notices?.close();
  await dataSource?.destroy();
  await db?.drop();
});

function messages(chainId: string, count: number, from: number) {
  const chain = new FixtureChain(chainId);
  return runLifecycleEvents(chainId)
    .slice(0, count)
    .map((event, i) => {
      const data = encodeReceipt(chain.next(event));
      return { streamSeq: from + i, subject: typedSubject(`${PREFIX}.${chainId}`, data), data, traceparent: null };
    });
}

describe('ProjectionNotices', () => {
  it('hears a committed batch: each chain it moved, at its new head', async () => {
    expect(notices.live).toBe(true);
    const heard: number[] = [];
    const unsubscribe = notices.subscribe('run_n1', (seq) => heard.push(seq));
    const atThree = notices.after('run_n1', 3, 5000);
    const notYet = notices.after('run_n1', 4, 300);
    await new ProjectionWriter(dataSource, { stream: STREAM, subjectPrefix: PREFIX }).applyBatch(messages('run_n1', 3, 1));
    expect(await atThree.reached).toBe(true);
    expect(await notYet.reached).toBe(false);
    expect(heard).toEqual([3]);
    unsubscribe();
  });

  it('hears nothing of a batch that rolled back', async () => {
    const waiting = notices.after('run_n2', 1, 500);
    // Another stream than the one projected: the batch is refused inside its transaction.
    await expect(new ProjectionWriter(dataSource, { stream: 'OTHER', subjectPrefix: PREFIX }).applyBatch(messages('run_n2', 2, 4))).rejects.toMatchObject({
      code: 'E_CONFLICT',
    });
    expect(await waiting.reached).toBe(false);
  });
});
