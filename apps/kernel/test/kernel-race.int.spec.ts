import 'reflect-metadata';
import { parseEvidenceReceipt } from '@cairn/contracts';
import type { EvidenceReceipt, ReceiptEnvelope } from '@cairn/contracts';
import { verifyChain } from '@cairn/evidence';
import { foldRun } from '@cairn/lifecycle';
import { ArtifactLoader, JsonLogger, ReactionContext, RunScanners } from '@cairn/service-kit';
import { createEvidenceWorld, passingRun, plannedRun, racingLog } from '@cairn/service-kit/testing';
import type { EvidenceWorld } from '@cairn/service-kit/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KernelFactsHandler } from '../src/kernel-facts.handler.js';

/*
 * Another writer racing the kernel: the handler is driven directly on the real JetStream, and the
 * racing receipt is appended exactly between its read of the chain and its append.
 */

let world: EvidenceWorld;
let handler: KernelFactsHandler;

beforeAll(async () => {
  world = await createEvidenceWorld('kernrace');
  handler = new KernelFactsHandler(
    new ArtifactLoader(world.store, { maxArtifactBytes: 1 << 20, maxRunBytes: 1 << 22 }),
    await RunScanners.create({}, null),
    new JsonLogger('kernel', 'error'),
  );
});

afterAll(async () => {
  await world?.dispose();
});

function receiptOf(envelope: ReceiptEnvelope | undefined): EvidenceReceipt {
  const parsed = parseEvidenceReceipt(envelope);
  if (!parsed.ok) throw new Error('not a receipt');
  return parsed.receipt;
}

/** An executed run, and the context of the kernel's reaction to its `run.executed`, on a log where `race` runs after the first read. */
async function executedRace(label: string, race: (runId: string) => Promise<unknown>): Promise<{ runId: string; ctx: ReactionContext }> {
  const runId = world.runId(label);
  await world.appendRun(runId, plannedRun(runId, passingRun()));
  const executed = receiptOf((await world.chain(runId)).at(-1));
  return { runId, ctx: new ReactionContext(executed, 'kernel', racingLog(world.log, race), () => undefined) };
}

const warning = (runId: string) =>
  world.append(runId, { type: 'alert.raised', actor: 'runtime', causation: null, key: 'late', fields: { severity: 'warning', error_code: 'E_INTERNAL', message: 'a late note' } });
const cancel = (runId: string) => world.append(runId, { type: 'run.cancelled', actor: 'intake', causation: null, key: 'cancel', fields: { cancelled_by: 'key:k1' } });

describe('the kernel racing another writer', () => {
  it('given a receipt landing between its read and its append, then it reads again and appends kernel.facts on the new head', async () => {
    const { runId, ctx } = await executedRace('kraceok', warning);
    await handler.handle(ctx);
    const receipts = await world.chain(runId);
    expect(receipts.map((r) => r.type).slice(-3)).toEqual(['run.executed', 'alert.raised', 'kernel.facts']);
    expect(receipts.at(-1)).toMatchObject({ actor: 'kernel', causation: `${runId}:10`, prev_hash: receipts.at(-2)!.hash });
    expect(verifyChain(receipts)).toMatchObject({ ok: true });
    expect(foldRun(receipts.map(receiptOf))).toMatchObject({ state: 'EXECUTED', errorCode: null });
  });

  it('given a cancel landing between its read and its append, then it computes no facts: nothing after run.cancelled', async () => {
    const { runId, ctx } = await executedRace('kracecancel', cancel);
    await handler.handle(ctx);
    const receipts = await world.chain(runId);
    expect(receipts.map((r) => r.type).slice(-2)).toEqual(['run.executed', 'run.cancelled']);
    expect(foldRun(receipts.map(receiptOf))).toMatchObject({ state: 'CANCELLED', errorCode: null });
  });

  it('without a race, appends kernel.facts once on the head it read (the control)', async () => {
    const { runId, ctx } = await executedRace('kracenone', () => Promise.resolve());
    await handler.handle(ctx);
    await handler.handle(ctx);
    const receipts = await world.chain(runId);
    expect(receipts.map((r) => r.type).slice(-2)).toEqual(['run.executed', 'kernel.facts']);
  });
});
