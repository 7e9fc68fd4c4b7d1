export { checkInvariants, formatReport, INVARIANT_NAMES, INVARIANTS } from './invariants.js';
export type { Invariant, InvariantInput, InvariantReport, InvariantResult, Leftovers } from './invariants.js';
export { checkStack, observeStack, scenarioClock } from './stack-observer.js';
export type { FaultStack, ScenarioRuns } from './stack-observer.js';
