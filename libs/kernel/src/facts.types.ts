import type { LimitKind } from '@cairn/contracts';
import type { JunitSummary } from './junit-summary.operation.js';
import type { TapSummary } from './tap-summary.operation.js';

/**
 * What the runtime recorded for one step: the kernel's input. Field names follow the
 * `step.completed` receipt (`exit_code`, `signal`, `limits_hit`, `error_code`).
 */
export interface RecordedStep {
  /** Position of the step in the RunSpec, from 0 (the receipt's `step_index`). */
  index: number;
  name?: string | null;
  argv: readonly string[];
  /** Null when the process did not exit on its own (killed by a signal, never started). */
  exit_code: number | null;
  signal?: string | null;
  /** Output as stored: already bounded and redacted by the runtime, so its hashes match the receipt's. */
  stdout: Uint8Array;
  stderr: Uint8Array;
  /** The limits the step ran into (`wall_time`, `memory`, `pids`, `disk`, `output_bytes`). */
  limits_hit: readonly LimitKind[];
  /** The error code when this step ended the run (`E_TIMEOUT`, …). */
  error_code?: string | null;
}

/** A file collected from the sandbox after the last step. */
export interface CollectedFile {
  /** Absolute path in the sandbox, e.g. `/out/report.xml`. */
  path: string;
  content: Uint8Array;
}

export interface FactsInput {
  steps: readonly RecordedStep[];
  outputs: readonly CollectedFile[];
}

export interface StepFacts {
  index: number;
  name: string | null;
  exit_code: number | null;
  signal: string | null;
  stdout_sha256: string;
  stdout_bytes: number;
  stderr_sha256: string;
  stderr_bytes: number;
  limits_hit: LimitKind[];
  error_code: string | null;
}

export interface ArtifactFacts {
  sha256: string;
  bytes: number;
}

/** The sum over every JUnit report among the outputs, and which files they were. */
export interface JunitFacts extends JunitSummary {
  /** Paths of the reports summed, sorted. */
  reports: string[];
}

/** The sum over every `.tap` output; `planned` is null unless every stream had a plan. */
export interface TapFacts extends TapSummary {
  reports: string[];
}

/**
 * What the kernel computed from a run: plain JSON (no undefined, no non-finite numbers, no lone
 * surrogates), so it canonicalises and can sit in a receipt.
 *
 * ```
 * {
 *   steps:     [{ index, name, exit_code, signal, stdout_sha256, stdout_bytes, stderr_sha256, stderr_bytes,
 *                 limits_hit, error_code }],
 *   artifacts: { "/out/report.xml": { sha256, bytes }, … },
 *   junit:     { tests, passed, failed, failures, errors, skipped, suites, well_formed, reports } | null,
 *   tap:       { planned, tests, passed, failed, skipped, todo, bailed_out, bail_reason, ok, reports } | null
 * }
 * ```
 * `steps` is sorted by index and holds only steps that ran; `junit`/`tap` are null when no output
 * was such a report. Names follow the receipts (`stdout_bytes`, `limits_hit`), and every key is a
 * lower-case token, so `kernel.facts` can carry it and check sources (`facts.junit.failed`) reach it.
 */
export interface Facts {
  steps: StepFacts[];
  artifacts: Record<string, ArtifactFacts>;
  junit: JunitFacts | null;
  tap: TapFacts | null;
}
