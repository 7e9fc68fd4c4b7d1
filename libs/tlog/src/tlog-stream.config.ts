import { DEFAULT_NATS_REPLICAS, replicasProblem } from '@cairn/config';
import type { TlogNames } from '@cairn/config';
import { appendOnlyStreamConfig } from '@cairn/evidence-log';
import type { StreamConfig } from '@nats-io/jetstream';

export interface TlogOptions extends TlogNames {
  /** Replicas of the stream and of the checkpoints' bucket (CAIRN_NATS_REPLICAS). */
  replicas?: number;
  /** How long one NATS request may take (a publish's ack, a direct get, a checkpoint request). */
  requestTimeoutMs?: number;
}

export type ResolvedTlogOptions = Required<TlogOptions>;

export function resolveTlogOptions(options: TlogOptions): ResolvedTlogOptions {
  return { replicas: DEFAULT_NATS_REPLICAS, requestTimeoutMs: 5_000, ...options };
}

/** A seal statement is five short lines; anything far larger is not a leaf. */
export const MAX_LEAF_BYTES = 4096;

/** `<prefix>.leaf.<chain id>`: one subject per sealed chain, so "has this chain a leaf" is one direct get. */
export function leafSubject(subjectPrefix: string, chainId: string): string {
  return `${subjectPrefix}.leaf.${chainId}`;
}

export function leafSubjects(subjectPrefix: string): string {
  return `${subjectPrefix}.leaf.>`;
}

/** Core NATS (no stream): where a reader asks the grader to sign a checkpoint of the tree as it is now. */
export function checkpointRequestSubject(subjectPrefix: string): string {
  return `${subjectPrefix}.checkpoint.sign`;
}

/**
 * The leaves: append-only at the broker like the evidence stream — file storage, deletes and
 * purges denied, no limit that could drop a message, no rollup — and only leaves in it, so a
 * leaf's index is its stream seq minus one.
 */
export function tlogStreamConfig(options: ResolvedTlogOptions): Partial<StreamConfig> & { name: string } {
  return appendOnlyStreamConfig({
    name: options.stream,
    description: 'Cairn log of seal heads: one RFC 6962 leaf (a seal statement) per sealed chain, leaf index = stream seq - 1. Append-only.',
    subjects: [leafSubjects(options.subjectPrefix)],
    replicas: options.replicas,
    maxMsgSize: MAX_LEAF_BYTES,
    duplicateWindowMs: 120_000,
  });
}

/** What is wrong with a stream's config for holding the leaves, one line per problem. */
export function tlogStreamProblems(config: Partial<StreamConfig>, options: ResolvedTlogOptions): string[] {
  const problems: string[] = [];
  const subjects = leafSubjects(options.subjectPrefix);
  if (JSON.stringify(config.subjects ?? []) !== JSON.stringify([subjects])) problems.push(`subjects ${JSON.stringify(config.subjects ?? [])} are not [${JSON.stringify(subjects)}]: only leaves may take a seq`);
  if (config.retention !== 'limits') problems.push(`retention is ${String(config.retention)}, not limits`);
  if (config.storage !== 'file') problems.push(`storage is ${String(config.storage)}, not file`);
  for (const field of ['max_msgs', 'max_bytes', 'max_msgs_per_subject', 'max_age'] as const) {
    const value = config[field];
    if (typeof value === 'number' && value > 0) problems.push(`${field} is ${value}: a limit would drop leaves`);
  }
  if (config.deny_delete !== true) problems.push('deny_delete is off: leaves could be deleted');
  if (config.deny_purge !== true) problems.push('deny_purge is off: the log could be purged');
  if (config.allow_rollup_hdrs === true) problems.push('allow_rollup_hdrs is on');
  if (config.allow_msg_ttl === true) problems.push('allow_msg_ttl is on: a leaf could expire');
  if (config.allow_direct !== true) problems.push('allow_direct is off: leaves are read with direct gets');
  if (config.sealed === true) problems.push('sealed is on: the stream takes no appends');
  if (config.mirror !== undefined) problems.push('mirror is set: a mirror takes no appends');
  const replicas = replicasProblem(options.stream, config.num_replicas, options.replicas);
  if (replicas !== null) problems.push(replicas);
  if (config.persist_mode === 'async') problems.push('persist_mode is async: a leaf would be acknowledged before it is written');
  return problems;
}
