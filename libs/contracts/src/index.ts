export {
  API_ERROR_CODES,
  assertUnreachable,
  CairnError,
  ERROR_CODES,
  ErrorBodySchema,
  ErrorCodeSchema,
  HTTP_STATUS_BY_CODE,
  isCairnError,
  TAXONOMY_ERROR_CODES,
} from './error-codes.js';
export type { ApiErrorCode, ErrorBody, ErrorCode, TaxonomyErrorCode } from './error-codes.js';
export {
  ActorSchema,
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
  TimestampSchema,
} from './envelope.js';
export type { ChainId, Envelope, ReceiptEnvelope, UnsequencedBody } from './envelope.js';
