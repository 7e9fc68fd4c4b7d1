export { API_KEY_PATTERN, apiKeyPrefix, apiKeySha256, generateApiKey } from './auth/api-key.codec.js';
export type { GeneratedApiKey } from './auth/api-key.codec.js';
export { authenticateApiKey, createApiKey, ensureApiKey, revokeApiKey } from './auth/api-key.store.js';
export type { CreateApiKeyOptions, CreatedApiKey, Principal } from './auth/api-key.store.js';
export { ApiKeyEntity } from './auth/api-key.entity.js';
export { createGatewayDataSource, GATEWAY_MIGRATIONS, GATEWAY_MIGRATIONS_TABLE, migrateGateway, runGatewayMigrations } from './gateway-data-source.js';
export { BODY_LIMIT_BYTES, GatewayConfigSchema } from './gateway.config.js';
export type { GatewayConfig } from './gateway.config.js';
export { API_COMPONENTS, API_ROUTES } from './http/api-routes.js';
export type { ApiComponent, ApiRoute, ApiRouteName } from './http/api-routes.js';
export {
  BUNDLE_FORMAT,
  CancelAcceptedSchema,
  EventPageSchema,
  HealthSchema,
  ProofBundleSchema,
  RunListSchema,
  RunSchema,
  SubmitAcceptedSchema,
  WorkerListSchema,
} from './http/api.schemas.js';
export type { CancelAccepted, EventPage, Health, ProofBundle, Receipt, Run, RunList, SubmitAccepted, Worker, WorkerList } from './http/api.schemas.js';
export { buildOpenApi, renderOpenApi } from './openapi/openapi.builder.js';
export type { OpenApiDocument } from './openapi/openapi.builder.js';
export { GATEWAY_SERVICE, startGateway } from './start-gateway.js';
export type { RunningGateway, StartGatewayOptions } from './start-gateway.js';
