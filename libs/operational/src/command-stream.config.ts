import { DEFAULT_NATS_REPLICAS, replicasProblem } from '@cairn/config';
import { CairnError } from '@cairn/contracts';
import type { CommandVerb } from '@cairn/contracts';
import { DiscardPolicy, RetentionPolicy, StorageType } from '@nats-io/jetstream';
import type { StreamConfig } from '@nats-io/jetstream';
import { nanos } from '@nats-io/transport-node';

export interface CommandBusOptions {
  /** JetStream stream of the commands; default `CAIRN_COMMANDS`. */
  stream?: string;
  /** Subjects are `<prefix>.cmd.<verb>`; default `cairn`. */
  subjectPrefix?: string;
  /** A command nobody took within this is dropped: commands are requests, not evidence. Default 1 day. */
  maxAgeMs?: number;
  /** Bytes the stream may hold; past it new commands are refused (discard new). Default 256 MiB. */
  maxBytes?: number;
  /** How long a message id is remembered for dedupe; default 2 minutes. */
  duplicateWindowMs?: number;
  /** Stream replicas (CAIRN_NATS_REPLICAS); a stream with others is refused. Default 1. */
  replicas?: number;
}

export type ResolvedCommandBusOptions = Required<CommandBusOptions>;

export const DEFAULT_COMMAND_STREAM = 'CAIRN_COMMANDS';
export const DEFAULT_COMMAND_SUBJECT_PREFIX = 'cairn';
const DAY_MS = 86_400_000;
/** A RunSpec with inline files is the largest command; NATS' default max_payload is 1 MiB. */
export const MAX_COMMAND_BYTES = 1024 * 1024;

const STREAM_NAME = /^[A-Za-z0-9_-]{1,64}$/;
const SUBJECT_PREFIX = /^[a-z0-9_-]+(\.[a-z0-9_-]+)*$/;

export function resolveCommandBusOptions(options: CommandBusOptions = {}): ResolvedCommandBusOptions {
  const resolved: ResolvedCommandBusOptions = {
    stream: options.stream ?? DEFAULT_COMMAND_STREAM,
    subjectPrefix: options.subjectPrefix ?? DEFAULT_COMMAND_SUBJECT_PREFIX,
    maxAgeMs: options.maxAgeMs ?? DAY_MS,
    maxBytes: options.maxBytes ?? 256 * 1024 * 1024,
    duplicateWindowMs: options.duplicateWindowMs ?? 120_000,
    replicas: options.replicas ?? DEFAULT_NATS_REPLICAS,
  };
  const problems: string[] = [];
  if (!STREAM_NAME.test(resolved.stream)) problems.push('stream: a JetStream stream name ([A-Za-z0-9_-], at most 64)');
  if (!SUBJECT_PREFIX.test(resolved.subjectPrefix)) problems.push('subjectPrefix: dot-separated lower-case tokens');
  if (!Number.isSafeInteger(resolved.maxAgeMs) || resolved.maxAgeMs < 1000 || resolved.maxAgeMs > 7 * DAY_MS) problems.push('maxAgeMs: 1 s to 7 days');
  if (!Number.isSafeInteger(resolved.maxBytes) || resolved.maxBytes < MAX_COMMAND_BYTES) problems.push(`maxBytes: at least ${MAX_COMMAND_BYTES}`);
  if (!Number.isSafeInteger(resolved.duplicateWindowMs) || resolved.duplicateWindowMs < 1000 || resolved.duplicateWindowMs > resolved.maxAgeMs) {
    problems.push('duplicateWindowMs: at least 1 s and at most maxAgeMs');
  }
  if (!Number.isInteger(resolved.replicas) || resolved.replicas < 1 || resolved.replicas > 5) problems.push('replicas: 1 to 5');
  if (problems.length > 0) throw new CairnError('E_INPUT', `invalid command bus options: ${problems.join('; ')}`, { problems });
  return resolved;
}

/** `<prefix>.cmd.<verb>`. */
export function commandSubject(subjectPrefix: string, verb: CommandVerb): string {
  return `${subjectPrefix}.cmd.${verb}`;
}

/**
 * A work queue: each command is taken by one consumer and removed when acked; bounded in age and
 * size, refusing new commands when full rather than dropping queued ones.
 */
export function commandStreamConfig(options: ResolvedCommandBusOptions): Partial<StreamConfig> & { name: string; subjects: string[] } {
  return {
    name: options.stream,
    subjects: [`${options.subjectPrefix}.cmd.>`],
    retention: RetentionPolicy.Workqueue,
    storage: StorageType.File,
    discard: DiscardPolicy.New,
    max_age: nanos(options.maxAgeMs),
    max_bytes: options.maxBytes,
    max_msg_size: MAX_COMMAND_BYTES,
    duplicate_window: nanos(options.duplicateWindowMs),
    num_replicas: options.replicas,
  };
}

/** Why an existing stream cannot serve as the command bus; empty when it can. */
export function commandStreamProblems(existing: Partial<StreamConfig>, options: ResolvedCommandBusOptions): string[] {
  const problems: string[] = [];
  const wanted = `${options.subjectPrefix}.cmd.>`;
  if (existing.retention !== RetentionPolicy.Workqueue) problems.push(`retention is ${String(existing.retention)}, not workqueue`);
  if (!(existing.subjects ?? []).includes(wanted)) problems.push(`subjects do not include ${wanted}`);
  if (existing.max_age === undefined || existing.max_age === 0) problems.push('max_age is unlimited: commands must expire');
  const replicas = replicasProblem(options.stream, existing.num_replicas, options.replicas);
  if (replicas !== null) problems.push(replicas);
  if (existing.persist_mode === 'async') problems.push('persist_mode is async: a command would be acknowledged before it is written');
  return problems;
}
