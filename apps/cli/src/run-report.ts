import { CairnError, parseEvidenceReceipt, ReceiptEnvelopeSchema } from '@cairn/contracts';
import { evolveRun } from '@cairn/lifecycle';
import type { RunView } from '@cairn/lifecycle';
import type { QueueSpot, Receipt, Run } from '@cairn/contracts';

/*
 * How runs and their receipts read in a terminal: one progress line per receipt worth showing, a
 * one-line summary, a table of runs. Pure, so it is unit-tested.
 */

/** The states a run ends in without being SEALED: `cairn run --wait` exits 1 on them. */
export const UNSUCCESSFUL_FINAL_STATES = ['FAILED', 'ROLLBACK', 'REJECTED', 'CANCELLED'] as const;

/** An argv as a person would type it: plain words bare, anything else single-quoted. */
export function formatArgv(argv: readonly unknown[]): string {
  return argv
    .map((arg) => {
      const text = String(arg);
      if (/^[A-Za-z0-9_./:=@%+,-]+$/.test(text)) return text;
      return `'${text.replace(/'/g, `'\\''`)}'`;
    })
    .join(' ');
}

function clip(text: string, max = 160): string {
  const oneLine = text.replace(/\s*\n\s*/g, ' ⏎ ');
  return oneLine.length <= max ? oneLine : `${oneLine.slice(0, max - 1)}…`;
}

function str(value: unknown): string | null {
  return typeof value === 'string' ? value : null;
}

function num(value: unknown): number | null {
  return typeof value === 'number' ? value : null;
}

/** `3/4` or `3/4 (upper bound 3.5)`, `-` when there is no grade. */
export function formatScore(score: number | null, maxScore: number | null, upperBound: number | null = null): string {
  if (score === null || maxScore === null) return '-';
  const bound = upperBound !== null && upperBound !== score ? ` (upper bound ${upperBound})` : '';
  return `${score}/${maxScore}${bound}`;
}

/** The progress line a receipt deserves, or null for receipts that add nothing for a person. */
export function receiptProgressLine(receipt: Receipt): string | null {
  const r = receipt as Record<string, unknown>;
  const step = num(r.step_index);
  switch (receipt.type) {
    case 'run.submitted':
      return `submitted   ${str((r.spec as { name?: unknown } | undefined)?.name) ?? ''}`.trimEnd();
    case 'policy.decided': {
      const decision = str(r.decision) ?? '?';
      const version = (str(r.policy_version) ?? '').slice(0, 12);
      const why = Array.isArray(r.reasons) && decision !== 'allow' ? `: ${clip(r.reasons.map(String).join('; '))}` : '';
      const code = str(r.error_code);
      return `policy      ${decision}${code === null ? '' : ` ${code}`} (policy ${version}…)${why}`;
    }
    case 'approval.requested':
      return `approval    waiting for a person: ${clip(str(r.reason) ?? '')}`;
    case 'approval.granted':
      return `approval    granted by ${str(r.approved_by) ?? '?'}`;
    case 'approval.rejected':
      return `approval    ${str(r.cause) === 'timeout' ? 'timed out' : `rejected by ${str(r.rejected_by) ?? '?'}`}`;
    case 'run.scheduled':
      return `scheduled   on ${str(r.worker_id) ?? '?'} (attempt ${num(r.attempt) ?? 1})`;
    case 'sandbox.created':
      return `sandbox     ${str(r.container_name) ?? '?'}  ${str(r.image) ?? ''}`.trimEnd();
    case 'step.started':
      return `step ${step ?? '?'}      $ ${clip(formatArgv(Array.isArray(r.argv) ? r.argv : []))}`;
    case 'step.completed': {
      const exit = r.exit_code === null ? `killed (${str(r.signal) ?? 'signal'})` : `exit ${num(r.exit_code) ?? '?'}`;
      const code = str(r.error_code);
      const limits = Array.isArray(r.limits_hit) && r.limits_hit.length > 0 ? `  limits hit: ${r.limits_hit.map(String).join(', ')}` : '';
      const ms = num(r.duration_ms);
      return `step ${step ?? '?'}      → ${exit}${code === null ? '' : ` ${code}`}${ms === null ? '' : `  (${ms} ms)`}${limits}`;
    }
    case 'sandbox.destroyed':
      return `sandbox     destroyed (${str(r.reason) ?? '?'}${r.verified_gone === true ? ', verified gone' : ', NOT verified gone'})`;
    case 'run.executed':
      return `executed    ${num(r.steps_completed) ?? '?'} steps`;
    case 'kernel.facts':
      return `facts       ${Array.isArray(r.operations) ? r.operations.map(String).join(', ') : ''}`;
    case 'verification.completed':
      return `verified    verdict ${str(r.verdict) ?? '?'}${r.chain_ok === true ? ', chain ok' : ', chain NOT ok'}`;
    case 'grade.recorded':
      return `graded      ${formatScore(num(r.score), num(r.max_score), num(r.upper_bound))}`;
    case 'judge.requested':
      return `judge       ${str(r.criterion_id) ?? '?'} asked ${str(r.model) ?? '?'} (attempt ${num(r.attempt) ?? '?'}, ${num(r.input_bytes) ?? '?'} bytes, budget ${num(r.max_tokens) ?? '?'} tokens)`;
    case 'judge.answered':
      return `judge       ${str(r.criterion_id) ?? '?'} answered in ${num(r.latency_ms) ?? '?'} ms`;
    case 'grade.failed':
      return `grade       failed${str(r.cause) === null ? '' : ` (${str(r.cause)})`}: ${clip(str(r.reason) ?? '')}`;
    case 'grade.requested':
      return `regrade     asked by ${str(r.requested_by) ?? '?'}`;
    case 'run.failed':
    case 'run.rolled_back':
      return `${receipt.type === 'run.failed' ? 'failed ' : 'rollback'}    ${str(r.error_code) ?? '?'}: ${clip(str(r.message) ?? '')}`;
    case 'run.retried':
      // Its worker was lost (ADR 0035): the attempt's receipts stay, the next attempt is the run's.
      return `retried     attempt ${num(r.attempt) ?? '?'} lost with ${str(r.worker_id) ?? '?'} (${str(r.error_code) ?? '?'}): placed again, ${num(r.retries_left) ?? '?'} retries left after the next`;
    case 'run.cancelled':
      return `cancelled   by ${str(r.cancelled_by) ?? '?'}`;
    case 'run.sealed':
      return `sealed      ${str(r.final_state) ?? '?'}${str(r.error_code) === null ? '' : ` ${str(r.error_code)}`}`;
    default:
      return null;
  }
}

/** Folds a receipt into the run's view (as the projector does), checking its shape against the contracts. */
export function foldReceipt(view: RunView | null, receipt: Receipt): RunView {
  const parsed = parseEvidenceReceipt(receipt);
  if (parsed.ok) return evolveRun(view, parsed.receipt);
  const envelope = ReceiptEnvelopeSchema.safeParse(receipt);
  if (!envelope.success) throw new CairnError('E_INTERNAL', `receipt ${receipt.seq} of ${receipt.run_id} is not a receipt: ${parsed.message}`);
  // An unknown type still folds: the lifecycle stops the run on it (I-5).
  return evolveRun(view, envelope.data);
}

export interface RunOutcome {
  runId: string;
  state: string;
  verdict: string | null;
  score: number | null;
  maxScore: number | null;
  errorCode: string | null;
}

export function outcomeOf(run: Pick<Run | RunView, 'runId' | 'state' | 'verdict' | 'score' | 'maxScore' | 'errorCode'>): RunOutcome {
  return { runId: run.runId, state: run.state, verdict: run.verdict, score: run.score, maxScore: run.maxScore, errorCode: run.errorCode };
}

export function isUnsuccessful(state: string): boolean {
  return (UNSUCCESSFUL_FINAL_STATES as readonly string[]).includes(state);
}

/** `run_…  SEALED  verdict SUPPORTS  score 4/4` (and the error code when there is one). */
export function formatOutcome(outcome: RunOutcome & { upperBound?: number | null }): string {
  const parts = [outcome.runId, outcome.state];
  if (outcome.errorCode !== null) parts.push(outcome.errorCode);
  parts.push(`verdict ${outcome.verdict ?? '-'}`, `score ${formatScore(outcome.score, outcome.maxScore, outcome.upperBound ?? null)}`);
  return parts.join('  ');
}

/** The details of one run, a field per line. */
export function formatRunDetails(run: Run): string {
  const rows: [string, string][] = [
    ['run', run.runId],
    ['name', run.name ?? '-'],
    ['tenant', run.tenant],
    ['state', run.sealed && run.state !== 'SEALED' ? `${run.state} (sealed)` : run.state],
    ['error', run.errorCode ?? '-'],
    ['verdict', run.verdict ?? '-'],
    ['score', formatScore(run.score, run.maxScore, run.upperBound)],
    ...(run.queue === undefined ? [] : ([['queued', formatQueueSpot(run.queue)]] as [string, string][])),
    ['events', `${run.eventCount}  head ${run.headHash ?? '-'}`],
    ['created', run.createdAt],
    ['updated', run.updatedAt],
    // The id to look the run up by in a tracing backend (ADR 0031); no line for a run submitted untraced.
    ...(run.traceId === undefined ? [] : ([['trace', run.traceId]] as [string, string][])),
  ];
  return rows.map(([key, value]) => `${key.padEnd(9)}${value}`).join('\n');
}

const WAITS: Readonly<Record<string, string>> = {
  slots: 'a free slot',
  memory: 'memory',
  disk: 'disk',
  pids: 'processes',
  cpu: 'CPU share',
  runtime: 'a runtime worker',
  image: 'a worker with its image',
};

/** `3 of 7, waiting for memory since …` (and until when, for a sandbox create). */
export function formatQueueSpot(spot: QueueSpot): string {
  const until = spot.until === null ? '' : `, until ${spot.until}`;
  return `${spot.position} of ${spot.length}, waiting for ${WAITS[spot.waitingFor] ?? spot.waitingFor} since ${spot.since}${until}`;
}

/** Columns padded to their widest cell; the last column is not padded. */
export function formatTable(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((cell, i) => Math.max(cell.length, ...rows.map((row) => (row[i] ?? '').length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((cell, i) => (i === cells.length - 1 ? cell : cell.padEnd(widths[i] ?? 0)))
      .join('  ')
      .trimEnd();
  return [line(header), ...rows.map(line)].join('\n');
}

export function formatRunTable(runs: readonly Run[]): string {
  if (runs.length === 0) return 'no runs yet';
  return formatTable(
    ['RUN', 'STATE', 'ERROR', 'VERDICT', 'SCORE', 'UPDATED', 'NAME'],
    runs.map((run) => [run.runId, run.queue === undefined ? run.state : `${run.state}(queued ${run.queue.position}/${run.queue.length})`, run.errorCode ?? '-', run.verdict ?? '-', formatScore(run.score, run.maxScore), run.updatedAt, run.name ?? '-']),
  );
}

/** One receipt per line for `cairn events`: seq, time, type, actor and what the progress line says. */
export function formatEventLine(receipt: Receipt): string {
  const r = receipt as Record<string, unknown>;
  const detail = receiptProgressLine(receipt)?.replace(/^\S+(?: \d+)?\s+/, '') ?? '';
  return `${String(receipt.seq).padStart(4)}  ${str(r.ts) ?? '-'}  ${receipt.type.padEnd(22)}  ${(str(r.actor) ?? '-').padEnd(9)}  ${detail}`.trimEnd();
}
