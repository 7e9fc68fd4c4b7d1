import type { LeaseStore } from '@cairn/operational';
import type { ReactionContext } from '@cairn/service-kit';
import type { Assessment } from './run-assessment.js';
import { runFailedFields, sandboxDestroyedFields } from './runtime-receipts.builder.js';

/**
 * Records a run whose sandbox outlived the runtime that ran it (a crash, or a redelivery of its
 * placement): its teardown, if none is on the chain, then `run.failed` `E_WORKER_LOST`. Never a
 * second try (PRODUCT.md: a step is never run twice unasked). Both appends are keyed on the
 * placement, so reconcile at start and a redelivered placement store them once between them.
 */
export async function failLostRun(
  ctx: ReactionContext,
  lost: Extract<Assessment, { kind: 'lost' }>,
  options: { workerId: string; leaseId: string; verifiedGone: boolean; leases: LeaseStore },
): Promise<void> {
  if (!lost.teardownRecorded) {
    await ctx.append('sandbox.destroyed', sandboxDestroyedFields(lost.containerName, options.verifiedGone, 'reaped'), 'reaped');
  }
  const message = `worker ${options.workerId} lost this run after creating sandbox ${lost.containerName} (it restarted or the placement was delivered again); its steps are not run again`;
  await ctx.append('run.failed', runFailedFields('E_WORKER_LOST', message), 'worker-lost');
  await options.leases.delete(ctx.chainId, options.leaseId);
}
