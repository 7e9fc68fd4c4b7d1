export { createTestDatabase, testDatabaseUrl, testNatsUrl, uniqueName } from './infra.js';
export { startOldNatsServer } from './old-nats-server.js';
export type { OldNatsServer } from './old-nats-server.js';
export type { TestDatabase } from './infra.js';
export { startSecondDockerEngine } from './second-docker-engine.js';
export type { SecondDockerEngine } from './second-docker-engine.js';
