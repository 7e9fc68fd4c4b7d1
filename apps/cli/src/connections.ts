import { EvidenceLogConfigSchema, DatabaseConfigSchema, loadConfig, redactUrl } from '@cairn/config';
import { CairnError, isCairnError } from '@cairn/contracts';
import { connectNats, EvidenceLog, evidenceLogOptionsFromConfig } from '@cairn/evidence-log';
import { jetstreamManager, JetStreamApiCodes, JetStreamApiError } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';

/** How long the CLI waits for NATS or PostgreSQL before saying it cannot reach them. */
export const CONNECT_TIMEOUT_MS = 5_000;

const START_HINT = 'start the services with `bash tools/ensure-services.sh` (or point the variable at a running server)';

function causeOf(error: unknown): string {
  if (isCairnError(error)) return error.message;
  if (error instanceof Error) {
    const code = 'code' in error && typeof error.code === 'string' && !error.message.includes(error.code) ? `${error.code}: ` : '';
    return `${code}${error.message}`;
  }
  return String(error);
}

/** `E_UNAVAILABLE` naming the server, where the CLI looked for it, and what to start. */
export function unavailableError(server: 'NATS' | 'PostgreSQL', variable: string, url: string, cause: unknown): CairnError {
  return new CairnError('E_UNAVAILABLE', `cannot reach ${server} at ${redactUrl(url)} (${variable}): ${causeOf(cause)}; ${START_HINT}`, {
    server,
    variable,
    url: redactUrl(url),
  });
}

/** Rejects after `ms` unless `work` settles first; the timer never keeps the process alive. */
export async function withTimeout<T>(work: Promise<T>, ms: number, onTimeout: () => Error): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(onTimeout()), ms);
    timer.unref();
  });
  try {
    return await Promise.race([work, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** An evidence log on a connection the CLI opened (with a short timeout) and closes. */
export interface OpenEvidenceLog {
  log: EvidenceLog;
  close(): Promise<void>;
}

export interface OpenEvidenceLogOptions {
  /**
   * Reading commands set this: a stream that does not exist is E_NOT_FOUND instead of being
   * created as a side effect of a read.
   */
  mustExist?: boolean;
}

/** The NATS credentials file the environment names (CAIRN_NATS_CREDS_FILE), as `connectNats` takes it. */
export function credsOf(config: { CAIRN_NATS_CREDS_FILE?: string | undefined }): { credsFile?: string } {
  return config.CAIRN_NATS_CREDS_FILE === undefined ? {} : { credsFile: config.CAIRN_NATS_CREDS_FILE };
}

/** Opens the evidence log named by the environment, or fails fast with E_UNAVAILABLE. */
export async function openEvidenceLog(env: NodeJS.ProcessEnv, options: OpenEvidenceLogOptions = {}): Promise<OpenEvidenceLog> {
  const config = loadConfig(EvidenceLogConfigSchema, env);
  const url = config.CAIRN_NATS_URL;
  let nc: NatsConnection;
  try {
    nc = await connectNats({ servers: url, name: 'cairn-cli', timeout: CONNECT_TIMEOUT_MS, maxReconnectAttempts: 0, noAsyncTraces: false, ...credsOf(config) });
  } catch (error) {
    // A server too old for the log, refused or unreadable credentials say so in their own words; anything else is "cannot reach".
    if (isCairnError(error) && (error.details?.['minimum'] !== undefined || error.code === 'E_UNAUTHORIZED' || error.code === 'E_INPUT')) throw error;
    throw unavailableError('NATS', 'CAIRN_NATS_URL', url, error);
  }
  const close = async () => {
    if (!nc.isClosed()) await nc.close();
  };
  try {
    if (options.mustExist === true) await assertStreamExists(nc, config.CAIRN_EVIDENCE_STREAM);
    const log = await withTimeout(
      EvidenceLog.fromConnection(nc, evidenceLogOptionsFromConfig(config)),
      CONNECT_TIMEOUT_MS,
      () => new Error(`JetStream gave no answer within ${CONNECT_TIMEOUT_MS} ms`),
    );
    return { log, close };
  } catch (error) {
    await close();
    // The log's own errors (a stream unfit for evidence, …) already say what is wrong.
    if (isCairnError(error)) throw error;
    throw unavailableError('NATS', 'CAIRN_NATS_URL', url, error);
  }
}

async function assertStreamExists(nc: NatsConnection, stream: string): Promise<void> {
  const jsm = await withTimeout(jetstreamManager(nc), CONNECT_TIMEOUT_MS, () => new Error(`JetStream gave no answer within ${CONNECT_TIMEOUT_MS} ms`));
  try {
    await jsm.streams.info(stream);
  } catch (error) {
    if (error instanceof JetStreamApiError && error.code === JetStreamApiCodes.StreamNotFound) {
      throw new CairnError('E_NOT_FOUND', `the evidence stream ${stream} does not exist (CAIRN_EVIDENCE_STREAM): nothing has been recorded there yet`, { stream });
    }
    throw error;
  }
}

export function databaseUrl(env: NodeJS.ProcessEnv): string {
  return loadConfig(DatabaseConfigSchema, env).CAIRN_DATABASE_URL;
}

/**
 * Errors that mean "PostgreSQL is not there for us": refused, unreachable, timed out, starting
 * up, the database missing or the credentials refused. Anything else (a failing migration, a bug)
 * keeps its own error.
 */
const POSTGRES_UNREACHABLE = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN', '57P03', '3D000', '28P01', '28000']);

export function isPostgresUnreachable(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  if ('code' in error && typeof error.code === 'string' && POSTGRES_UNREACHABLE.has(error.code)) return true;
  if (error instanceof AggregateError) return error.errors.some(isPostgresUnreachable);
  return 'cause' in error && isPostgresUnreachable(error.cause);
}

/**
 * Runs database work, turning "cannot reach PostgreSQL" into E_UNAVAILABLE; with `timeoutMs`, no
 * answer in time counts as unreachable too.
 */
export async function withPostgres<T>(url: string, work: () => Promise<T>, timeoutMs?: number): Promise<T> {
  try {
    if (timeoutMs === undefined) return await work();
    return await withTimeout(work(), timeoutMs, () => Object.assign(new Error(`no answer within ${timeoutMs} ms`), { code: 'ETIMEDOUT' }));
  } catch (error) {
    if (isPostgresUnreachable(error)) throw unavailableError('PostgreSQL', 'CAIRN_DATABASE_URL', url, error);
    throw error;
  }
}
