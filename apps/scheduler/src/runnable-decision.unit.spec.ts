import type { EvidenceReceiptOf } from '@cairn/contracts';
import { readValidRunChain } from '@cairn/lifecycle';
import { LocalChain, passingRun, plannedRun, withLostAttempt } from '@cairn/service-kit/testing';
import { describe, expect, it } from 'vitest';
import { placementAttempt, runnableDecision } from './placements.service.js';

const RUN = 'run_retry1';

/** The chain of a run whose attempt 1 was lost, up to and including its `run.retried` and `more` receipts after it. */
function retriedChain(more = 0) {
  const planned = withLostAttempt(RUN, plannedRun(RUN, passingRun({ ...passingRun().spec, retries: 1 })));
  const retried = planned.events.findIndex((e) => e.type === 'run.retried');
  const local = new LocalChain(RUN).addAll(planned.events.slice(0, retried + 1 + more));
  const chain = readValidRunChain(local.receipts);
  if (chain === null) throw new Error('the fixture does not validate');
  return { chain, retried: local.receipts[retried] as EvidenceReceiptOf<'run.retried'> };
}

describe('runnableDecision on run.retried (ADR 0035)', () => {
  it('given a lost attempt just retried, when its run.retried is read, then the run is placed again by its policy decision, as attempt 2', () => {
    const { chain, retried } = retriedChain();
    const decided = runnableDecision(retried, chain);
    expect(decided?.type).toBe('policy.decided');
    expect(decided?.decision).toBe('allow');
    expect(placementAttempt(chain.receipts)).toBe(2);
  });

  it('given attempt 2 placed already, when the run.retried is delivered again, then it calls for no second placement', () => {
    const { chain, retried } = retriedChain(1);
    expect(chain.receipts.at(-1)?.type).toBe('run.scheduled');
    expect(runnableDecision(retried, chain)).toBeNull();
  });

  it('given the policy.decided delivered again after the retry, when read, then it places nothing: only the run.retried places the next attempt', () => {
    const { chain } = retriedChain();
    const decided = chain.receipts.find((r) => r.type === 'policy.decided')!;
    expect(runnableDecision(decided, chain)).toBeNull();
  });

  it('given a run with no retry, when placed, then its placement is attempt 1', () => {
    const local = new LocalChain(RUN).addAll(plannedRun(RUN, passingRun()).events.slice(0, 2));
    expect(placementAttempt(local.receipts)).toBe(1);
  });
});
