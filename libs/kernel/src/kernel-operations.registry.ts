import { exitCodeOf, fileDigest, sha256Hex } from './digest.operation.js';
import { jsonPath } from './json-path.operation.js';
import { junitSummary } from './junit-summary.operation.js';
import { lineDiff } from './line-diff.operation.js';
import { regexMatch } from './safe-regex.js';
import { tapSummary } from './tap-summary.operation.js';
import { textContains } from './text.operation.js';

/**
 * The kernel's registered operations — the only computations it performs on a run's outputs. Each is
 * a pure, bounded function of the recorded data; nothing from the run is ever executed. Adding one
 * is a code change and a review, never a RunSpec field.
 */
export const KERNEL_OPERATIONS = Object.freeze({
  exit_code: exitCodeOf,
  sha256: sha256Hex,
  file_digest: fileDigest,
  text_contains: textContains,
  regex_match: regexMatch,
  json_path: jsonPath,
  junit_summary: junitSummary,
  tap_summary: tapSummary,
  line_diff: lineDiff,
});

export type KernelOperationId = keyof typeof KERNEL_OPERATIONS;

export const KERNEL_OPERATION_IDS = Object.freeze(Object.keys(KERNEL_OPERATIONS) as KernelOperationId[]);

export function isKernelOperation(id: string): id is KernelOperationId {
  return Object.hasOwn(KERNEL_OPERATIONS, id);
}
