export { encodeReceipt, FixtureChain, retriedRunLifecycleEvents, runLifecycleEvents, sandboxSessionEvents, typedSubject } from './testing/evidence.fixture.js';
export type { FixtureEvent, LostAttemptOptions } from './testing/evidence.fixture.js';
export { dumpProjections } from './testing/projection-dump.js';
export { memorySource } from './testing/memory-source.js';
