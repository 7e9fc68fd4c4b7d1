import 'reflect-metadata';
import { loadConfig } from '@cairn/config';
import { parseEvidenceReceipt } from '@cairn/contracts';
import type { EvidenceReceipt, ReceiptEnvelope } from '@cairn/contracts';
import { readRunChain } from '@cairn/lifecycle';
import { ArtifactLoader, JsonLogger, ReactionContext, recordedRunOf, runFacts, RunScanners } from '@cairn/service-kit';
import type { LoadedArtifact } from '@cairn/service-kit';
import { createEvidenceWorld, expectSealedChain, passingRun, plannedRun, racingLog } from '@cairn/service-kit/testing';
import type { EvidenceWorld, PlannedEvent, RaceOptions } from '@cairn/service-kit/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GraderConfigSchema } from '../src/grader.config.js';
import { GradingHandler } from '../src/grading.handler.js';

/*
 * Another writer racing the grader, the single sealer: the handler is driven directly on the real
 * JetStream, and the racing receipt is appended exactly between a read and an append of its.
 */

let world: EvidenceWorld;
let handler: GradingHandler;

beforeAll(async () => {
  world = await createEvidenceWorld('gradrace');
  // No teardown grace: the grader seals as soon as it has a reason to, the worst case for a late teardown.
  const config = loadConfig(GraderConfigSchema, { ...world.env, CAIRN_GRADER_TEARDOWN_GRACE_MS: '0' });
  handler = new GradingHandler(
    new ArtifactLoader(world.store, { maxArtifactBytes: 1 << 20, maxRunBytes: 1 << 22 }),
    await RunScanners.create({}, null),
    config,
    new JsonLogger('grader', 'error'),
    null,
    null,
    null,
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

function context(trigger: ReceiptEnvelope, race: (runId: string) => Promise<unknown>, options?: RaceOptions): ReactionContext {
  return new ReactionContext(receiptOf(trigger), 'grader', racingLog(world.log, race, options), () => undefined);
}

/** A run verified by the kernel and the verifier; its `verification.completed` is the trigger. */
async function verifiedRun(label: string): Promise<{ runId: string; verification: ReceiptEnvelope }> {
  const runId = world.runId(label);
  const planned = plannedRun(runId, passingRun());
  await world.appendRun(runId, planned);
  const loaded = new Map<string, LoadedArtifact>([...planned.blobs].map(([sha, bytes]) => [sha, { state: 'ok', bytes }]));
  const facts = runFacts(recordedRunOf(readRunChain(await world.chain(runId))!.receipts), loaded);
  const kernel = await world.append(runId, { type: 'kernel.facts', actor: 'kernel', causation: `${runId}:10`, fields: { facts, operations: ['file_digest'] } });
  const verification = await world.append(runId, {
    type: 'verification.completed',
    actor: 'verifier',
    causation: `${runId}:${kernel.seq}`,
    fields: { verdict: 'SUPPORTS', chain_ok: true, head_hash: kernel.hash, receipts_checked: kernel.seq, invariants: [{ id: 'chain', ok: true }], checks: [] },
  });
  return { runId, verification };
}

/** A run cancelled while its sandbox was up (the lease was lost): the teardown is not on the record yet. */
async function cancelledMidRun(label: string): Promise<{ runId: string; cancelled: ReceiptEnvelope; teardown: PlannedEvent }> {
  const runId = world.runId(label);
  const planned = plannedRun(runId, passingRun());
  await world.appendRun(runId, planned, { upTo: 6 }); // … sandbox.created, step.started
  const cancelled = await world.append(runId, {
    type: 'run.cancelled',
    actor: 'scheduler',
    causation: null,
    key: 'cancel',
    fields: { cancelled_by: 'key:k1', error_code: 'E_WORKER_LOST' },
  });
  const teardown = planned.events.find((e) => e.type === 'sandbox.destroyed')!;
  return { runId, cancelled, teardown: { ...teardown, fields: { ...teardown.fields, reason: 'cancelled' } } };
}

const warning = (runId: string) =>
  world.append(runId, { type: 'alert.raised', actor: 'runtime', causation: null, key: 'late', fields: { severity: 'warning', error_code: 'E_INTERNAL', message: 'a late note' } });

describe('the grader racing another writer', () => {
  it('given the runtime’s late sandbox.destroyed landing between its read and its seal, then the seal lands after it and covers it', async () => {
    const { runId, cancelled, teardown } = await cancelledMidRun('grteardown');
    await handler.handle(context(cancelled, () => world.append(runId, teardown)));
    const receipts = await world.chain(runId);
    expect(receipts.map((r) => r.type).slice(-3)).toEqual(['run.cancelled', 'sandbox.destroyed', 'run.sealed']);
    expect(receipts.at(-1)).toMatchObject({ actor: 'grader', final_state: 'CANCELLED', error_code: 'E_WORKER_LOST', evidence_digest: receipts.at(-2)!.hash });
    expect(expectSealedChain(receipts)).toEqual({ ok: true, problems: [] });
  });

  it('given a receipt landing between its grade and its seal, then the seal lands on the new head and covers it', async () => {
    const { runId, verification } = await verifiedRun('grgraded');
    await handler.handle(context(verification, warning, { after: 'append' }));
    const receipts = await world.chain(runId);
    expect(receipts.map((r) => r.type).slice(-4)).toEqual(['verification.completed', 'grade.recorded', 'alert.raised', 'run.sealed']);
    expect(receipts.at(-1)).toMatchObject({ final_state: 'SEALED', evidence_digest: receipts.at(-2)!.hash });
    expect(receipts.filter((r) => r.type === 'grade.recorded')).toHaveLength(1);
    expect(expectSealedChain(receipts)).toEqual({ ok: true, problems: [] });
  });

  it('given another seal landing between its read and its seal, then it appends nothing: the first seal stays last', async () => {
    const { runId, cancelled, teardown } = await cancelledMidRun('grsealed');
    const other = async () => {
      const destroyed = await world.append(runId, teardown);
      await world.append(runId, { type: 'run.sealed', actor: 'grader', causation: `${runId}:${destroyed.seq}`, fields: { final_state: 'CANCELLED', error_code: 'E_WORKER_LOST', evidence_digest: destroyed.hash } });
    };
    await handler.handle(context(cancelled, other));
    const receipts = await world.chain(runId);
    expect(receipts.map((r) => r.type).slice(-3)).toEqual(['run.cancelled', 'sandbox.destroyed', 'run.sealed']);
    expect(receipts.at(-1)).toMatchObject({ causation: `${runId}:${receipts.at(-2)!.seq}` });
    expect(expectSealedChain(receipts)).toEqual({ ok: true, problems: [] });
  });
});
