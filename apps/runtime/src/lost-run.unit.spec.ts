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
  const written: { type: string; fields: Record<string, unknown>; key: string | undefined }[] = [];
  const deleted: string[] = [];
  const ctx = {
    receipt: placement,
    chainId: RUN,
    reactOnChain: <T>(react: (chain: { receipts: readonly unknown[]; headSeq: number }) => Promise<T>) => react({ receipts, headSeq: receipts.at(-1)!.seq }),
    appendAt: (head: number, type: string, fields: Record<string, unknown>, key?: string) => {
      appended.push(type);
      written.push({ type, fields, key });
      return Promise.resolve({ receipt: { seq: head + 1 } });
    },
  } as unknown as ReactionContext;
  const leases = { delete: (runId: string, leaseId: string) => Promise.resolve(void deleted.push(`${runId} ${leaseId}`)) } as unknown as LeaseStore;
  return { ctx, leases, appended, written, deleted };
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

describe('settleLostRun with retries (ADR 0035)', () => {
  const opted = () => {
    const scenario = passingRun();
    return passingRun({ ...scenario.spec, retries: 1 });
  };

  it('given a placement this worker never finished and a RunSpec with a retry left, when settled, then the sandbox is reaped and run.retried keyed by attempt gives it back, not run.failed', async () => {
    const chain = new LocalChain(RUN).addAll(plannedRun(RUN, opted()).events.slice(0, 5));
    const placement = chain.receipts[2] as EvidenceReceiptOf<'run.scheduled'>;
    const { ctx, leases, appended, written, deleted } = world(chain.receipts, placement);
    expect(await settleLostRun(ctx, { workerId: placement.worker_id, leaseId: placement.lease_id, verifiedGone: true, leases })).toBe('retried');
    expect(appended).toEqual(['sandbox.destroyed', 'run.retried']);
    expect(written[1]).toMatchObject({
      key: 'retried-1',
      fields: { attempt: 1, error_code: 'E_WORKER_LOST', worker_id: placement.worker_id, lease_id: placement.lease_id, retries_left: 0 },
    });
    expect(deleted).toEqual([`${RUN} ${placement.lease_id}`]);
  });

  it('given the second attempt lost with its one retry used, when settled, then the run fails E_WORKER_LOST', async () => {
    const planned = withLostAttempt(RUN, plannedRun(RUN, opted()));
    const retried = planned.events.findIndex((e) => e.type === 'run.retried');
    // Attempt 2: placed, its sandbox up, its first step started — then its worker restarts.
    const chain = new LocalChain(RUN).addAll(planned.events.slice(0, retried + 4));
    const placement = chain.receipts.findLast((r) => r.type === 'run.scheduled') as EvidenceReceiptOf<'run.scheduled'>;
    expect(placement.attempt).toBe(2);
    const { ctx, leases, appended, written } = world(chain.receipts, placement);
    expect(await settleLostRun(ctx, { workerId: placement.worker_id, leaseId: placement.lease_id, verifiedGone: true, leases })).toBe('failed');
    expect(appended).toEqual(['sandbox.destroyed', 'run.failed']);
    expect(written[1]?.fields).toMatchObject({ error_code: 'E_WORKER_LOST', message: expect.stringMatching(/all 1 retries are used$/) as string });
  });

  it('given a cancel asked during the attempt, when its worker is lost with a retry left, then the cancel is answered: a cancel is never lost with the attempt', async () => {
    const chain = new LocalChain(RUN).addAll(plannedRun(RUN, opted()).events.slice(0, 5));
    chain.add({ type: 'run.cancel_requested', actor: 'intake', causation: null, fields: { requested_by: 'key:k1', reason: 'not needed' } });
    const placement = chain.receipts[2] as EvidenceReceiptOf<'run.scheduled'>;
    const { ctx, leases, appended } = world(chain.receipts, placement);
    (ctx as unknown as { causedBy: () => ReactionContext }).causedBy = () => ctx;
    expect(await settleLostRun(ctx, { workerId: placement.worker_id, leaseId: placement.lease_id, verifiedGone: true, leases })).toBe('cancelled');
    expect(appended).toEqual(['sandbox.destroyed', 'run.cancelled']);
  });
});
