// One reader for the kernel, the verifier and the grader: the verifier recomputes the kernel's
// facts from the same bytes with the same code, and the grader judges the same values.
import type { EvidenceReceipt, EvidenceReceiptOf } from '@cairn/contracts';
import { computeFacts } from '@cairn/kernel';
import type { CollectedFile, Facts, RecordedStep, StepFacts } from '@cairn/kernel';
import type { JudgementContext, StepOutput } from '@cairn/judgement';
import { attemptOf } from '@cairn/lifecycle';

/** What the artifact store gave back for one sha256 a receipt names. */
export type LoadedArtifact =
  | { state: 'ok'; bytes: Uint8Array }
  | { state: 'missing' }
  /** The stored bytes no longer hash to their name: `actual` is what they hash to. */
  | { state: 'corrupt'; actual: string }
  /** Not read: past the per-artifact or per-run read bound. */
  | { state: 'too_large'; bytes: number };
export type UnavailableState = Exclude<LoadedArtifact['state'], 'ok'>;

/** A value the receipts name by hash, and how a check source names it (`steps[0].stdout`, `artifacts["/out/r.xml"]`). */
export type OutputRef = { source: string; sha256: string };

/** The parts of a run's chain its outputs are read from: its current attempt's (ADR 0035). */
export type RecordedRun = {
  /** One `step.completed` per step (the first), by index. */
  steps: EvidenceReceiptOf<'step.completed'>[];
  /** The RunSpec's step names, by index. */
  stepNames: ReadonlyMap<number, string>;
  /** Collected file → sha256 as recorded, sorted by path (`run.executed` over `step.completed`). */
  files: ReadonlyMap<string, string>;
};

/** An output the facts could not be computed from, and why. */
export type UnavailableOutput = { source: string; sha256: string; state: UnavailableState };

/** A step's facts; the hash and size of an output that could not be read are null, never guessed. */
export type RunStepFacts = Omit<StepFacts, 'stdout_sha256' | 'stdout_bytes' | 'stderr_sha256' | 'stderr_bytes'> & {
  stdout_sha256: string | null;
  stdout_bytes: number | null;
  stderr_sha256: string | null;
  stderr_bytes: number | null;
};

/**
 * `kernel.facts`' `facts`: the kernel library's facts over the outputs that could be read, plus
 * `unavailable` (sorted by source) naming every output that could not — missing, corrupt or too
 * large — so the verifier can judge it and checks on it stay unresolved instead of failing.
 */
export type RunFacts = Omit<Facts, 'steps'> & { steps: RunStepFacts[]; unavailable: UnavailableOutput[] };

const EMPTY = new Uint8Array(0);

export function artifactSource(path: string): string {
  return `artifacts[${JSON.stringify(path)}]`;
}

/**
 * The run's outputs as its current attempt recorded them (`attemptOf`): the steps of an attempt
 * lost to its worker are never read as the run's, nor counted twice.
 */
export function recordedRunOf(receipts: readonly EvidenceReceipt[]): RecordedRun {
  const stepNames = new Map<number, string>();
  const steps = new Map<number, EvidenceReceiptOf<'step.completed'>>();
  const files = new Map<string, string>();
  const executed: Record<string, string>[] = [];
  for (const receipt of attemptOf(receipts)) {
    if (receipt.type === 'run.submitted') {
      receipt.spec.steps.forEach((step, index) => {
        if (step.name !== undefined) stepNames.set(index, step.name);
      });
    } else if (receipt.type === 'step.completed') {
      if (!steps.has(receipt.step_index)) steps.set(receipt.step_index, receipt);
      for (const [path, sha] of Object.entries(receipt.artifact_hashes)) files.set(path, sha);
    } else if (receipt.type === 'run.executed') {
      executed.push(receipt.artifact_hashes);
    }
  }
  // The files collected after the last step are the run's outputs: they win over per-step records.
  for (const hashes of executed) for (const [path, sha] of Object.entries(hashes)) files.set(path, sha);
  return {
    steps: [...steps.values()].sort((a, b) => a.step_index - b.step_index),
    stepNames,
    files: new Map([...files].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))),
  };
}

