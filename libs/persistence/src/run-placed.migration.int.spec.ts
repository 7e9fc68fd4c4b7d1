import 'reflect-metadata';
import { createTestDatabase } from '@cairn/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { createDataSource, runMigrations } from './data-source.js';
import { ProjectionWriter } from './projection-writer.js';
import type { RawEvidenceMessage } from './projection-fold.js';
import { encodeReceipt, FixtureChain, retriedRunLifecycleEvents, runLifecycleEvents, typedSubject } from './testing/evidence.fixture.js';
import type { FixtureEvent } from './testing/evidence.fixture.js';

const PREFIX = 'cairn.placedcol';
const scratch = await createTestDatabase('cairn_run_placed');
afterAll(async () => scratch.drop());

const retried = retriedRunLifecycleEvents('run_pl3', 2);
const untilRetried = retried.slice(0, retried.findIndex((e) => e.type === 'run.retried') + 1);
/** Each run's receipts and whether the fold says its current attempt is placed. */
const RUNS: readonly (readonly [string, FixtureEvent[], boolean])[] = [
  ['run_pl1', runLifecycleEvents('run_pl1', 1), true],
  // held for a run approval before any placement
  ['run_pl2', [...runLifecycleEvents('run_pl2', 1).slice(0, 1), { type: 'policy.decided', actor: 'policy', fields: { decision: 'hold', policy_version: 'c'.repeat(64), reasons: [] } }], false],
  ['run_pl3', retried, true],
  // lost, back in the queue, not placed again yet
  ['run_pl4', retriedRunLifecycleEvents('run_pl4', 2).slice(0, untilRetried.length), false],
];

describe('the runs placed column', () => {
  it('is projected from the receipts, and the migration fills in rows projected before it exactly as the fold does', async () => {
    const ds = createDataSource(scratch.url, { poolSize: 2 });
    await ds.initialize();
    try {
      await runMigrations(ds);
      const messages: RawEvidenceMessage[] = [];
      for (const [runId, events] of RUNS) {
        const chain = new FixtureChain(runId);
        for (const event of events) {
          const data = encodeReceipt(chain.next(event));
          messages.push({ streamSeq: messages.length + 1, subject: typedSubject(`${PREFIX}.${runId}`, data), data, traceparent: null });
        }
      }
      await new ProjectionWriter(ds, { stream: 'PLACED_COL', subjectPrefix: PREFIX }).applyBatch(messages);
      const read = () => ds.query<{ run_id: string; state: string; placed: boolean }[]>('SELECT run_id, state, placed FROM runs ORDER BY run_id');
      const projected = await read();
      expect(projected.map((r) => [r.run_id, r.placed])).toEqual(RUNS.map(([runId, , placed]) => [runId, placed]));
      expect(projected.map((r) => r.state)).toEqual(['SEALED', 'AWAITING_APPROVAL', 'SEALED', 'SUBMITTED']);

      await ds.undoLastMigration();
      expect(await runMigrations(ds)).toEqual(['RunPlaced1796700000000']);
      expect(await read()).toEqual(projected);
    } finally {
      await ds.destroy();
    }
  });
});
