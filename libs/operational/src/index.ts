export { CommandBus, REPLY_TO_HEADER } from './command-bus.adapter.js';
export type { CommandHandler, CommandMeta, CommandServer, SendOptions, ServeOptions } from './command-bus.adapter.js';
export {
  commandStreamConfig,
  commandStreamProblems,
  commandSubject,
  DEFAULT_COMMAND_STREAM,
  DEFAULT_COMMAND_SUBJECT_PREFIX,
  MAX_COMMAND_BYTES,
  resolveCommandBusOptions,
} from './command-stream.config.js';
export type { CommandBusOptions, ResolvedCommandBusOptions } from './command-stream.config.js';
export { APPROVAL_DEADLINES_LIMITS, bucketStreamName, isolatedStackStreams, isWrongRevision, kvCall, openBucket } from './kv-bucket.js';
export type { BucketLimits } from './kv-bucket.js';
export { DEFAULT_LEASES_BUCKET, LeaseRecordSchema, LeaseStore } from './lease-store.adapter.js';
export type { LeaseRecord, LeaseStoreOptions, RenewRefusal } from './lease-store.adapter.js';
export { commandBusOptionsFromConfig, OperationalConfigSchema } from './operational.config.js';
export { PlacementQueue, QueueEntrySchema } from './placement-queue.adapter.js';
export type { PlacementQueueOptions, QueueEntry } from './placement-queue.adapter.js';
export type { OperationalConfig } from './operational.config.js';
export { liveImageDigests, LocalImageDigestSchema, LocalImageTagSchema, RegisteredWorkerSchema, ReservationSchema, withLeasedReservations } from './worker-record.schema.js';
export type { RegisteredWorker } from './worker-record.schema.js';
export { DEFAULT_WORKERS_BUCKET, WorkerRegistry } from './worker-registry.adapter.js';
export type { WorkerRegistryOptions } from './worker-registry.adapter.js';
export { WorkerDrains, WorkerDrainSchema, withDrains } from './worker-drains.adapter.js';
export type { WorkerDrain, WorkerDrainsOptions } from './worker-drains.adapter.js';
