import type { ArtifactFacts, CollectedFile, Facts, FactsInput, JunitFacts, StepFacts, TapFacts } from './facts.types.js';
import type { JunitSummary } from './junit-summary.operation.js';
import { sumJunit } from './junit-summary.operation.js';
import { KERNEL_OPERATIONS } from './kernel-operations.registry.js';
import type { KernelOperationId } from './kernel-operations.registry.js';
import type { TapSummary } from './tap-summary.operation.js';
import { sumTap } from './tap-summary.operation.js';

/**
 * Computes a run's facts with the registered operations only. Deterministic: the same recorded
 * input gives the same facts (steps sorted by index, reports by path), whatever the input order.
 * A path collected twice keeps its first content.
 *
 * Reports are found by name: `*.xml` whose root element is `<testsuites>` or `<testsuite>` is
 * JUnit (any other XML is just an artifact); `*.tap` is TAP. Extensions match case-insensitively.
 */
export function computeFacts(input: FactsInput): Facts {
  // Only registered operations touch the run's outputs (PRODUCT.md: the kernel never runs run code).
  const ops = KERNEL_OPERATIONS;
  const steps: StepFacts[] = [...input.steps]
    .sort((a, b) => a.index - b.index)
    .map((step) => {
      const stdout = ops.file_digest(step.stdout);
      const stderr = ops.file_digest(step.stderr);
      return {
        index: step.index,
        name: step.name ?? null,
        exit_code: ops.exit_code(step),
        signal: step.signal ?? null,
        stdout_sha256: stdout.sha256,
        stdout_bytes: stdout.bytes,
        stderr_sha256: stderr.sha256,
        stderr_bytes: stderr.bytes,
        limits_hit: [...step.limits_hit],
        error_code: step.error_code ?? null,
      };
    });

  const files = firstByPath(input.outputs);
  const artifacts: [string, ArtifactFacts][] = [];
  const junit: { path: string; summary: JunitSummary }[] = [];
  const tap: { path: string; summary: TapSummary }[] = [];
  for (const file of files) {
    artifacts.push([file.path, ops.file_digest(file.content)]);
    const lower = file.path.toLowerCase();
    if (lower.endsWith('.xml')) {
      const report = ops.junit_summary(file.content);
      if (report.ok) junit.push({ path: file.path, summary: report.summary });
    } else if (lower.endsWith('.tap')) {
      const report = ops.tap_summary(file.content);
      if (report.ok) tap.push({ path: file.path, summary: report.summary });
    }
  }

  const junitFacts: JunitFacts | null =
    junit.length === 0 ? null : { ...sumJunit(junit.map((r) => r.summary)), reports: junit.map((r) => r.path) };
  const tapFacts: TapFacts | null = tap.length === 0 ? null : { ...sumTap(tap.map((r) => r.summary)), reports: tap.map((r) => r.path) };
  // fromEntries defines own properties, so no path (not even "__proto__") can reach a prototype.
  return { steps, artifacts: Object.fromEntries(artifacts), junit: junitFacts, tap: tapFacts };
}

/** Sorted by path (code-unit order); the first file of each path wins. */
function firstByPath(outputs: readonly CollectedFile[]): CollectedFile[] {
  const seen = new Map<string, CollectedFile>();
  for (const file of outputs) if (!seen.has(file.path)) seen.set(file.path, file);
  return [...seen.values()].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}

/** The registered operations `computeFacts` applies, for `kernel.facts`' `operations` field. */
export const FACTS_OPERATIONS = Object.freeze(['exit_code', 'file_digest', 'junit_summary', 'tap_summary'] as const satisfies readonly KernelOperationId[]);
