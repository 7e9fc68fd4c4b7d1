import { replicasProblem } from '@cairn/config';
import { nanos } from '@nats-io/transport-node';
import type { StreamConfig } from '@nats-io/jetstream';
import { MAX_RECEIPT_BYTES } from './evidence-log.options.js';
import type { ResolvedEvidenceLogOptions } from './evidence-log.options.js';

/** Every subject of the evidence log: one per chain, under the prefix. */
export function evidenceSubjects(subjectPrefix: string): string {
  return `${subjectPrefix}.>`;
}

/**
 * The evidence stream: append-only at the broker. File storage, deletes and purges denied, no
 * limit that could drop a message (count, bytes, age, per subject), no rollup, direct gets on.
 */
export function evidenceStreamConfig(options: ResolvedEvidenceLogOptions): Partial<StreamConfig> & { name: string } {
  return {
    name: options.stream,
    description: 'Cairn evidence log: hash-chained receipts, one subject per chain. Append-only.',
    subjects: [evidenceSubjects(options.subjectPrefix)],
    retention: 'limits',
    storage: 'file',
    num_replicas: options.replicas,
    max_msgs: -1,
    max_bytes: -1,
    max_age: 0,
    max_msgs_per_subject: -1,
    max_msg_size: MAX_RECEIPT_BYTES,
    max_consumers: -1,
    discard: 'old',
    duplicate_window: nanos(options.duplicateWindowMs),
    deny_delete: true,
    deny_purge: true,
    allow_rollup_hdrs: false,
    allow_direct: true,
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
