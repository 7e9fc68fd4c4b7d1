import { CairnError } from '@cairn/contracts';
import { createHash } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import { z } from 'zod';
import { NatsReplicasSchema } from './nats-cluster.js';

/**
 * Reads one app's configuration from the environment, once, through a zod schema whose keys are
 * the variable names. A missing or malformed variable stops the process at boot with a message
 * that names it (and never echoes its value: it may be a credential).
 */
export function loadConfig<S extends z.ZodObject>(schema: S, env: NodeJS.ProcessEnv = process.env): z.infer<S> {
  const picked: Record<string, string> = {};
  for (const key of Object.keys(schema.shape)) {
    const value = env[key];
    if (value !== undefined && value !== '') picked[key] = value;
  }
  const parsed = schema.safeParse(picked);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => `${issue.path.join('.') || '(config)'}: ${issue.message}`);
    throw new CairnError('E_INPUT', `invalid configuration: ${problems.join('; ')}`, {
      variables: parsed.error.issues.map((issue) => issue.path.join('.')),
    });
  }
  const data = parsed.data as Record<string, unknown>;
  if (typeof data.CAIRN_DATABASE_PASSWORD_FILE === 'string' && typeof data.CAIRN_DATABASE_URL === 'string') {
    data.CAIRN_DATABASE_URL = withPasswordFrom(data.CAIRN_DATABASE_URL, data.CAIRN_DATABASE_PASSWORD_FILE);
  }
  return parsed.data;
}

function configError(variable: string, message: string): CairnError {
  return new CairnError('E_INPUT', `invalid configuration: ${variable}: ${message}`, { variables: [variable] });
}

/**
 * The database URL with the password of CAIRN_DATABASE_PASSWORD_FILE in it (read once, at boot; the
 * URL then lives in memory only). The file is one line, mode 0600 or stricter — a file others may
 * read, an empty one, or a URL that carries a password of its own stops the process, naming the variable.
 */
function withPasswordFrom(url: string, file: string): string {
  const variable = 'CAIRN_DATABASE_PASSWORD_FILE';
  let text: string;
  try {
    const { mode } = statSync(file);
    if ((mode & 0o077) !== 0) throw configError(variable, `${file} may be read by others (mode ${(mode & 0o777).toString(8)}); chmod 600 it`);
    text = readFileSync(file, 'utf8');
  } catch (error) {
    if (error instanceof CairnError) throw error;
    throw configError(variable, `cannot read ${file}: ${(error as NodeJS.ErrnoException).code ?? String(error)}`);
  }
  const password = text.replace(/\r?\n$/, '');
  if (password === '' || /[\r\n]/.test(password)) throw configError(variable, `${file} must hold one line, the password`);
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw configError('CAIRN_DATABASE_URL', 'not a URL');
  }
  if (parsed.password !== '') throw configError('CAIRN_DATABASE_URL', `carries a password and ${variable} is set too; keep the password in the file only`);
  if (parsed.username === '') throw configError('CAIRN_DATABASE_URL', `names no role, and ${variable} is set`);
  parsed.password = encodeURIComponent(password);
  return parsed.toString();
}

export const DEFAULT_NATS_URL = 'nats://127.0.0.1:4222';
export const DEFAULT_DATABASE_URL = 'postgres://cairn:cairn@127.0.0.1:5432/cairn';
export const DEFAULT_EVIDENCE_STREAM = 'CAIRN_EVIDENCE';
export const DEFAULT_EVIDENCE_SUBJECT_PREFIX = 'cairn.evidence';

const natsUrl = z
  .string()
  .regex(/^(nats|tls):\/\/[^\s]+$/, 'a nats:// or tls:// URL')
  .default(DEFAULT_NATS_URL);
const streamName = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'a JetStream stream name');
const subjectPrefix = z.string().regex(/^[a-z0-9_-]+(\.[a-z0-9_-]+)*$/, 'dot-separated lower-case tokens');

