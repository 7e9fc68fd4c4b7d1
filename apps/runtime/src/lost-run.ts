import { CairnError } from '@cairn/contracts';
import type { EvidenceReceiptOf } from '@cairn/contracts';
import { CANCEL_ANSWER_KEY, foldRun, isTerminal, lostWorkerRecord, openSandboxes, pendingCancelRequest, retriesOf } from '@cairn/lifecycle';
import type { LeaseStore } from '@cairn/operational';
import type { ReactionContext } from '@cairn/service-kit';
import { parseChain } from './run-assessment.js';
import { runCancelledFields, runFailedFields, sandboxDestroyedFields } from './runtime-receipts.builder.js';

/**
 * What `settleLostRun` did: answered a cancel, failed the run, gave it back to the queue for its
 * next attempt (`run.retried`, ADR 0035), only recorded the teardown of a run that had ended, or nothing.
 */
export type LostRunOutcome = 'cancelled' | 'failed' | 'retried' | 'reaped' | 'untouched';

/**
 * Ends a run placed on this worker that no execution here is running (a crash, a redelivered
 * placement, a cancel asked of a run that never started or outlived its runtime): the teardown of
 * its sandbox if one is open on the record (`reaped`), then `run.cancelled` answering a pending
 * cancel request — or, when its sandbox was created and the run never finished, `run.failed`
 * `E_WORKER_LOST`, or `run.retried` while its RunSpec's retries allow another attempt (keyed
 * `retried-<attempt>` as the scheduler's lease scan keys it). Never a second try here, and none
 * unasked (PRODUCT.md: a step is never run twice unasked); a pending cancel wins over a retry. Every
 * append is keyed and guarded on the chain it was decided from (`reactOnChain`), so reconcile, a
 * redelivered placement, a cancel reaction and the scheduler's lease scan store each once between
 * them and never after another's ending. `placement` is a context on the `run.scheduled`.
 */
export async function settleLostRun(
  placement: ReactionContext,
  options: { workerId: string; leaseId: string; verifiedGone: boolean; leases: LeaseStore },
): Promise<LostRunOutcome> {
  const placed = placement.receipt;
  if (placed.type !== 'run.scheduled') throw new CairnError('E_INTERNAL', `settleLostRun is given a run.scheduled, not ${placed.type}`);
  const outcome = await placement.reactOnChain(async ({ receipts, headSeq }): Promise<LostRunOutcome> => {
    const parsed = parseChain(receipts);
    if (!parsed.ok) throw new CairnError('E_UNKNOWN_STATE', `run ${placement.chainId} holds a receipt that breaks its contract: ${parsed.message}`);
    const chain = parsed.receipts;
    const view = foldRun(chain);
    if (view === null || view.sealed) return 'untouched';
    const after = chain.filter((r) => r.seq > placed.seq);
    // Executed, placed again, or its attempt retried (ADR 0035: the lease fence; its reconcile reaps the container).
    if (after.some((r) => r.type === 'run.executed' || r.type === 'run.scheduled' || r.type === 'run.retried')) return 'untouched';
    let head = headSeq;
    const [open] = openSandboxes(after);
    if (open !== undefined) {
      head = (await placement.appendAt(head, 'sandbox.destroyed', sandboxDestroyedFields(open, options.verifiedGone, 'reaped'), 'reaped')).receipt.seq;
    }
    if (isTerminal(view.state)) return open === undefined ? 'untouched' : 'reaped';
    const request = pendingCancelRequest(chain, view);
    if (request !== null) {
      await answerCancel(placement, request, head);
      return 'cancelled';
    }
    const created = after.find((r): r is EvidenceReceiptOf<'sandbox.created'> => r.type === 'sandbox.created');
    if (created === undefined) return 'untouched';
    const lost = `worker ${options.workerId} lost this run after creating sandbox ${created.container_name} (it restarted or the placement was delivered again); its steps are not run again here`;
    const record = lostWorkerRecord(retriesOf(chain), placed, lost);
    if (record.type === 'run.retried') {
      await placement.appendAt(head, 'run.retried', record.fields, record.key);
      return 'retried';
    }
    await placement.appendAt(head, 'run.failed', runFailedFields('E_WORKER_LOST', record.fields.message), 'worker-lost');
    return 'failed';
  });
  if (outcome !== 'untouched') await options.leases.delete(placement.chainId, options.leaseId);
  return outcome;
}

/** `run.cancelled` answering `request`: the same logical event whoever answers it (CANCEL_ANSWER_KEY). */
export function answerCancel(ctx: ReactionContext, request: EvidenceReceiptOf<'run.cancel_requested'>, headSeq: number): Promise<unknown> {
  return ctx.causedBy(request).appendAt(headSeq, 'run.cancelled', runCancelledFields(request), CANCEL_ANSWER_KEY);
}
