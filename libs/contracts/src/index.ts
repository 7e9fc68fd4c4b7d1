export { API_KEY_SCOPES, ApiKeyScopeSchema, hasScope } from './api-key-scope.schema.js';
export type { ApiKeyScope } from './api-key-scope.schema.js';
export { holdsGrant, KeyIdSchema, keyGrantee, mayUseSecret, SecretGranteeSchema, SubmitterPrincipalSchema } from './principal.schema.js';
export type { SecretGrantee, SubmitterPrincipal } from './principal.schema.js';
export {
  API_ERROR_CODES,
  assertUnreachable,
  CairnError,
  CAPACITY_RESOURCES,
  CapacityResourceSchema,
  ERROR_CODES,
  ErrorBodySchema,
  ErrorCodeSchema,
  HTTP_STATUS_BY_CODE,
  isCairnError,
  QUEUE_WAITS,
  QueueWaitSchema,
  TAXONOMY_ERROR_CODES,
} from './error-codes.js';
export type { ApiErrorCode, CapacityResource, ErrorBody, ErrorCode, QueueWait, TaxonomyErrorCode } from './error-codes.js';
export {
  ActorSchema,
  adminChainId,
  AdminChainIdSchema,
  CHAIN_KINDS,
  ChainIdSchema,
  ChainLinkSchema,
  EnvelopeSchema,
  EventIdSchema,
  eventId,
  EventTypeNameSchema,
  GENESIS_HASH,
  ID_BODY,
  RECEIPT_SCHEMA_VERSION,
  ReceiptEnvelopeSchema,
  RunIdSchema,
  SandboxIdSchema,
  Sha256HexSchema,
  TenantIdSchema,
  tenantOfAdminChain,
  TimestampSchema,
  WorkChainIdSchema,
} from './envelope.js';
export type { ChainId, Envelope, ReceiptEnvelope, UnsequencedBody } from './envelope.js';
export { FROZEN_CAPS } from './frozen-caps.constants.js';
export type { FrozenCaps } from './frozen-caps.constants.js';
export {
  FINAL_RUN_STATES,
  FinalRunStateSchema,
  POLICY_DECISIONS,
  PolicyDecisionSchema,
  RUN_STATES,
  RunStateSchema,
  VERDICTS,
  VerdictSchema,
} from './run-state.schema.js';
export type { FinalRunState, PolicyDecision, RunState, Verdict } from './run-state.schema.js';
export {
  AnySandboxPathSchema,
  ArgSchema,
  ArgvSchema,
  CapsSpecSchema,
  CHECK_OPS,
  CheckIdSchema,
  CheckOpSchema,
  CheckSchema,
  CheckSourceSchema,
  CheckValueSchema,
  ClaimCheckSchema,
  ClaimSchema,
  EnvNameSchema,
  EnvSchema,
  formatIssuePath,
  GateCheckSchema,
  gatePatchStepIndex,
  GateSpecSchema,
  HostPortSchema,
  ImageRefSchema,
  InputFileSchema,
  InputPathSchema,
  inputIssues,
  JobNameSchema,
  NetworkSpecSchema,
  OutputPathSchema,
  parseRunSpec,
  PatchPathSchema,
  RunNameSchema,
  RunSpecSchema,
  sandboxPathSchema,
  SecretNameSchema,
  sourceArtifactPath,
  sourceStepIndex,
  StepNameSchema,
  StepSpecSchema,
  WorkdirSchema,
} from './run-spec.schema.js';
export type { CapsSpec, Check, CheckOp, CheckValue, Claim, ClaimCheck, GateCheck, GateSpec, InputFile, InputIssue, NetworkSpec, RunSpec, StepSpec } from './run-spec.schema.js';
export { deepFreeze } from './deep-freeze.js';
export { checkJsonText, MAX_JSON_DEPTH, parseStrictJson } from './strict-json.js';
export type { StrictJsonOptions } from './strict-json.js';
export { MAX_SANDBOX_WAIT_SECONDS, parseSandboxSpec, SandboxSpecSchema } from './sandbox-spec.schema.js';
export type { SandboxSpec } from './sandbox-spec.schema.js';
export {
  ApprovalIdSchema,
  ArtifactHashesSchema,
  ByteCountSchema,
  ContainerNameSchema,
  DurationMsSchema,
  ExecIdSchema,
  ExitCodeSchema,
  GrantedCapsSchema,
  LeaseIdSchema,
  LIMIT_KINDS,
  LimitKindSchema,
  RedactionSchema,
  SandboxHardeningSchema,
  SandboxPathSchema,
  SignalSchema,
  StepIndexSchema,
  StorableJsonSchema,
  TmpfsMountSchema,
  TokenSchema,
  WorkerIdSchema,
} from './event-fields.schema.js';
export type { GrantedCaps, LimitKind, Redaction, SandboxHardening, StorableJson } from './event-fields.schema.js';
export { hasNoNul, NO_CONTROL_CHARS, storableText, unstorableText } from './text-rules.js';
export {
  ApprovalGrantedSchema,
  ApprovalRejectedSchema,
  ApprovalRequestedSchema,
  CheckOutcomeSchema,
  CriterionScoreSchema,
  GateCheckOutcomeSchema,
  GateOutcomeSchema,
  GradeFailedSchema,
  GradeRecordedSchema,
  InvariantOutcomeSchema,
  KernelFactsSchema,
  PolicyDecidedSchema,
  RunBudgetSchema,
  RunCancelledSchema,
  RunCancelRequestedSchema,
  RunExecutedSchema,
  RunFailedSchema,
  RunRolledBackSchema,
  RunScheduledSchema,
  RunSealedSchema,
  RunSubmittedSchema,
  SandboxCreatedSchema,
  SandboxDestroyedSchema,
  StepApprovalSchema,
  StepCompletedSchema,
  StepStartedSchema,
  VerificationCompletedReceiptSchema,
  VerificationCompletedSchema,
} from './run-events.schema.js';
export {
  SandboxExecCompletedSchema,
  SandboxExecStartedSchema,
  SandboxExpiredSchema,
  SandboxFileReadSchema,
  SandboxFileWrittenSchema,
  SandboxRequestedSchema,
} from './sandbox-events.schema.js';
export { AlertRaisedSchema, EgressDeniedSchema, SecretRedactedSchema } from './security-events.schema.js';
export {
  AdminKeyCreatedSchema,
  AdminKeyRevokedSchema,
  AdminKeyRotatedSchema,
  AdminPolicyChangedSchema,
  AdminTenantCreatedSchema,
  ApiKeyIdSchema,
  ApiKeyPrefixSchema,
} from './admin-events.schema.js';
export {
  ADMIN_EVENT_TYPES,
  EVENT_BODY_SCHEMAS,
  EVENT_RECEIPT_SCHEMAS,
  EVENT_TYPES,
  EventTypeSchema,
  EvidenceEventSchema,
  EvidenceReceiptSchema,
  isEventType,
  parseEvidenceReceipt,
} from './evidence-event.schema.js';
export type {
  EventType,
  EvidenceEvent,
  EvidenceEventOf,
  EvidenceReceipt,
  EvidenceReceiptOf,
  ParseEvidenceReceiptResult,
  ReceiptRejection,
} from './evidence-event.schema.js';
export { SealKeyIdSchema, SealKeyNameSchema, SealKeySchema, SealKeysSchema, SealSignatureSchema, VerifierKeySchema } from './seal-signature.schema.js';
export type { SealKey, SealKeys, SealSignature } from './seal-signature.schema.js';
