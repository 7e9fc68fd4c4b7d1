import { CairnError } from '@cairn/contracts';
import { DEFAULT_NATS_REPLICAS } from '@cairn/config';
import type { EvidenceLogConfig } from '@cairn/config';

export interface EvidenceLogOptions {
  /** One NATS URL, or several separated by commas. */
  servers: string;
  stream: string;
  subjectPrefix: string;
  /** JetStream's duplicate window for message ids; default 10 minutes. */
  duplicateWindowMs?: number;
  /** Stream replicas (CAIRN_NATS_REPLICAS): the stream is created with them, and one with others is refused; default 1. */
  replicas?: number;
  /** Connection name shown by the server (only for connections the log opens itself). */
  name?: string;
  /** Publish attempts per append before a conflict gives up (E_CONFLICT); default 32. */
  maxAttempts?: number;
  /** How many chain heads are kept in memory; default 10 000. */
  headCacheSize?: number;
  /** How long an append waits for JetStream's ack before it re-reads the head; default 5 s. */
  publishTimeoutMs?: number;
  /**
   * The receipt types this process may append (its row of SERVICE_ROUTES, docs/adr/0022); any other
   * is E_FORBIDDEN before anything is published. Absent: any type (tools and tests).
   */
  appends?: ReadonlySet<string>;
  /** The NATS credentials file (CAIRN_NATS_CREDS_FILE) for a connection the log opens itself. */
  credsFile?: string;
}

export type ResolvedEvidenceLogOptions = Required<Omit<EvidenceLogOptions, 'appends' | 'credsFile'>> & { appends: ReadonlySet<string> | null; credsFile: string | null };

export const DEFAULT_DUPLICATE_WINDOW_MS = 10 * 60_000;
export const DEFAULT_MAX_ATTEMPTS = 32;
export const DEFAULT_HEAD_CACHE_SIZE = 10_000;
export const DEFAULT_PUBLISH_TIMEOUT_MS = 5_000;
export const DEFAULT_CONNECTION_NAME = 'cairn-evidence-log';
/** The stream's `max_msg_size`: a receipt is small; anything near this belongs in an artifact. */
export const MAX_RECEIPT_BYTES = 1024 * 1024;

const STREAM_NAME = /^[A-Za-z0-9_-]{1,64}$/;
// Lower-case tokens only: the chain id is appended as one more token, and no token may be a wildcard.
const SUBJECT_PREFIX = /^[a-z0-9_-]+(\.[a-z0-9_-]+)*$/;

/** Fills the defaults and refuses options that would make a broken or unsafe log (E_INPUT). */
export function resolveEvidenceLogOptions(options: EvidenceLogOptions): ResolvedEvidenceLogOptions {
  const problems: string[] = [];
  if (options.servers.trim() === '') problems.push('servers: empty');
  if (!STREAM_NAME.test(options.stream)) problems.push('stream: a JetStream stream name ([A-Za-z0-9_-], at most 64)');
  if (!SUBJECT_PREFIX.test(options.subjectPrefix)) problems.push('subjectPrefix: dot-separated lower-case tokens');
  const resolved: ResolvedEvidenceLogOptions = {
    servers: options.servers,
    stream: options.stream,
    subjectPrefix: options.subjectPrefix,
    duplicateWindowMs: options.duplicateWindowMs ?? DEFAULT_DUPLICATE_WINDOW_MS,
    replicas: options.replicas ?? DEFAULT_NATS_REPLICAS,
    name: options.name ?? DEFAULT_CONNECTION_NAME,
    maxAttempts: options.maxAttempts ?? DEFAULT_MAX_ATTEMPTS,
    headCacheSize: options.headCacheSize ?? DEFAULT_HEAD_CACHE_SIZE,
    publishTimeoutMs: options.publishTimeoutMs ?? DEFAULT_PUBLISH_TIMEOUT_MS,
    appends: options.appends ?? null,
    credsFile: options.credsFile ?? null,
  };
  if (!Number.isSafeInteger(resolved.duplicateWindowMs) || resolved.duplicateWindowMs < 1000) {
    problems.push('duplicateWindowMs: an integer of at least 1000');
  }
  if (!Number.isInteger(resolved.replicas) || resolved.replicas < 1 || resolved.replicas > 5) problems.push('replicas: 1 to 5');
  if (!Number.isInteger(resolved.maxAttempts) || resolved.maxAttempts < 1) problems.push('maxAttempts: a positive integer');
  if (!Number.isInteger(resolved.headCacheSize) || resolved.headCacheSize < 1) problems.push('headCacheSize: a positive integer');
  if (!Number.isInteger(resolved.publishTimeoutMs) || resolved.publishTimeoutMs < 100) problems.push('publishTimeoutMs: an integer of at least 100');
  if (problems.length > 0) {
    throw new CairnError('E_INPUT', `invalid evidence log options: ${problems.join('; ')}`, { problems });
  }
  return resolved;
}

/** The log's options from the validated process configuration (`EvidenceLogConfigSchema`). */
export function evidenceLogOptionsFromConfig(
  config: EvidenceLogConfig,
  overrides: Omit<EvidenceLogOptions, 'servers' | 'stream' | 'subjectPrefix'> = {},
): EvidenceLogOptions {
  return {
    replicas: config.CAIRN_NATS_REPLICAS,
    ...(config.CAIRN_NATS_CREDS_FILE === undefined ? {} : { credsFile: config.CAIRN_NATS_CREDS_FILE }),
    ...overrides,
    servers: config.CAIRN_NATS_URL,
    stream: config.CAIRN_EVIDENCE_STREAM,
    subjectPrefix: config.CAIRN_EVIDENCE_SUBJECT_PREFIX,
  };
}