/** Every value to read, in a fixed order (steps by index, then files by path), so read bounds fall the same way each time. */
export function outputRefsOf(run: RecordedRun): OutputRef[] {
  const refs: OutputRef[] = [];
  for (const step of run.steps) {
    refs.push({ source: `steps[${step.step_index}].stdout`, sha256: step.stdout_sha256 });
    refs.push({ source: `steps[${step.step_index}].stderr`, sha256: step.stderr_sha256 });
  }
  for (const [path, sha256] of run.files) refs.push({ source: artifactSource(path), sha256 });
  return refs;
}

/** The facts of a run from the bytes that could be read (registered operations only: nothing from the run is executed). */
export function runFacts(run: RecordedRun, loaded: ReadonlyMap<string, LoadedArtifact>): RunFacts {
  const unavailable: UnavailableOutput[] = [];
  const read = (ref: OutputRef): Uint8Array | null => {
    const artifact = loaded.get(ref.sha256) ?? { state: 'missing' };
    if (artifact.state === 'ok') return artifact.bytes;
    unavailable.push({ source: ref.source, sha256: ref.sha256, state: artifact.state });
    return null;
  };
  const unreadStreams = new Set<string>();
  const steps: RecordedStep[] = run.steps.map((receipt) => {
    const i = receipt.step_index;
    const stdout = read({ source: `steps[${i}].stdout`, sha256: receipt.stdout_sha256 });
    const stderr = read({ source: `steps[${i}].stderr`, sha256: receipt.stderr_sha256 });
    if (stdout === null) unreadStreams.add(`${i}.stdout`);
    if (stderr === null) unreadStreams.add(`${i}.stderr`);
    return {
      index: i,
      name: run.stepNames.get(i) ?? null,
      argv: receipt.argv,
      exit_code: receipt.exit_code,
      signal: receipt.signal,
      stdout: stdout ?? EMPTY,
      stderr: stderr ?? EMPTY,
      limits_hit: receipt.limits_hit,
      error_code: receipt.error_code ?? null,
    };
  });
  const outputs: CollectedFile[] = [];
  for (const [path, sha256] of run.files) {
    const content = read({ source: artifactSource(path), sha256 });
    if (content !== null) outputs.push({ path, content });
  }
  const facts = computeFacts({ steps, outputs });
  return {
    ...facts,
    steps: facts.steps.map((step): RunStepFacts => {
      const stdoutRead = !unreadStreams.has(`${step.index}.stdout`);
      const stderrRead = !unreadStreams.has(`${step.index}.stderr`);
      return {
        ...step,
        stdout_sha256: stdoutRead ? step.stdout_sha256 : null,
        stdout_bytes: stdoutRead ? step.stdout_bytes : null,
        stderr_sha256: stderrRead ? step.stderr_sha256 : null,
        stderr_bytes: stderrRead ? step.stderr_bytes : null,
      };
    }),
    unavailable: unavailable.sort((a, b) => (a.source < b.source ? -1 : a.source > b.source ? 1 : 0)),
  };
}

/**
 * What checks are judged against: `facts`, and only bytes that re-hashed to their recorded name.
 * A step is left out unless both its streams were read, so a check on an unreadable stream is
 * unresolved, never judged against a stand-in.
 */
export function judgementContextOf(run: RecordedRun, loaded: ReadonlyMap<string, LoadedArtifact>, facts: Readonly<Record<string, unknown>>): JudgementContext {
  const bytes = (sha: string): Uint8Array | null => {
    const artifact = loaded.get(sha);
    return artifact?.state === 'ok' ? artifact.bytes : null;
  };
  const steps: StepOutput[] = [];
  for (const receipt of run.steps) {
    const stdout = bytes(receipt.stdout_sha256);
    const stderr = bytes(receipt.stderr_sha256);
    if (stdout !== null && stderr !== null) steps.push({ index: receipt.step_index, stdout, stderr });
  }
  const artifacts = new Map<string, Uint8Array>();
  for (const [path, sha] of run.files) {
    const content = bytes(sha);
    if (content !== null) artifacts.set(path, content);
  }
  return { facts, steps, artifacts };
}
