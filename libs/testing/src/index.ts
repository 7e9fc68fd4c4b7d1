export { ensureTenant, provisionKey, revokeKey } from './api-keys.js';
export type { ProvisionedKey, ProvisionKeyOptions } from './api-keys.js';
export { createTestDatabase, testDatabaseUrl, testNatsUrl, uniqueName } from './infra.js';
export { startOldNatsServer } from './old-nats-server.js';
export type { OldNatsServer } from './old-nats-server.js';
export type { TestDatabase } from './infra.js';
export { awkwardName, awkwardText, CONTROL_CHARACTERS, foreignJson, LINE_SEPARATORS } from './awkward-text.js';
export { startSecondDockerEngine } from './second-docker-engine.js';
export type { SecondDockerEngine } from './second-docker-engine.js';
