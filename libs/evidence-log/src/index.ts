export { appendMsgId, ENVELOPE_KEYS, GENESIS_HEAD, prepareAppend, sealOnto } from './append-body.builder.js';
export type { AppendInput, CanonicalTemplate, ChainHead, PreparedAppend, SealedReceipt } from './append-body.builder.js';
export { ChainHeadCache } from './chain-head.cache.js';
export { EvidenceLog } from './evidence-log.adapter.js';
export type { AppendResult, ChainPastBreaks, RawStoredMessage, ReadAllOptions, StoredReceipt } from './evidence-log.adapter.js';
export {
  DEFAULT_DUPLICATE_WINDOW_MS,
  DEFAULT_HEAD_CACHE_SIZE,
  DEFAULT_MAX_ATTEMPTS,
  DEFAULT_PUBLISH_TIMEOUT_MS,
  evidenceLogOptionsFromConfig,
  MAX_RECEIPT_BYTES,
  resolveEvidenceLogOptions,
} from './evidence-log.options.js';
export type { EvidenceLogOptions, ResolvedEvidenceLogOptions } from './evidence-log.options.js';
export {
  appendOnlyStreamConfig,
  chainSubjects,
  evidenceLayoutProblem,
  evidenceStreamConfig,
  evidenceStreamProblems,
  evidenceSubject,
  evidenceSubjects,
  isSubjectType,
  MIGRATE_COMMAND,
  MIGRATING_FROM_KEY,
  parseEvidenceSubject,
  SUBJECT_LAYOUT,
  SUBJECT_LAYOUT_KEY,
  typeSubjects,
} from './evidence-stream.config.js';
export { DirectBatchReader } from './direct-batch.reader.js';
export type { DirectBatchOutcome, DirectMessage } from './direct-batch.reader.js';
export { checkExpectedHeadSeq, HEAD_MOVED, headGuardStep, headMovedError, isHeadMoved } from './head-guard.js';
export type { AppendOptions } from './head-guard.js';
export { JetStreamAckPublisher, parseAck } from './jetstream-ack.publisher.js';
export type { PublishOutcome } from './jetstream-ack.publisher.js';
export { KeyedSerialQueue } from './keyed-serial.queue.js';
export { assertSupportedNatsServer, connectNats, inboxOf, MIN_NATS_SERVER_VERSION, parseServerVersion, serverVersionProblem } from './nats-connection.js';
export type { ConnectNatsOptions } from './nats-connection.js';
export { ensureNatsSeedFile, natsAuthenticatorFromFile, natsPublicKeyOf, readNatsSeedFile } from './nats-credentials.js';
export { isNotAReceipt, NOT_A_RECEIPT, parseStoredReceipt, tryParseStoredReceipt } from './stored-receipt.parser.js';
export type { ChainBreak } from './stored-receipt.parser.js';
export { backupStreamName, migrateEvidenceLog } from './log-migration.js';
export type { MigrationOptions, MigrationResult } from './log-migration.js';
export { restoreStream, snapshotStream } from './stream-snapshot.js';
export type { StreamSnapshot } from './stream-snapshot.js';
