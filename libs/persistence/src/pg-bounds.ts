import { CairnError, isCairnError } from '@cairn/contracts';

/**
 * Every wait on PostgreSQL is bounded (issue 18): a server that accepts and never answers, a
 * statement that hangs on a lock, a peer that vanished without a FIN — each ends in time as
 * E_UNAVAILABLE instead of stalling the service behind it.
 */
export const PG_CONNECT_TIMEOUT_MS = 5_000;
export const PG_STATEMENT_TIMEOUT_MS = 30_000;
/** TCP keepalive probes start after this much silence, so a dead peer is noticed by the kernel. */
export const PG_KEEPALIVE_DELAY_MS = 10_000;

export interface PgBounds {
  /** To connect and authenticate; default PG_CONNECT_TIMEOUT_MS. */
  connectTimeoutMs?: number;
  /** The server's `statement_timeout` (0: none, for a rebuild's or a migration's long statements); default PG_STATEMENT_TIMEOUT_MS. */
  statementTimeoutMs?: number;
}

/** The node-postgres pool or client settings that bound every wait (pass as TypeORM's `extra`, or to `pg.Client`). */
export function boundedPgSettings(bounds: PgBounds = {}): Record<string, number | boolean> {
  const connect = bounds.connectTimeoutMs ?? PG_CONNECT_TIMEOUT_MS;
  const statement = bounds.statementTimeoutMs ?? PG_STATEMENT_TIMEOUT_MS;
  return {
    connectionTimeoutMillis: connect,
    keepAlive: true,
    keepAliveInitialDelayMillis: PG_KEEPALIVE_DELAY_MS,
    ...(statement > 0
      ? {
          statement_timeout: statement,
          // The client's own bound, a little past the server's: a server that stopped answering mid-query.
          query_timeout: statement + connect,
          // A transaction left open by a stalled client must not hold its locks for ever.
          idle_in_transaction_session_timeout: statement * 2,
        }
      : {}),
  };
}

const UNAVAILABLE_PATTERNS: readonly [RegExp, string][] = [
  [/timeout expired|connection timeout|Connection terminated due to connection timeout/i, 'did not answer the connection in time'],
  [/canceling statement due to statement timeout/i, 'did not finish a statement in time (statement_timeout)'],
  [/Query read timeout/i, 'stopped answering a query (query_timeout)'],
  [/ECONNREFUSED|ENOTFOUND|EHOSTUNREACH|ECONNRESET|Connection terminated/i, 'is not reachable'],
];

/**
 * A PostgreSQL failure that means the database cannot be used now, as E_UNAVAILABLE naming `what`
 * and why; anything else (a constraint, bad SQL) is returned as it is.
 */
export function pgUnavailable(error: unknown, what: string): unknown {
  if (isCairnError(error)) return error;
  const message = error instanceof Error ? error.message : String(error);
  const code = (error as { code?: unknown } | null)?.code;
  const matched = UNAVAILABLE_PATTERNS.find(([pattern]) => pattern.test(message) || (typeof code === 'string' && pattern.test(code)));
  if (matched === undefined && code !== '57014' && code !== '57P01') return error;
  return new CairnError('E_UNAVAILABLE', `PostgreSQL (${what}) ${matched?.[1] ?? 'cancelled the statement'}: ${message}`);
}
