import type { Receipt, RunState } from '../api/api-types.js';

/*
 * What the run page shows, derived from the receipts alone (the same receipts the chain badge
 * verifies): the lifecycle as the chain tells it, the steps, pending approvals, artifacts.
 */

const str = (value: unknown): string | null => (typeof value === 'string' ? value : null);
const num = (value: unknown): number | null => (typeof value === 'number' ? value : null);
const strings = (value: unknown): string[] => (Array.isArray(value) ? value.filter((item): item is string => typeof item === 'string') : []);
const record = (value: unknown): Record<string, unknown> => (typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : {});

const FINAL_STATES: ReadonlySet<string> = new Set(['SEALED', 'FAILED', 'ROLLBACK', 'REJECTED', 'CANCELLED']);

/** The state a receipt moves a run to, or null when it does not change the state (PRODUCT.md "Run states"). */
export function stateAfter(receipt: Receipt, current: RunState | null): RunState | null {
  switch (receipt.type) {
    case 'run.submitted':
      return 'SUBMITTED';
    case 'policy.decided':
      return receipt.decision === 'deny' ? 'REJECTED' : receipt.decision === 'hold' ? 'AWAITING_APPROVAL' : null;
    case 'approval.requested':
      return 'AWAITING_APPROVAL';
    case 'approval.granted':
      // A step's approval (`step-<n>`) lets a running run go on; a run's waits for run.scheduled.
      return current === 'AWAITING_APPROVAL' && (str(receipt.approval_id) ?? '').startsWith('step-') ? 'RUNNING' : null;
    case 'run.scheduled':
      return 'SCHEDULED';
    case 'sandbox.created':
    case 'step.started':
      return 'RUNNING';
    case 'run.executed':
      return 'EXECUTED';
    case 'verification.completed':
      return 'VERIFIED';
    case 'grade.recorded':
      return 'GRADED';
    case 'run.failed':
      return 'FAILED';
    case 'run.retried':
      return 'SUBMITTED'; // its worker was lost: back in the queue for the next attempt (ADR 0035)
    case 'run.rolled_back':
      return 'ROLLBACK';
    case 'run.cancelled':
      return 'CANCELLED';
    case 'run.sealed': {
      const final = str(receipt.final_state);
      return final !== null && FINAL_STATES.has(final) ? (final as RunState) : 'SEALED';
    }
    default:
      return null;
  }
}

export interface LifecycleStep {
  state: RunState;
  seq: number;
  ts: string;
}

/** Each state the chain moved the run into, in order, with the receipt that did it. */
export function lifecycle(receipts: readonly Receipt[]): LifecycleStep[] {
  const steps: LifecycleStep[] = [];
  for (const receipt of receipts) {
    const state = stateAfter(receipt, steps.at(-1)?.state ?? null);
    if (state !== null && state !== steps.at(-1)?.state) steps.push({ state, seq: receipt.seq, ts: receipt.ts });
  }
  return steps;
}

export interface StepView {
  index: number;
  stage: string | null;
  argv: string[];
  startedAt: string | null;
  /** Null while it runs, or when it never completed. */
  exitCode: number | null;
  signal: string | null;
  durationMs: number | null;
  limitsHit: string[];
  errorCode: string | null;
  stdoutBytes: number | null;
  stderrBytes: number | null;
  /** The sha256 of each stream its `step.completed` records (what a read of it is checked against). */
  stdoutSha256: string | null;
  stderrSha256: string | null;
  truncated: boolean;
  artifacts: Record<string, string>;
  completed: boolean;
  startSeq: number | null;
  endSeq: number | null;
}

/**
 * A run's chain split into attempts (ADR 0035), as `splitAttempts` in `@cairn/lifecycle` splits
 * it: an attempt lost to its worker runs from its first `run.scheduled` to its `run.retried`; the
 * current one is what precedes the first placement plus what follows the last `run.retried`.
 */
