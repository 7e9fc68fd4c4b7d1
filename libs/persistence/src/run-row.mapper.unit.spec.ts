import { describe, expect, it } from 'vitest';
import type { RunRow } from './projection-fold.js';
import { RUN_COLUMN_TYPES, RUN_COLUMNS, runRowFromDb, runValues } from './run-row.mapper.js';
import type { RunDbRow } from './run-row.mapper.js';

const row: RunRow = {
  view: {
    runId: 'run_m1',
    tenant: 'acme',
    name: 'mapper',
    state: 'GRADED',
    errorCode: null,
    verdict: 'SUPPORTS',
    score: 2.5,
    maxScore: 5,
    upperBound: 3,
    createdAt: '2026-01-01T00:00:01.000Z',
    updatedAt: '2026-01-01T00:00:09.123Z',
    lastSeq: 9,
    headHash: 'a'.repeat(64),
    eventCount: 9,
    sealed: false,
    job: 'nightly',
    cpus: 0.5,
    startedAt: '2026-01-01T00:00:03.000Z',
    endedAt: null,
    placed: true,
  },
  lastStreamSeq: 42,
  traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
};

describe('run row mapping', () => {
  it('round-trips a run view through its column values', () => {
    const values = runValues(row);
    const db = Object.fromEntries(RUN_COLUMNS.map((column, i) => [column, values[i]])) as unknown as RunDbRow;
    expect(runRowFromDb(db)).toEqual(row);
    expect(db.trace_id).toBe(row.traceId);
    expect(db.placed).toBe(true);
  });

  it('round-trips a run whose current attempt is not placed', () => {
    const unplaced: RunRow = { ...row, view: { ...row.view, state: 'SUBMITTED', placed: false } };
    const values = runValues(unplaced);
    const db = Object.fromEntries(RUN_COLUMNS.map((column, i) => [column, values[i]])) as unknown as RunDbRow;
    expect(runRowFromDb(db)).toEqual(unplaced);
  });

  it('round-trips a run submitted untraced, its trace id null', () => {
    const untraced: RunRow = { ...row, traceId: null };
    const values = runValues(untraced);
    const db = Object.fromEntries(RUN_COLUMNS.map((column, i) => [column, values[i]])) as unknown as RunDbRow;
    expect(runRowFromDb(db)).toEqual(untraced);
  });

  it('gives every column a type', () => {
    expect(Object.keys(RUN_COLUMN_TYPES)).toEqual([...RUN_COLUMNS]);
  });

  it('refuses a state the lifecycle does not know', () => {
    const values = runValues(row);
    const db = Object.fromEntries(RUN_COLUMNS.map((column, i) => [column, values[i]])) as unknown as RunDbRow;
    expect(() => runRowFromDb({ ...db, state: 'LIMBO' })).toThrow();
  });
});
