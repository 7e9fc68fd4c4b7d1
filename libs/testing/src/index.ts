export { createTestDatabase, testDatabaseUrl, testNatsUrl, uniqueName } from './infra.js';
export type { TestDatabase } from './infra.js';