export function splitRunAttempts(receipts: readonly Receipt[]): { current: Receipt[]; lost: { attempt: number; receipts: Receipt[] }[] } {
  const first = receipts.findIndex((r) => r.type === 'run.scheduled');
  if (first < 0) return { current: [...receipts], lost: [] };
  const lost: { attempt: number; receipts: Receipt[] }[] = [];
  let from = first;
  receipts.forEach((receipt, i) => {
    if (i < first || receipt.type !== 'run.retried') return;
    lost.push({ attempt: lost.length + 1, receipts: receipts.slice(from, i + 1) });
    from = i + 1;
  });
  return { current: [...receipts.slice(0, first), ...receipts.slice(from)], lost };
}

/** An attempt lost to its worker, shown as such: where it ran, its steps, and the `run.retried` that ended it. */
export interface EarlierAttempt {
  attempt: number;
  workerId: string | null;
  steps: StepView[];
  retriedSeq: number;
  retriedTs: string;
  message: string | null;
}

export function earlierAttempts(receipts: readonly Receipt[]): EarlierAttempt[] {
  return splitRunAttempts(receipts).lost.map(({ attempt, receipts: own }) => {
    const retried = own.at(-1)!;
    const placement = [...own].reverse().find((r) => r.type === 'run.scheduled');
    return { attempt, workerId: str(placement?.worker_id), steps: stepsOf(own), retriedSeq: retried.seq, retriedTs: retried.ts, message: str(retried.message) };
  });
}

/** One row per step of the current attempt: `step.started` and `step.completed` joined on `step_index`. */
export function steps(receipts: readonly Receipt[]): StepView[] {
  return stepsOf(splitRunAttempts(receipts).current);
}

function stepsOf(receipts: readonly Receipt[]): StepView[] {
  const byIndex = new Map<number, StepView>();
  for (const receipt of receipts) {
    if (receipt.type !== 'step.started' && receipt.type !== 'step.completed') continue;
    const index = num(receipt.step_index) ?? -1;
    const step = byIndex.get(index) ?? {
      index,
      stage: str(receipt.stage),
      argv: strings(receipt.argv),
      startedAt: null,
      exitCode: null,
      signal: null,
      durationMs: null,
      limitsHit: [],
      errorCode: null,
      stdoutBytes: null,
      stderrBytes: null,
      stdoutSha256: null,
      stderrSha256: null,
      truncated: false,
      artifacts: {},
      completed: false,
      startSeq: null,
      endSeq: null,
    };
    if (receipt.type === 'step.started') {
      step.startedAt = receipt.ts;
      step.startSeq = receipt.seq;
    } else {
      step.completed = true;
      step.endSeq = receipt.seq;
      step.exitCode = num(receipt.exit_code);
      step.signal = str(receipt.signal);
      step.durationMs = num(receipt.duration_ms);
      step.limitsHit = strings(receipt.limits_hit);
      step.errorCode = str(receipt.error_code);
      step.stdoutBytes = num(receipt.stdout_bytes);
      step.stderrBytes = num(receipt.stderr_bytes);
      step.stdoutSha256 = str(receipt.stdout_sha256);
      step.stderrSha256 = str(receipt.stderr_sha256);
      step.truncated = receipt.output_truncated === true;
      step.artifacts = Object.fromEntries(Object.entries(record(receipt.artifact_hashes)).filter((entry): entry is [string, string] => typeof entry[1] === 'string'));
    }
    byIndex.set(index, step);
  }
  return [...byIndex.values()].sort((a, b) => a.index - b.index);
}

export interface PendingApproval {
  approvalId: string;
  scope: string;
  stepIndex: number | null;
  reason: string;
  expiresAt: string | null;
}

/** Approvals requested on the chain and neither granted nor rejected yet; a lost attempt's step approvals wait on nothing (ADR 0035). */
export function pendingApprovals(receipts: readonly Receipt[]): PendingApproval[] {
  const pending = new Map<string, PendingApproval>();
  for (const receipt of receipts) {
    if (receipt.type === 'run.retried') {
      for (const [id, approval] of pending) if (approval.scope === 'step') pending.delete(id);
      continue;
    }
    const id = str(receipt.approval_id);
    if (id === null) continue;
    if (receipt.type === 'approval.requested') {
      pending.set(id, { approvalId: id, scope: str(receipt.scope) ?? 'run', stepIndex: num(receipt.step_index), reason: str(receipt.reason) ?? '', expiresAt: str(receipt.expires_at) });
    } else if (receipt.type === 'approval.granted' || receipt.type === 'approval.rejected') {
      pending.delete(id);
    }
  }
  return [...pending.values()];
}

