import { ErrorCodeSchema, RunStateSchema, VerdictSchema } from '@cairn/contracts';
import type { RunRow } from './projection-fold.js';

/** A `runs` row as the writer selects it (times as RFC 3339 text, bigint as float8). */
export interface RunDbRow {
  run_id: string;
  tenant: string;
  name: string | null;
  state: string;
  error_code: string | null;
  verdict: string | null;
  score: number | null;
  max_score: number | null;
  upper_bound: number | null;
  created_at: string;
  updated_at: string;
  last_seq: number;
  head_hash: string;
  event_count: number;
  sealed: boolean;
  last_stream_seq: number;
  job: string | null;
  cpus: number | null;
  started_at: string | null;
  ended_at: string | null;
  trace_id: string | null;
  placed: boolean;
}

const ISO = `'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'`;

/** Columns in the order of `RunDbRow`; times rendered exactly as receipts write them. */
export const RUN_SELECT_COLUMNS = [
  'run_id',
  'tenant',
  'name',
  'state',
  'error_code',
  'verdict',
  'score',
  'max_score',
  'upper_bound',
  `to_char(created_at AT TIME ZONE 'UTC', ${ISO}) AS created_at`,
  `to_char(updated_at AT TIME ZONE 'UTC', ${ISO}) AS updated_at`,
  'last_seq',
  'head_hash',
  'event_count',
  'sealed',
  'last_stream_seq::float8 AS last_stream_seq',
  'job',
  'cpus',
  `to_char(started_at AT TIME ZONE 'UTC', ${ISO}) AS started_at`,
  `to_char(ended_at AT TIME ZONE 'UTC', ${ISO}) AS ended_at`,
  'trace_id',
  'placed',
].join(', ');

/** The run view back from its row; a value the lifecycle does not know fails loudly. */
export function runRowFromDb(row: RunDbRow): RunRow {
  return {
    view: {
      runId: row.run_id,
      tenant: row.tenant,
      name: row.name,
      state: RunStateSchema.parse(row.state),
      errorCode: row.error_code === null ? null : ErrorCodeSchema.parse(row.error_code),
      verdict: row.verdict === null ? null : VerdictSchema.parse(row.verdict),
      score: row.score,
      maxScore: row.max_score,
      upperBound: row.upper_bound,
      createdAt: row.created_at,
      updatedAt: row.updated_at,
      lastSeq: row.last_seq,
      headHash: row.head_hash,
      eventCount: row.event_count,
      sealed: row.sealed,
      job: row.job,
      cpus: row.cpus,
      startedAt: row.started_at,
      endedAt: row.ended_at,
      placed: row.placed,
    },
    lastStreamSeq: row.last_stream_seq,
    traceId: row.trace_id,
  };
}

/** The `runs` columns, in insert order, and one row's values in that order. */
export const RUN_COLUMNS = [
  'run_id',
  'tenant',
  'name',
  'state',
  'error_code',
  'verdict',
  'score',
  'max_score',
  'upper_bound',
  'created_at',
  'updated_at',
  'last_seq',
  'head_hash',
  'event_count',
  'sealed',
  'last_stream_seq',
  'job',
  'cpus',
  'started_at',
  'ended_at',
  'trace_id',
  'placed',
] as const;
export type RunColumn = (typeof RUN_COLUMNS)[number];

/** Each column's PostgreSQL type, for the arrays of a multi-row `unnest` insert. */
export const RUN_COLUMN_TYPES: Readonly<Record<RunColumn, string>> = {
  run_id: 'text',
  tenant: 'text',
  name: 'text',
  state: 'text',
  error_code: 'text',
  verdict: 'text',
  score: 'float8',
  max_score: 'float8',
  upper_bound: 'float8',
  created_at: 'timestamptz',
  updated_at: 'timestamptz',
  last_seq: 'int4',
  head_hash: 'text',
  event_count: 'int4',
  sealed: 'bool',
  last_stream_seq: 'int8',
  job: 'text',
  cpus: 'float8',
  started_at: 'timestamptz',
  ended_at: 'timestamptz',
  trace_id: 'text',
  placed: 'bool',
};

export type RunValues = [
  string,
  string,
  string | null,
  string,
  string | null,
  string | null,
  number | null,
  number | null,
  number | null,
  string,
  string,
  number,
  string,
  number,
  boolean,
  number,
  string | null,
  number | null,
  string | null,
  string | null,
  string | null,
  boolean,
];

export function runValues({ view, lastStreamSeq, traceId }: RunRow): RunValues {
  return [
    view.runId,
    view.tenant,
    view.name,
    view.state,
    view.errorCode,
    view.verdict,
    view.score,
    view.maxScore,
    view.upperBound,
    view.createdAt,
    view.updatedAt,
    view.lastSeq,
    view.headHash,
    view.eventCount,
    view.sealed,
    lastStreamSeq,
    view.job,
    view.cpus,
    view.startedAt,
    view.endedAt,
    traceId,
    view.placed,
  ];
}
