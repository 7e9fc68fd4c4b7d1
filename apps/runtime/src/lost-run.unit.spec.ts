import type { EvidenceReceipt, EvidenceReceiptOf } from '@cairn/contracts';
import type { LeaseStore } from '@cairn/operational';
import type { ReactionContext } from '@cairn/service-kit';
import { LocalChain, passingRun, plannedRun, withLostAttempt } from '@cairn/service-kit/testing';
import { describe, expect, it } from 'vitest';
import { settleLostRun } from './lost-run.js';

const RUN = 'run_lost1';

/** What `settleLostRun` appended and which leases it deleted, against a chain held in memory. */
function world(receipts: readonly EvidenceReceipt[], placement: EvidenceReceiptOf<'run.scheduled'>) {
  const appended: string[] = [];
  const deleted: string[] = [];
  const ctx = {
    receipt: placement,
    chainId: RUN,
    reactOnChain: <T>(react: (chain: { receipts: readonly unknown[]; headSeq: number }) => Promise<T>) => react({ receipts, headSeq: receipts.at(-1)!.seq }),
    appendAt: (head: number, type: string) => {
      appended.push(type);
      return Promise.resolve({ receipt: { seq: head + 1 } });
    },
  } as unknown as ReactionContext;
  const leases = { delete: (runId: string, leaseId: string) => Promise.resolve(void deleted.push(`${runId} ${leaseId}`)) } as unknown as LeaseStore;
  return { ctx, leases, appended, deleted };
}

describe('settleLostRun', () => {
  it('given a placement this worker never finished, when settled, then its sandbox is reaped on the record and the run fails E_WORKER_LOST', async () => {
    const chain = new LocalChain(RUN).addAll(plannedRun(RUN, passingRun()).events.slice(0, 5)); // sandbox up, step 0 started
    const placement = chain.receipts[2] as EvidenceReceiptOf<'run.scheduled'>;
    const { ctx, leases, appended, deleted } = world(chain.receipts, placement);
    expect(await settleLostRun(ctx, { workerId: placement.worker_id, leaseId: placement.lease_id, verifiedGone: true, leases })).toBe('failed');
    expect(appended).toEqual(['sandbox.destroyed', 'run.failed']);
    expect(deleted).toEqual([`${RUN} ${placement.lease_id}`]);
  });

  it('given a placement whose attempt was retried (ADR 0035), when its worker settles it, then nothing is written: the fence holds and the reaper owes the teardown', async () => {
    const planned = withLostAttempt(RUN, plannedRun(RUN, passingRun()));
    const retried = planned.events.findIndex((e) => e.type === 'run.retried');
    for (const upTo of [retried + 1, planned.events.length]) {
      const chain = new LocalChain(RUN).addAll(planned.events.slice(0, upTo));
      const placement = chain.receipts[2] as EvidenceReceiptOf<'run.scheduled'>;
      const { ctx, leases, appended, deleted } = world(chain.receipts, placement);
      expect(await settleLostRun(ctx, { workerId: placement.worker_id, leaseId: placement.lease_id, verifiedGone: true, leases })).toBe('untouched');
      expect(appended).toEqual([]);
      expect(deleted).toEqual([]);
    }
  });
});
