import { parseEvidenceReceipt } from '@cairn/contracts';
import type { ReceiptEnvelope } from '@cairn/contracts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultGiveUp } from './evidence-reactor.js';
import { ReactionContext } from './reaction-context.js';
import { createEvidenceWorld, expectSealedChain, passingRun, plannedRun, racingLog } from './testing/index.js';
import type { EvidenceWorld } from './testing/index.js';

// The reactor's default give-up on the real JetStream, with a seal racing it between its read and its append.
let world: EvidenceWorld;

beforeAll(async () => {
  world = await createEvidenceWorld('giveup');
});

afterAll(async () => {
  await world?.dispose();
});

/** A run submitted; the give-up is on its `run.submitted`, where `race` runs after the first read. */
async function giveUpOn(label: string, race: (runId: string) => Promise<unknown>): Promise<ReceiptEnvelope[]> {
  const runId = world.runId(label);
  const [submitted] = plannedRun(runId, passingRun()).events;
  const parsed = parseEvidenceReceipt(await world.append(runId, submitted!));
  if (!parsed.ok) throw new Error('not a receipt');
  const ctx = new ReactionContext(parsed.receipt, 'policy', racingLog(world.log, race), () => undefined);
  await defaultGiveUp(ctx, new Error('stuck'));
  return world.chain(runId);
}

/** A cancel and its seal, as intake and the grader append them. */
async function cancelAndSeal(runId: string): Promise<void> {
  const cancelled = await world.append(runId, { type: 'run.cancelled', actor: 'intake', causation: null, key: 'cancel', fields: { cancelled_by: 'key:k1' } });
  await world.append(runId, { type: 'run.sealed', actor: 'grader', causation: `${runId}:${cancelled.seq}`, fields: { final_state: 'CANCELLED', evidence_digest: cancelled.hash } });
}

describe('defaultGiveUp', () => {
  it('given a seal landing between its read and its append, then it appends nothing after run.sealed', async () => {
    const receipts = await giveUpOn('gusealed', cancelAndSeal);
    expect(receipts.map((r) => r.type)).toEqual(['run.submitted', 'run.cancelled', 'run.sealed']);
    expect(expectSealedChain(receipts)).toEqual({ ok: true, problems: [] });
  });

  it('without a race, fails the run E_UNKNOWN_STATE on the head it read (the control)', async () => {
    const receipts = await giveUpOn('guopen', () => Promise.resolve());
    expect(receipts.map((r) => r.type)).toEqual(['run.submitted', 'run.failed']);
    expect(receipts.at(-1)).toMatchObject({ actor: 'policy', error_code: 'E_UNKNOWN_STATE', message: 'policy could not handle run.submitted: stuck' });
  });
});
