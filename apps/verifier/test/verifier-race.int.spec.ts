import 'reflect-metadata';
import { parseEvidenceReceipt } from '@cairn/contracts';
import type { EvidenceReceipt, ReceiptEnvelope } from '@cairn/contracts';
import { canonicalJson, verifyChain } from '@cairn/evidence';
import { foldRun, readRunChain } from '@cairn/lifecycle';
import { ArtifactLoader, JsonLogger, ReactionContext, recordedRunOf, runFacts, RunScanners } from '@cairn/service-kit';
import type { LoadedArtifact } from '@cairn/service-kit';
import { createEvidenceWorld, passingRun, plannedRun, racingLog, TENANT } from '@cairn/service-kit/testing';
import type { EvidenceWorld } from '@cairn/service-kit/testing';
import { jetstream } from '@nats-io/jetstream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { VerificationHandler } from '../src/verification.handler.js';

/*
 * Another writer racing the verifier: the handler is driven directly on the real JetStream, and
 * the racing receipts are appended exactly between its read of the chain and its append.
 */

let world: EvidenceWorld;
let handler: VerificationHandler;

beforeAll(async () => {
  world = await createEvidenceWorld('verirace');
  handler = new VerificationHandler(
    new ArtifactLoader(world.store, { maxArtifactBytes: 1 << 20, maxRunBytes: 1 << 22 }),
    await RunScanners.create({}, null),
    new JsonLogger('verifier', 'error'),
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

/** An executed run with the kernel's facts (seq 11), and the verifier's reaction to them on a log where `race` runs after the first read. */
async function factsRace(label: string, race: (runId: string) => Promise<unknown>, options: { forge?: boolean } = {}): Promise<{ runId: string; ctx: ReactionContext }> {
  const runId = world.runId(label);
  const planned = plannedRun(runId, passingRun());
  await world.appendRun(runId, planned);
  const loaded = new Map<string, LoadedArtifact>([...planned.blobs].map(([sha, bytes]) => [sha, { state: 'ok', bytes }]));
  const facts = runFacts(recordedRunOf(readRunChain(await world.chain(runId))!.receipts), loaded);
  const kernel = await world.append(runId, {
    type: 'kernel.facts',
    actor: 'kernel',
    causation: `${runId}:10`,
    fields: { facts, operations: ['exit_code', 'file_digest', 'junit_summary', 'tap_summary'] },
  });
  if (options.forge === true) await forgeAfter(runId, kernel);
  return { runId, ctx: new ReactionContext(receiptOf(kernel), 'verifier', racingLog(world.log, race), () => undefined) };
}

/** A well-formed receipt published past the evidence log with a hash that does not recompute: the chain breaks there. */
async function forgeAfter(runId: string, head: ReceiptEnvelope): Promise<void> {
  const forged = {
    v: 1,
    seq: head.seq + 1,
    run_id: runId,
    tenant: TENANT,
    type: 'alert.raised',
    actor: 'runtime',
    ts: new Date().toISOString(),
    causation: null,
    severity: 'warning',
    error_code: 'E_INTERNAL',
    message: 'forged',
    prev_hash: head.hash,
    hash: 'f'.repeat(64),
  };
  await jetstream(world.nc).publish(world.log.subjectFor(runId, forged.type), canonicalJson(forged));
}

const warning = (runId: string) =>
  world.append(runId, { type: 'alert.raised', actor: 'runtime', causation: null, key: 'late', fields: { severity: 'warning', error_code: 'E_INTERNAL', message: 'a late note' } });
const cancel = (runId: string) => world.append(runId, { type: 'run.cancelled', actor: 'intake', causation: null, key: 'cancel', fields: { cancelled_by: 'key:k1' } });
async function cancelAndSeal(runId: string): Promise<void> {
  const cancelled = await cancel(runId);
  await world.append(runId, { type: 'run.sealed', actor: 'grader', causation: `${runId}:${cancelled.seq}`, fields: { final_state: 'CANCELLED', evidence_digest: cancelled.hash } });
}

describe('the verifier racing another writer', () => {
  it('given a receipt landing between its read and its append, then it verifies again and appends verification.completed over the new head', async () => {
    const { runId, ctx } = await factsRace('vraceok', warning);
    await handler.handle(ctx);
    const receipts = await world.chain(runId);
    expect(receipts.map((r) => r.type).slice(-3)).toEqual(['kernel.facts', 'alert.raised', 'verification.completed']);
    const alert = receipts.at(-2)!;
    // Judged from the chain it lands on: the head it checked is the receipt before it.
    expect(receipts.at(-1)).toMatchObject({ actor: 'verifier', causation: `${runId}:11`, verdict: 'SUPPORTS', head_hash: alert.hash, receipts_checked: alert.seq, prev_hash: alert.hash });
    expect(verifyChain(receipts)).toMatchObject({ ok: true });
  });

  it('given a cancel landing between its read and its append, then it verifies nothing: nothing after run.cancelled', async () => {
    const { runId, ctx } = await factsRace('vracecancel', cancel);
    await handler.handle(ctx);
    const receipts = await world.chain(runId);
    expect(receipts.map((r) => r.type).slice(-2)).toEqual(['kernel.facts', 'run.cancelled']);
    expect(foldRun(receipts.map(receiptOf))).toMatchObject({ state: 'CANCELLED' });
  });

  it('given a broken chain sealed between its read and its alert, then it appends nothing after run.sealed', async () => {
    const { runId, ctx } = await factsRace('vracesealed', cancelAndSeal, { forge: true });
    await handler.handle(ctx);
    const receipts = await world.chain(runId);
    expect(receipts.map((r) => r.type).slice(-4)).toEqual(['kernel.facts', 'alert.raised', 'run.cancelled', 'run.sealed']);
    expect(verifyChain(receipts)).toMatchObject({ ok: false, firstBadSeq: 12 });
  });

  it('given a broken chain cancelled between its read and its alert, then it raises the alert on the new head and fails nothing', async () => {
    const { runId, ctx } = await factsRace('vracebroken', cancel, { forge: true });
    await handler.handle(ctx);
    const receipts = await world.chain(runId);
    expect(receipts.map((r) => r.type).slice(-3)).toEqual(['alert.raised', 'run.cancelled', 'alert.raised']);
    expect(receipts.at(-1)).toMatchObject({ actor: 'verifier', severity: 'critical', error_code: 'E_CHAIN_BROKEN', prev_hash: receipts.at(-2)!.hash });
  });
});
