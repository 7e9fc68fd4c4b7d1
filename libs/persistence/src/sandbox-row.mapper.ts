import { ErrorCodeSchema, GrantedCapsSchema, NetworkSpecSchema, SANDBOX_DESTROY_REASONS, SANDBOX_STATES } from '@cairn/contracts';
import type { SandboxDestroyReason, SandboxState } from '@cairn/contracts';
import type { SandboxView } from '@cairn/lifecycle';

/** A sandbox's view and the stream sequence of its last projected receipt. */
export interface SandboxRow {
  readonly view: SandboxView;
  readonly lastStreamSeq: number;
}

/** A `sandboxes` row as the writer selects it (times as RFC 3339 text, bigint as float8, jsonb parsed). */
export interface SandboxDbRow {
  sandbox_id: string;
  tenant: string;
  state: string;
  image: string | null;
  image_id: string | null;
  caps: unknown;
  network: unknown;
  worker_id: string | null;
  created_at: string;
  ready_at: string | null;
  expires_at: string | null;
  idle_seconds: number | null;
  last_activity_at: string;
  operations: number;
  destroy_reason: string | null;
  error_code: string | null;
  updated_at: string;
  head_seq: number;
  head_hash: string;
  sealed: boolean;
  last_stream_seq: number;
}

const ISO = `'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'`;
const time = (column: string) => `to_char(${column} AT TIME ZONE 'UTC', ${ISO}) AS ${column}`;



function oneOf<T extends string>(values: readonly T[], value: string, what: string): T {
  if ((values as readonly string[]).includes(value)) return value as T;
  throw new RangeError(`a sandboxes row holds an unknown ${what}: ${value}`);
}

/** The sandbox view back from its row; a value the lifecycle does not know fails loudly. */
export function sandboxRowFromDb(row: SandboxDbRow): SandboxRow {
  return {
    view: {
      id: row.sandbox_id,
      tenant: row.tenant,
      state: oneOf<SandboxState>(SANDBOX_STATES, row.state, 'state'),
      image: row.image,
      imageId: row.image_id,
      caps: row.caps === null ? null : GrantedCapsSchema.parse(row.caps),
      network: NetworkSpecSchema.parse(row.network),
      workerId: row.worker_id,
      createdAt: row.created_at,
      readyAt: row.ready_at,
      expiresAt: row.expires_at,
      idleSeconds: row.idle_seconds,
      lastActivityAt: row.last_activity_at,
      operations: row.operations,
      destroyReason: row.destroy_reason === null ? null : oneOf<SandboxDestroyReason>(SANDBOX_DESTROY_REASONS, row.destroy_reason, 'destroy reason'),
      errorCode: row.error_code === null ? null : ErrorCodeSchema.parse(row.error_code),
      updatedAt: row.updated_at,
      headSeq: row.head_seq,
      headHash: row.head_hash,
      sealed: row.sealed,
    },
    lastStreamSeq: row.last_stream_seq,
  };
}

/** The `sandboxes` columns, in insert order, and one row's values in that order. */
export const SANDBOX_COLUMNS = [
  'sandbox_id',
  'tenant',
  'state',
  'image',
  'image_id',
  'caps',
  'network',
  'worker_id',
  'created_at',
  'ready_at',
  'expires_at',
  'idle_seconds',
  'last_activity_at',
  'operations',
  'destroy_reason',
  'error_code',
  'updated_at',
  'head_seq',
  'head_hash',
  'sealed',
  'last_stream_seq',
] as const;
export type SandboxColumn = (typeof SANDBOX_COLUMNS)[number];

const TIME_COLUMNS: ReadonlySet<SandboxColumn> = new Set(['created_at', 'ready_at', 'expires_at', 'last_activity_at', 'updated_at']);

/** The columns as `SandboxDbRow` reads them: times rendered exactly as receipts write them, bigint as float8. */
export const SANDBOX_SELECT_COLUMNS = SANDBOX_COLUMNS.map((column) =>
  TIME_COLUMNS.has(column) ? time(column) : column === 'last_stream_seq' ? 'last_stream_seq::float8 AS last_stream_seq' : column,
).join(', ');

/** Each column's PostgreSQL type, for the arrays of a multi-row `unnest` insert (jsonb goes as its JSON text). */
export const SANDBOX_COLUMN_TYPES: Readonly<Record<SandboxColumn, string>> = {
  sandbox_id: 'text',
  tenant: 'text',
  state: 'text',
  image: 'text',
  image_id: 'text',
  caps: 'jsonb',
  network: 'jsonb',
  worker_id: 'text',
  created_at: 'timestamptz',
  ready_at: 'timestamptz',
  expires_at: 'timestamptz',
  idle_seconds: 'int4',
  last_activity_at: 'timestamptz',
  operations: 'int4',
  destroy_reason: 'text',
  error_code: 'text',
  updated_at: 'timestamptz',
  head_seq: 'int4',
  head_hash: 'text',
  sealed: 'bool',
  last_stream_seq: 'int8',
};

export type SandboxValue = string | number | boolean | null;

export function sandboxValues({ view, lastStreamSeq }: SandboxRow): SandboxValue[] {
  return [
    view.id,
    view.tenant,
    view.state,
    view.image,
    view.imageId,
    view.caps === null ? null : JSON.stringify(view.caps),
    JSON.stringify(view.network),
    view.workerId,
    view.createdAt,
    view.readyAt,
    view.expiresAt,
    view.idleSeconds,
    view.lastActivityAt,
    view.operations,
    view.destroyReason,
    view.errorCode,
    view.updatedAt,
    view.headSeq,
    view.headHash,
    view.sealed,
    lastStreamSeq,
  ];
}
