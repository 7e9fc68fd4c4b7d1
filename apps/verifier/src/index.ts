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