/** What every process that touches the evidence log reads. */
export const EvidenceLogConfigSchema = z.object({
  /** One URL or several, comma-separated (the servers of a cluster). */
  CAIRN_NATS_URL: natsUrl,
  CAIRN_NATS_REPLICAS: NatsReplicasSchema,
  CAIRN_EVIDENCE_STREAM: streamName.default(DEFAULT_EVIDENCE_STREAM),
  CAIRN_EVIDENCE_SUBJECT_PREFIX: subjectPrefix.default(DEFAULT_EVIDENCE_SUBJECT_PREFIX),
  /**
   * A file holding this process's NATS nkey seed (mode 0600; docs/adr/0022), read at boot. A path,
   * never the credential: unset, the process connects without credentials (an open server).
   */
  CAIRN_NATS_CREDS_FILE: z.string().min(1).optional(),
});
export type EvidenceLogConfig = z.infer<typeof EvidenceLogConfigSchema>;

/**
 * The log of seal heads (docs/proofs.md, ADR 0020): a stream of one leaf per sealed chain and a
 * bucket of signed checkpoints. Unset, the names derive from the evidence stream's, so every
 * stack and every test world that has its own evidence stream has its own log too.
 */
export const TlogConfigSchema = z.object({
  CAIRN_TLOG_STREAM: streamName.optional(),
  CAIRN_TLOG_SUBJECT_PREFIX: subjectPrefix.optional(),
  CAIRN_TLOG_CHECKPOINT_BUCKET: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'a KV bucket name').optional(),
});
export type TlogConfig = z.infer<typeof TlogConfigSchema>;

export interface TlogNames {
  stream: string;
  subjectPrefix: string;
  checkpointBucket: string;
}

/** A stream or bucket name of at most 64 characters: a longer one keeps its head and a hash of the whole, so it stays unique. */
function fitName(name: string): string {
  return name.length <= 64 ? name : `${name.slice(0, 47)}_${createHash('sha256').update(name).digest('hex').slice(0, 16)}`;
}

/** The log's names beside an evidence stream: `<stream>_TLOG`, `<prefix>_tlog` (never under the evidence prefix), `<stream>_TLOG_CHECKPOINTS`. */
export function tlogNamesFor(evidenceStream: string, evidenceSubjectPrefix: string): TlogNames {
  return { stream: fitName(`${evidenceStream}_TLOG`), subjectPrefix: `${evidenceSubjectPrefix}_tlog`, checkpointBucket: fitName(`${evidenceStream}_TLOG_CHECKPOINTS`) };
}

/** The log's names from configuration: each variable set wins, the rest derive from the evidence log's. */
export function tlogNames(config: EvidenceLogConfig & TlogConfig): TlogNames {
  const derived = tlogNamesFor(config.CAIRN_EVIDENCE_STREAM, config.CAIRN_EVIDENCE_SUBJECT_PREFIX);
  const names = {
    stream: config.CAIRN_TLOG_STREAM ?? derived.stream,
    subjectPrefix: config.CAIRN_TLOG_SUBJECT_PREFIX ?? derived.subjectPrefix,
    checkpointBucket: config.CAIRN_TLOG_CHECKPOINT_BUCKET ?? derived.checkpointBucket,
  };
  if (names.subjectPrefix === config.CAIRN_EVIDENCE_SUBJECT_PREFIX || names.subjectPrefix.startsWith(`${config.CAIRN_EVIDENCE_SUBJECT_PREFIX}.`)) {
    throw new CairnError('E_INPUT', 'invalid configuration: CAIRN_TLOG_SUBJECT_PREFIX: under CAIRN_EVIDENCE_SUBJECT_PREFIX, the evidence stream would take the leaves', { variables: ['CAIRN_TLOG_SUBJECT_PREFIX'] });
  }
  return names;
}