/** The run's collected files (`run.executed`, which only the current attempt can hold), path → sha256. */
export function artifacts(receipts: readonly Receipt[]): Record<string, string> {
  const executed = [...receipts].reverse().find((receipt) => receipt.type === 'run.executed');
  return executed === undefined ? {} : Object.fromEntries(Object.entries(record(executed.artifact_hashes)).filter((entry): entry is [string, string] => typeof entry[1] === 'string'));
}

export interface CheckView {
  id: string;
  outcome: string;
  detail: string | null;
}

/** The verifier's checks and invariants (`verification.completed`). */
export function verification(receipts: readonly Receipt[]): { checks: CheckView[]; invariants: { id: string; ok: boolean; detail: string | null }[] } | null {
  const receipt = [...receipts].reverse().find((r) => r.type === 'verification.completed');
  if (receipt === undefined) return null;
  const list = (value: unknown) => (Array.isArray(value) ? value.map(record) : []);
  return {
    checks: list(receipt.checks).map((c) => ({ id: str(c.id) ?? '?', outcome: str(c.outcome) ?? '?', detail: str(c.detail) })),
    invariants: list(receipt.invariants).map((i) => ({ id: str(i.id) ?? '?', ok: i.ok === true, detail: str(i.detail) })),
  };
}

/** A one-line, human summary of a receipt for the timeline. */
export function summary(receipt: Receipt): string {
  switch (receipt.type) {
    case 'run.submitted':
      return `submitted by ${str(receipt.submitted_by) ?? receipt.actor}`;
    case 'policy.decided': {
      const reasons = strings(receipt.reasons);
      const code = str(receipt.error_code);
      return `${str(receipt.decision) ?? '?'}${code === null ? '' : ` (${code})`}${reasons.length > 0 ? ` — ${reasons.join('; ')}` : ''}`;
    }
    case 'approval.requested':
      return `approval ${str(receipt.approval_id) ?? ''} requested: ${str(receipt.reason) ?? ''}`;
    case 'approval.granted':
      return `approval ${str(receipt.approval_id) ?? ''} granted by ${str(receipt.approved_by) ?? '?'}`;
    case 'approval.rejected':
      return `approval ${str(receipt.approval_id) ?? ''} rejected (${str(receipt.cause) ?? '?'}) by ${str(receipt.rejected_by) ?? '?'}`;
    case 'run.scheduled':
      return `on worker ${str(receipt.worker_id) ?? '?'}, attempt ${num(receipt.attempt) ?? '?'}`;
    case 'sandbox.created':
      return `${str(receipt.image) ?? '?'} (${str(receipt.network) ?? '?'} network)`;
    case 'step.started':
      return strings(receipt.argv).join(' ');
    case 'step.completed':
      return `exit ${num(receipt.exit_code) ?? 'none (killed)'} after ${formatDuration(num(receipt.duration_ms))}`;
    case 'sandbox.destroyed':
      return `${str(receipt.reason) ?? '?'}${receipt.verified_gone === true ? ', verified gone' : ''}`;
    case 'run.executed':
      return `${num(receipt.steps_completed) ?? '?'} steps, exit codes ${JSON.stringify(receipt.exit_codes)}`;
    case 'verification.completed':
      return `${str(receipt.verdict) ?? '?'}${receipt.chain_ok === true ? ', chain ok' : ''}`;
    case 'grade.recorded':
      return `${num(receipt.score) ?? '?'} / ${num(receipt.max_score) ?? '?'} (upper bound ${num(receipt.upper_bound) ?? '?'})`;
    case 'judge.requested':
      return `${str(receipt.criterion_id) ?? '?'}: asked ${str(receipt.model) ?? '?'} (attempt ${num(receipt.attempt) ?? '?'})`;
    case 'judge.answered':
      return `${str(receipt.criterion_id) ?? '?'}: answered after ${formatDuration(num(receipt.latency_ms))}`;
    case 'grade.failed':
      return `${str(receipt.cause) ?? 'failed'}: ${str(receipt.reason) ?? ''} (cairn regrade)`;
    case 'grade.requested':
      return `regrade asked by ${str(receipt.requested_by) ?? receipt.actor}`;
    case 'run.failed':
    case 'run.rolled_back':
      return `${str(receipt.error_code) ?? '?'}: ${str(receipt.message) ?? ''}`;
    case 'run.retried':
      return `attempt ${num(receipt.attempt) ?? '?'} lost with worker ${str(receipt.worker_id) ?? '?'} (${str(receipt.error_code) ?? '?'}); placed again, ${num(receipt.retries_left) ?? '?'} retries left after the next`;
    case 'run.sealed':
      return `final state ${str(receipt.final_state) ?? '?'}`;
    case 'sandbox.requested':
      return `requested by ${str(receipt.requested_by) ?? receipt.actor}, until ${str(receipt.expires_at) ?? '?'}`;
    case 'sandbox.exec.completed':
      return `${strings(receipt.argv).join(' ')} → exit ${num(receipt.exit_code) ?? 'none (killed)'} after ${formatDuration(num(receipt.duration_ms))}`;
    case 'sandbox.file.written':
    case 'sandbox.file.read':
      return `${str(receipt.path) ?? '?'} (${num(receipt.bytes) ?? '?'} bytes)`;
    case 'sandbox.expired':
      return `${str(receipt.cause) ?? 'ttl'} reached`;
    default:
      return '';
  }
}

