export { encodeReceipt, FixtureChain, runLifecycleEvents, sandboxSessionEvents, typedSubject } from './testing/evidence.fixture.js';
export type { FixtureEvent } from './testing/evidence.fixture.js';
export { dumpProjections } from './testing/projection-dump.js';
export { memorySource } from './testing/memory-source.js';
