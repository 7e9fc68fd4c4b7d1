import { replicasProblem } from '@cairn/config';
import { nanos } from '@nats-io/transport-node';
import type { StreamConfig } from '@nats-io/jetstream';
import { MAX_RECEIPT_BYTES } from './evidence-log.options.js';
import type { ResolvedEvidenceLogOptions } from './evidence-log.options.js';

/** Every subject of the evidence log: `<prefix>.<chain id>.<type>`, under the prefix. */
export function evidenceSubjects(subjectPrefix: string): string {
  return `${subjectPrefix}.>`;
}

/**
 * The subject layout of the log, kept in the stream's metadata (`cairn.subject_layout`): 2 is
 * `<prefix>.<chain id>.<type>` (docs/adr/0012). A stream without it was written by the earlier
 * layout, one subject per chain (`<prefix>.<chain id>`), and is refused until `cairn log migrate`.
 */
export const SUBJECT_LAYOUT_KEY = 'cairn.subject_layout';
export const SUBJECT_LAYOUT = '2';
/** Set on a stream `cairn log migrate` is still filling: nothing else may append to it yet. */
export const MIGRATING_FROM_KEY = 'cairn.migrating_from';
/** The command that copies a log of the earlier layout into the current one. */
export const MIGRATE_COMMAND = 'cairn log migrate';

// A receipt type as a subject: dot-separated lower-case tokens (`run.submitted`), never a wildcard.
const TYPE_TOKENS = /^[a-z0-9_]+(\.[a-z0-9_]+)*$/;

/** Whether `type` can be the tail of an evidence subject. */
export function isSubjectType(type: string): boolean {
  return TYPE_TOKENS.test(type);
}

/** `<prefix>.<chain id>.<type>`: where a receipt of `type` on a chain is stored. Chain id and type must be checked first. */
export function evidenceSubject(subjectPrefix: string, chainId: string, type: string): string {
  return `${subjectPrefix}.${chainId}.${type}`;
}

/** `<prefix>.<chain id>.>`: every receipt of one chain — its head, its reads and its one compare-and-set. */
export function chainSubjects(subjectPrefix: string, chainId: string): string {
  return `${subjectPrefix}.${chainId}.>`;
}

/** `<prefix>.*.<type>`: every receipt of one type, whatever its chain — a consumer's filter. */
export function typeSubjects(subjectPrefix: string, type: string): string {
  return `${subjectPrefix}.*.${type}`;
}

/** The chain id and the type a subject of the log names, or null when it is not `<prefix>.<token>.<type>`. */
export function parseEvidenceSubject(subjectPrefix: string, subject: string): { chainId: string; type: string } | null {
  if (!subject.startsWith(`${subjectPrefix}.`)) return null;
  const rest = subject.slice(subjectPrefix.length + 1);
  const dot = rest.indexOf('.');
  if (dot <= 0) return null;
  const type = rest.slice(dot + 1);
  return isSubjectType(type) ? { chainId: rest.slice(0, dot), type } : null;
}

/**
 * The evidence stream: append-only at the broker. File storage, deletes and purges denied, no
 * limit that could drop a message (count, bytes, age, per subject), no rollup, direct gets on.
 */
/**
 * A stream nothing may shrink: file storage, no limit that could drop a message (count, bytes, age,
 * per subject), deletes, purges and rollups denied, direct gets on. The evidence log and the log of
 * seal heads are both this.
 */
export function appendOnlyStreamConfig(options: { name: string; description: string; subjects: string[]; replicas: number; maxMsgSize: number; duplicateWindowMs: number }): Partial<StreamConfig> & { name: string } {
  return {
    name: options.name,
    description: options.description,
    subjects: options.subjects,
    retention: 'limits',
    storage: 'file',
    num_replicas: options.replicas,
    max_msgs: -1,
    max_bytes: -1,
    max_age: 0,
    max_msgs_per_subject: -1,
    max_msg_size: options.maxMsgSize,
    discard: 'old',
    duplicate_window: nanos(options.duplicateWindowMs),
    deny_delete: true,
    deny_purge: true,
    allow_rollup_hdrs: false,
    allow_direct: true,
  };
}

export function evidenceStreamConfig(options: ResolvedEvidenceLogOptions): Partial<StreamConfig> & { name: string } {
  return {
    ...appendOnlyStreamConfig({
      name: options.stream,
      description: 'Cairn evidence log: hash-chained receipts, a subject per chain and type. Append-only.',
      subjects: [evidenceSubjects(options.subjectPrefix)],
      replicas: options.replicas,
      maxMsgSize: MAX_RECEIPT_BYTES,
      duplicateWindowMs: options.duplicateWindowMs,
    }),
    max_consumers: -1,
    // Receipts that belong together (a secret's redactions and the run's end, a grade and the seal) are stored all or none.
    allow_atomic: true,
    metadata: { [SUBJECT_LAYOUT_KEY]: SUBJECT_LAYOUT },
  };
}

