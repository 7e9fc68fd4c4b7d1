export { computeFacts, FACTS_OPERATIONS } from './compute-facts.js';
export { exitCodeOf, fileDigest, sha256Hex } from './digest.operation.js';
export type { FileDigest } from './digest.operation.js';
export type {
  ArtifactFacts,
  CollectedFile,
  Facts,
  FactsInput,
  JunitFacts,
  RecordedStep,
  StepFacts,
  TapFacts,
} from './facts.types.js';
export { jsonPath, parseJson, parseJsonPath, parsePathSegments, readQuoted, selectPath } from './json-path.operation.js';
export type { JsonParse, JsonSelection, PathParse, PathSegment } from './json-path.operation.js';
export { junitSummary, sumJunit } from './junit-summary.operation.js';
export type { JunitParse, JunitSummary } from './junit-summary.operation.js';
export { KERNEL_LIMITS } from './kernel-limits.constants.js';
export { isKernelOperation, KERNEL_OPERATION_IDS, KERNEL_OPERATIONS } from './kernel-operations.registry.js';
export type { KernelOperationId } from './kernel-operations.registry.js';
export { lineDiff } from './line-diff.operation.js';
export type { LineDiff, LineDiffResult, LineEdit } from './line-diff.operation.js';
export { compileSafeRegex, regexMatch, SAFE_REGEX_LIMITS, safeRegexTest } from './safe-regex.js';
export type { SafeRegex, SafeRegexCompilation, SafeRegexResult } from './safe-regex.js';
export { sumTap, tapSummary } from './tap-summary.operation.js';
export type { TapParse, TapSummary } from './tap-summary.operation.js';
export { decodeUtf8, decodeUtf8Lenient, textContains } from './text.operation.js';
export type { TextContains, TextDecoding } from './text.operation.js';