/** What every process that touches the projections reads. */
export const DatabaseConfigSchema = z.object({
  CAIRN_DATABASE_URL: z
    .string()
    .regex(/^postgres(ql)?:\/\/[^\s]+$/, 'a postgres:// URL')
    .default(DEFAULT_DATABASE_URL),
  /**
   * A file (mode 0600) holding the password of the URL's role, read at boot into the URL in memory
   * (docs/adr/0032): a path, never the credential, so no password is in a process's environment.
   */
  CAIRN_DATABASE_PASSWORD_FILE: z.string().min(1).optional(),
});
export type DatabaseConfig = z.infer<typeof DatabaseConfigSchema>;

/** The stack's secret catalog bucket when CAIRN_SECRETS_BUCKET is unset (its stream is `KV_cairn_secrets`); an isolated stack's is `cairn_secrets_<stack id>`. */
export const DEFAULT_SECRETS_BUCKET = 'cairn_secrets';

/** Where the secret catalog is (ADR 0028): one KV bucket of the stack, written by the gateway, read by policy and the runtime workers. */
export const SecretCatalogConfigSchema = z.object({
  CAIRN_SECRETS_BUCKET: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'a KV bucket name').default(DEFAULT_SECRETS_BUCKET),
});
export type SecretCatalogConfig = z.infer<typeof SecretCatalogConfigSchema>;

/**
 * What a service that opens a run's secrets needs (the runtime; the kernel, verifier and grader,
 * which scan a run's derived text with them): the catalog bucket and the deployment's private key
 * file (ADR 0028). Without the key file a run that lists secrets is not served (its reaction fails
 * E_RUNTIME_ABSENT and is delivered again).
 */
export const SecretValuesConfigSchema = DatabaseConfigSchema.extend({
  ...SecretCatalogConfigSchema.shape,
  CAIRN_SECRETS_PRIVATE_KEY_FILE: z.string().min(1).optional(),
});
export type SecretValuesConfig = z.infer<typeof SecretValuesConfigSchema>;

const MIB = 1024 * 1024;

/** The object store bucket of a stack's artifacts when CAIRN_ARTIFACT_BUCKET is unset (its stream is `OBJ_cairn_artifacts`). */
export const DEFAULT_ARTIFACT_BUCKET = 'cairn_artifacts';

/** Where every artifact is: one JetStream object store, named alike by its writer (the runtime) and its readers. */
export const ArtifactBucketConfigSchema = z.object({
  CAIRN_ARTIFACT_BUCKET: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,64}$/, 'an object store bucket name ([A-Za-z0-9_-], at most 64)')
    .default(DEFAULT_ARTIFACT_BUCKET),
});

/** The object store as its maker sets it up (the runtime, or `cairn up --nats-auth` as the operator). */
export const ArtifactStoreConfigSchema = ArtifactBucketConfigSchema.extend({
  /**
   * The object store's max_bytes, set when it is created (an existing store keeps its own): past it
   * a put is refused and the run fails E_CAPACITY; nothing stored is dropped.
   */
  CAIRN_ARTIFACT_STORE_MAX_BYTES: z.coerce.number().int().min(64 * 1024).max(2 ** 50).default(4 * 1024 * MIB),
});

/**
 * How the services that read a run's artifacts (kernel, verifier, grader) find and bound them. One
 * schema, so the kernel and the verifier — which recomputes the kernel's facts — cannot drift apart.
 * They read the object store through NATS, never a directory (docs/adr/0021-artifacts-in-an-object-store.md).
 */
export const ArtifactReadConfigSchema = ArtifactBucketConfigSchema.extend({
  /** Largest artifact (a step's stdout, an output file) read; a larger one counts as unavailable. */
  CAIRN_ARTIFACT_READ_MAX_BYTES: z.coerce.number().int().min(1).max(1024 * MIB).default(64 * MIB),
  /** All of one run's artifacts together. */
  CAIRN_RUN_READ_MAX_BYTES: z.coerce.number().int().min(1).max(16 * 1024 * MIB).default(256 * MIB),
});
export type ArtifactReadConfig = z.infer<typeof ArtifactReadConfigSchema>;