/**
 * What is wrong with a stream's active config for holding evidence, one line per problem, each
 * naming the field. `created` adds the settings this process asked for: a 2.9 server silently
 * drops fields it does not know, so what it kept is checked, not assumed.
 */
export function evidenceStreamProblems(
  config: Partial<StreamConfig>,
  options: ResolvedEvidenceLogOptions,
  created: boolean,
): string[] {
  const problems: string[] = [];
  const limit = (field: 'max_msgs' | 'max_bytes' | 'max_msgs_per_subject' | 'max_age') => {
    const value = config[field];
    // The server stores "unlimited" as -1 (counts) or 0 (age); anything positive drops messages.
    if (typeof value === 'number' && value > 0) problems.push(`${field} is ${value}: a limit would drop evidence`);
  };
  const subjects = evidenceSubjects(options.subjectPrefix);
  if (!(config.subjects ?? []).includes(subjects)) {
    problems.push(`subjects ${JSON.stringify(config.subjects ?? [])} do not include ${subjects}`);
  }
  if (config.retention !== 'limits') problems.push(`retention is ${String(config.retention)}: only limits retention keeps consumed messages`);
  if (config.storage !== 'file') problems.push(`storage is ${String(config.storage)}: evidence needs file storage`);
  limit('max_msgs');
  limit('max_bytes');
  limit('max_msgs_per_subject');
  limit('max_age');
  if (config.deny_delete !== true) problems.push('deny_delete is off: messages could be deleted');
  if (config.deny_purge !== true) problems.push('deny_purge is off: the stream could be purged');
  if (config.allow_rollup_hdrs === true) problems.push('allow_rollup_hdrs is on: a rollup header would purge a chain');
  if (config.allow_msg_ttl === true) problems.push('allow_msg_ttl is on: a per-message TTL would expire evidence');
  if (config.allow_direct !== true) problems.push('allow_direct is off: chain heads are read with direct gets');
  if (config.allow_atomic !== true) problems.push('allow_atomic is off: receipts that belong together are appended as one atomic batch');
  if (config.no_ack === true) problems.push('no_ack is on: appends need acknowledgements');
  if (config.sealed === true) problems.push('sealed is on: the stream takes no appends');
  if (config.mirror !== undefined) problems.push('mirror is set: a mirror takes no appends');
  const replicas = replicasProblem(options.stream, config.num_replicas, options.replicas);
  if (replicas !== null) problems.push(replicas);
  if (config.persist_mode === 'async') problems.push('persist_mode is async: appends would be acknowledged before they are written');
  if (created) {
    if (config.duplicate_window !== nanos(options.duplicateWindowMs)) {
      problems.push(`duplicate_window is ${String(config.duplicate_window)}, not the ${nanos(options.duplicateWindowMs)} asked for`);
    }
    if (config.max_msg_size !== MAX_RECEIPT_BYTES) {
      problems.push(`max_msg_size is ${String(config.max_msg_size)}, not the ${MAX_RECEIPT_BYTES} asked for`);
    }
  }
  return problems;
}

/**
 * Why a stream holds another subject layout than this one (null when it is this one): a stream
 * written by the earlier layout — no `cairn.subject_layout` in its metadata — or one a migration is
 * still filling. Each names what to run.
 */
export function evidenceLayoutProblem(config: Partial<StreamConfig>): string | null {
  const metadata = config.metadata ?? {};
  const migratingFrom = metadata[MIGRATING_FROM_KEY];
  if (typeof migratingFrom === 'string' && migratingFrom !== '') {
    return `it is being filled by \`${MIGRATE_COMMAND}\` from ${migratingFrom}: let it finish (run it again if it stopped)`;
  }
  const layout = metadata[SUBJECT_LAYOUT_KEY];
  if (layout === SUBJECT_LAYOUT) return null;
  if (layout === undefined) {
    return `it holds the earlier subject layout (<prefix>.<chain id>, one subject per chain); run \`${MIGRATE_COMMAND}\` to copy it, every chain verified, into the current one (<prefix>.<chain id>.<type>)`;
  }
  return `its subject layout is ${JSON.stringify(layout)}, and this Cairn knows only ${SUBJECT_LAYOUT}`;
}
