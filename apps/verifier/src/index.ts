export { ArtifactLoader } from './artifact.loader.js';
export type { ArtifactReadLimits } from './artifact.loader.js';
export { readRunChain } from './run-chain.reader.js';
export type { RunChain } from './run-chain.reader.js';
export { artifactSource, judgementContextOf, outputRefsOf, recordedRunOf, runFacts } from './run-outputs.reader.js';
export type { LoadedArtifact, OutputRef, RecordedRun, RunFacts, RunStepFacts, UnavailableOutput, UnavailableState } from './run-outputs.reader.js';
export {
  chainBreakMessage,
  chainBreakResponse,
  chainInvariant,
  factsInvariant,
  overallVerdict,
  rehashedArtifacts,
  stepOutputInvariant,
  verifyRun,
} from './run-verification.js';
export type { EventFields, InvariantResult } from './run-verification.js';
export { VerificationHandler } from './verification.handler.js';
export { VerifierConfigSchema } from './verifier.config.js';
export type { VerifierConfig } from './verifier.config.js';
export { VERIFIER_SERVICE, verifierModule } from './verifier.module.js';
