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
  },
  lastStreamSeq: 42,
};

describe('run row mapping', () => {
  it('round-trips a run view through its column values', () => {
    const values = runValues(row);
    const db = Object.fromEntries(RUN_COLUMNS.map((column, i) => [column, values[i]])) as unknown as RunDbRow;
    expect(runRowFromDb(db)).toEqual(row);
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
