import 'reflect-metadata';
import { createTestDatabase } from '@cairn/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { createDataSource, runMigrations } from './data-source.js';
import { ProjectionWriter } from './projection-writer.js';
import type { RawEvidenceMessage } from './projection-fold.js';
import { encodeReceipt, FixtureChain, runLifecycleEvents, typedSubject } from './testing/evidence.fixture.js';
import type { FixtureEvent } from './testing/evidence.fixture.js';

const PREFIX = 'cairn.budgetcols';
const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const TRACEPARENT = `00-${TRACE_ID}-00f067aa0ba902b7-01`;
const scratch = await createTestDatabase('cairn_budget_cols');
afterAll(async () => scratch.drop());

/** A run of `job` granted 0.5 CPUs, projected through the writer. */
function runOfJob(runId: string, job: string | null): FixtureEvent[] {
  const events = runLifecycleEvents(runId, 1);
  const [submitted, decided] = events;
  if (submitted === undefined || decided === undefined) throw new Error('fixture changed');
  const spec = submitted.fields.spec as Record<string, unknown>;
  submitted.fields = { ...submitted.fields, spec: job === null ? spec : { ...spec, job } };
  decided.fields = { ...decided.fields, caps: { wall_seconds: 60, memory_mib: 64, pids: 16, disk_mib: 16, cpus: 0.5 } };
  return events;
}

describe('the run budget columns', () => {
  it('are projected from the receipts, and the migration fills in rows projected before it exactly as the fold does', async () => {
    const ds = createDataSource(scratch.url, { poolSize: 2 });
    await ds.initialize();
    try {
      await runMigrations(ds);
      const messages: RawEvidenceMessage[] = [];
      for (const [runId, job] of [
        ['run_bc1', 'nightly'],
        ['run_bc2', null],
      ] as const) {
        const chain = new FixtureChain(runId);
        for (const event of runOfJob(runId, job)) {
          const data = encodeReceipt(chain.next(event));
          messages.push({ streamSeq: messages.length + 1, subject: typedSubject(`${PREFIX}.${runId}`, data), data, traceparent: TRACEPARENT });
        }
      }
      await new ProjectionWriter(ds, { stream: 'BUDGET_COLS', subjectPrefix: PREFIX }).applyBatch(messages);
      const read = () =>
        ds.query<{ run_id: string; job: string | null; cpus: number | null; started_at: Date | null; ended_at: Date | null }[]>(
          'SELECT run_id, job, cpus, started_at, ended_at FROM runs ORDER BY run_id',
        );
      const projected = await read();
      expect(projected.map((r) => [r.run_id, r.job, r.cpus, r.started_at?.toISOString(), r.ended_at?.toISOString()])).toEqual([
        // sandbox.created is the 4th receipt, sandbox.destroyed the 7th (one step); the fixture ticks a second a receipt
        ['run_bc1', 'nightly', 0.5, '2026-01-01T00:00:04.000Z', '2026-01-01T00:00:07.000Z'],
        ['run_bc2', null, 0.5, '2026-01-01T00:00:04.000Z', '2026-01-01T00:00:07.000Z'],
      ]);

      const traceIds = () => ds.query<{ trace_id: string | null }[]>('SELECT trace_id FROM runs ORDER BY run_id');
      expect(await traceIds()).toEqual([{ trace_id: TRACE_ID }, { trace_id: TRACE_ID }]);

      // Down (past the sandboxes projection, the trace id and the placed flag, which came after) drops the columns; up adds them and backfills from evidence_events.
      await ds.undoLastMigration();
      await ds.undoLastMigration();
      await ds.undoLastMigration();
      await ds.undoLastMigration();
      expect(await runMigrations(ds)).toEqual(['RunBudgetColumns1796300000000', 'SandboxesProjection1796400000000', 'RunTraceId1796600000000', 'RunPlaced1796700000000']);
      expect(await read()).toEqual(projected);
      // The trace id is a header evidence_events does not keep: only a rebuild from the stream fills it in again.
      expect(await traceIds()).toEqual([{ trace_id: null }, { trace_id: null }]);
    } finally {
      await ds.destroy();
    }
  });
});