export function formatDuration(ms: number | null): string {
  if (ms === null) return '—';
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
  return `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1000)} s`;
}

export interface ExecView {
  execId: string;
  argv: string[];
  startedAt: string | null;
  exitCode: number | null;
  durationMs: number | null;
  limitsHit: string[];
  errorCode: string | null;
  stdoutBytes: number | null;
  stderrBytes: number | null;
  completed: boolean;
}

/** A sandbox's execs: `sandbox.exec.started` and `sandbox.exec.completed` joined on `exec_id`, in order. */
export function execs(receipts: readonly Receipt[]): ExecView[] {
  const byId = new Map<string, ExecView>();
  for (const receipt of receipts) {
    if (receipt.type !== 'sandbox.exec.started' && receipt.type !== 'sandbox.exec.completed') continue;
    const execId = str(receipt.exec_id) ?? `#${receipt.seq}`;
    const exec = byId.get(execId) ?? { execId, argv: strings(receipt.argv), startedAt: null, exitCode: null, durationMs: null, limitsHit: [], errorCode: null, stdoutBytes: null, stderrBytes: null, completed: false };
    if (receipt.type === 'sandbox.exec.started') exec.startedAt = receipt.ts;
    else {
      exec.completed = true;
      exec.exitCode = num(receipt.exit_code);
      exec.durationMs = num(receipt.duration_ms);
      exec.limitsHit = strings(receipt.limits_hit);
      exec.errorCode = str(receipt.error_code);
      exec.stdoutBytes = num(receipt.stdout_bytes);
      exec.stderrBytes = num(receipt.stderr_bytes);
    }
    byId.set(execId, exec);
  }
  return [...byId.values()];
}

export interface FileOperation {
  seq: number;
  direction: 'written' | 'read';
  path: string;
  bytes: number | null;
  sha256: string | null;
  ts: string;
}

/** Files written into or read out of a sandbox, in chain order. */
export function fileOperations(receipts: readonly Receipt[]): FileOperation[] {
  return receipts
    .filter((receipt) => receipt.type === 'sandbox.file.written' || receipt.type === 'sandbox.file.read')
    .map((receipt) => ({ seq: receipt.seq, direction: receipt.type === 'sandbox.file.written' ? 'written' : 'read', path: str(receipt.path) ?? '?', bytes: num(receipt.bytes), sha256: str(receipt.sha256), ts: receipt.ts }));
}
