import { NatsReplicasSchema } from '@cairn/config';
import { z } from 'zod';
import { DEFAULT_COMMAND_STREAM, DEFAULT_COMMAND_SUBJECT_PREFIX } from './command-stream.config.js';
import type { CommandBusOptions } from './command-stream.config.js';
import { DEFAULT_LEASES_BUCKET } from './lease-store.adapter.js';
import { DEFAULT_WORKERS_BUCKET } from './worker-registry.adapter.js';

const streamName = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'a JetStream stream name ([A-Za-z0-9_-], at most 64)');
const bucketName = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'a KV bucket name ([A-Za-z0-9_-], at most 64)');
const subjectPrefix = z.string().regex(/^[a-z0-9_-]+(\.[a-z0-9_-]+)*$/, 'dot-separated lower-case tokens');

/** Where the command bus and the operational buckets live; extend an app's config schema with it. */
export const OperationalConfigSchema = z.object({
  /** The replicas of the command stream and the buckets: the same setting as the evidence log's. */
  CAIRN_NATS_REPLICAS: NatsReplicasSchema,
  CAIRN_COMMAND_STREAM: streamName.default(DEFAULT_COMMAND_STREAM),
  CAIRN_COMMAND_SUBJECT_PREFIX: subjectPrefix.default(DEFAULT_COMMAND_SUBJECT_PREFIX),
  CAIRN_WORKERS_BUCKET: bucketName.default(DEFAULT_WORKERS_BUCKET),
  CAIRN_LEASES_BUCKET: bucketName.default(DEFAULT_LEASES_BUCKET),
  /** The scheduler's placement queue; absent: `<CAIRN_LEASES_BUCKET>_queue`, isolated wherever the leases are. */
  CAIRN_QUEUE_BUCKET: bucketName.optional(),
});
export type OperationalConfig = z.infer<typeof OperationalConfigSchema>;

export function commandBusOptionsFromConfig(config: OperationalConfig): CommandBusOptions {
  return { stream: config.CAIRN_COMMAND_STREAM, subjectPrefix: config.CAIRN_COMMAND_SUBJECT_PREFIX, replicas: config.CAIRN_NATS_REPLICAS };
}
