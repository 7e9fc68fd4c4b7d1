export {
  createDataSource,
  migrate,
  MIGRATIONS_TABLE,
  PERSISTENCE_ENTITIES,
  PERSISTENCE_MIGRATIONS,
  PROJECTIONS_MIGRATION_LOCK,
  runMigrations,
  runMigrationsUnderLock,
} from './data-source.js';
export type { DataSourceOptions } from './data-source.js';
export { EvidenceEventEntity } from './entities/evidence-event.entity.js';
export { PoisonEventEntity } from './entities/poison-event.entity.js';
export { ProjectionPositionEntity } from './entities/projection-position.entity.js';
export { RunEntity } from './entities/run.entity.js';
export { SandboxEntity } from './entities/sandbox.entity.js';
export { POISON_RAW_LIMIT, POISON_REASONS } from './poison-reason.constants.js';
export type { PoisonReason } from './poison-reason.constants.js';
export { ProjectionFold } from './projection-fold.js';
export type { ChainHead, EvidenceEventRow, FoldOutcome, PoisonRow, RawEvidenceMessage, RunRow } from './projection-fold.js';
export { SANDBOX_SELECT_COLUMNS, sandboxRowFromDb } from './sandbox-row.mapper.js';
export type { SandboxDbRow, SandboxRow } from './sandbox-row.mapper.js';
export { EVIDENCE_PROJECTION } from './projection-lock.constants.js';
export { boundedPgSettings, PG_CONNECT_TIMEOUT_MS, PG_KEEPALIVE_DELAY_MS, PG_STATEMENT_TIMEOUT_MS, pgUnavailable } from './pg-bounds.js';
export type { PgBounds } from './pg-bounds.js';
export { checkProjections } from './projection-check.js';
export type { CheckedTable, CheckOptions, CheckResult, ProjectionDrift } from './projection-check.js';
export { rebuildProjections } from './projection-rebuild.js';
export type { ProjectionSource, RebuildOptions, RebuildProgress, RebuildResult } from './projection-rebuild.js';
export { parseProjectionNotice, PROJECTION_NOTICE_CHANNEL, projectionNoticePayloads, ProjectionNotices } from './projection-notices.js';
export type { ProjectionWait } from './projection-notices.js';
export { ProjectionWriter } from './projection-writer.js';
export type { BatchResult, ProjectionWriterOptions } from './projection-writer.js';
export { checkSchemaMatchesEntities } from './schema-check.js';
export type { SchemaCheck } from './schema-check.js';
