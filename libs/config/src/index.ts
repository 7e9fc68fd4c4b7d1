export {
  ArtifactBucketConfigSchema,
  ArtifactStoreConfigSchema,
  ArtifactReadConfigSchema,
  DatabaseConfigSchema,
  DEFAULT_ARTIFACT_BUCKET,
  DEFAULT_DATABASE_URL,
  DEFAULT_EVIDENCE_STREAM,
  DEFAULT_EVIDENCE_SUBJECT_PREFIX,
  DEFAULT_NATS_URL,
  DEFAULT_SECRETS_BUCKET,
  EvidenceLogConfigSchema,
  loadConfig,
  SecretCatalogConfigSchema,
  SecretValuesConfigSchema,
  TlogConfigSchema,
  tlogNames,
  tlogNamesFor,
} from './load-config.js';
export type { ArtifactReadConfig, DatabaseConfig, EvidenceLogConfig, SecretCatalogConfig, SecretValuesConfig, TlogConfig, TlogNames } from './load-config.js';
export {
  CONSUMER_PULL_EXPIRES_MS,
  DEFAULT_NATS_REPLICAS,
  isLeaderless,
  LEADERLESS_WAIT_MS,
  NatsReplicasSchema,
  replicasHint,
  replicasProblem,
  whileLeaderless,
} from './nats-cluster.js';
export { redactUrl } from './redact-url.js';
export { approvalsBucketFor, drainsBucketFor, isolatedNames, queueBucketFor } from './stack-names.js';
export type { IsolatedNames } from './stack-names.js';
export { appendersOf, INTAKE_VERBS, isNatsService, NATS_SERVICES, SERVICE_ROUTES, serviceRoutesMarkdown, STACK_BUCKETS, UNAPPENDED_TYPES, WEBHOOKS_VERBS } from './service-routes.js';
export type { BucketAccess, NatsService, ServiceRoute, StackBucket } from './service-routes.js';
export {
  bucketStream,
  CHUNK_INBOX,
  commandDurableOf,
  evidenceDurableOf,
  imageBuildsDurableOf,
  natsInboxPrefix,
  natsPermissionsFor,
  OPERATOR_PERMISSIONS,
  permits,
  renderAuthorization,
  sandboxOpsDurableOf,
  subjectMatches,
} from './nats-permissions.js';
export type { NatsPermissions, NatsUser, StackNatsNames, SubjectPermission } from './nats-permissions.js';
export { otelEnvironment, TracingConfigSchema, tracingEnabled } from './tracing.config.js';
export type { TracingConfig } from './tracing.config.js';
export { isPgService, PG_FUNCTIONS, PG_SERVICES, PG_TABLES, pgGrantsMarkdown, pgReadsOf, pgRoleName, pgWritesOf } from './pg-grants.js';
export type { PgService, PgTableGrant, PgWrite } from './pg-grants.js';
