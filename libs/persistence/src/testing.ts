export { encodeReceipt, FixtureChain, runLifecycleEvents, sandboxSessionEvents } from './testing/evidence.fixture.js';
export type { FixtureEvent } from './testing/evidence.fixture.js';
