import type { EvidenceReceipt, EvidenceReceiptOf, RunState } from '@cairn/contracts';
import { foldRun } from './evolve-run.js';
import type { RunView } from './evolve-run.js';
import { attemptOf } from './run-attempt.js';
import { isTerminal } from './run-transitions.js';

/**
 * The key of the `run.cancelled` that answers a cancel request (caused by that request). Whoever
 * answers it — the runtime that stopped the run, its reconcile after a restart, or the scheduler
 * when the worker is lost — appends the same logical event, so it is stored once.
 */
export const CANCEL_ANSWER_KEY = 'cancel-answer';

/** Containers the chain shows created and not destroyed since. */
export function openSandboxes(receipts: readonly EvidenceReceipt[]): string[] {
  const open = new Set<string>();
  for (const receipt of receipts) {
    if (receipt.type === 'sandbox.created') open.add(receipt.container_name);
    else if (receipt.type === 'sandbox.destroyed') open.delete(receipt.container_name);
  }
  return [...open];
}

/** The request a run has not answered yet: its first `run.cancel_requested`, while the run has not ended. */
export function pendingCancelRequest(
  receipts: readonly EvidenceReceipt[],
  view: RunView | null = foldRun(receipts),
): EvidenceReceiptOf<'run.cancel_requested'> | null {
  if (view === null || view.sealed || isTerminal(view.state)) return null;
  return receipts.find((r): r is EvidenceReceiptOf<'run.cancel_requested'> => r.type === 'run.cancel_requested') ?? null;
}

/** What a cancel command does to a run, decided from its chain. */
export type CancelPath =
  | { readonly kind: 'sealed' }
  /** Ended otherwise (FAILED, ROLLBACK, REJECTED): there is nothing left to cancel. */
  | { readonly kind: 'ended'; readonly state: RunState }
  /** Cancelled already: a repeat changes nothing. */
  | { readonly kind: 'cancelled' }
  /** Asked already and not answered yet: a repeat changes nothing. */
  | { readonly kind: 'requested'; readonly request: EvidenceReceiptOf<'run.cancel_requested'> }
  /** Nothing runs on a worker: `run.cancelled` ends the run now. */
  | { readonly kind: 'cancel' }
  /** A sandbox may be running it: `run.cancel_requested`, answered by the runtime. */
  | { readonly kind: 'request' };

/**
 * How a cancel reaches a run (docs/adr/0003). A run RUNNING, or with a sandbox open on the record
 * (a step held for approval mid-run), is asked to stop: only its runtime can stop the sandbox and
 * record the teardown. Any other live run is cancelled at once; the runtime that is about to start
 * it finds its guarded `sandbox.created` refused and starts nothing. Only the current attempt's
 * sandboxes count (ADR 0035): one left by an attempt lost to its worker is the reaper's, and no
 * runtime would answer a request for it.
 */
export function cancelPath(view: RunView, receipts: readonly EvidenceReceipt[]): CancelPath {
  if (view.sealed) return { kind: 'sealed' };
  if (view.state === 'CANCELLED') return { kind: 'cancelled' };
  if (isTerminal(view.state)) return { kind: 'ended', state: view.state };
  const request = pendingCancelRequest(receipts, view);
  if (request !== null) return { kind: 'requested', request };
  return view.state === 'RUNNING' || openSandboxes(attemptOf(receipts)).length > 0 ? { kind: 'request' } : { kind: 'cancel' };
}
