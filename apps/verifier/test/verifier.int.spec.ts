import 'reflect-metadata';
import { loadConfig } from '@cairn/config';
import type { ReceiptEnvelope } from '@cairn/contracts';
import { canonicalJson, receiptHash, verifyChain } from '@cairn/evidence';
import { readRunChain } from '@cairn/lifecycle';
import { recordedRunOf, runFacts, startService } from '@cairn/service-kit';
import type { LoadedArtifact, RunningService } from '@cairn/service-kit';
import { createEvidenceWorld, failingRun, passingRun, plannedRun, sleep, StderrCapture, TENANT } from '@cairn/service-kit/testing';
import type { EvidenceWorld, PlannedRun, RunScenario } from '@cairn/service-kit/testing';
import { jetstream } from '@nats-io/jetstream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { VerifierConfigSchema } from '../src/verifier.config.js';
import { VERIFIER_SERVICE, verifierModule } from '../src/verifier.module.js';

let world: EvidenceWorld;
let verifier: RunningService;
const stderr = new StderrCapture();

/** A run executed, and its kernel facts as the kernel computes them from the intact bytes. */
async function executed(label: string, scenario: RunScenario): Promise<{ runId: string; planned: PlannedRun; facts: Record<string, unknown> }> {
  const runId = world.runId(label);
  const planned = plannedRun(runId, scenario);
  await world.appendRun(runId, planned);
  const parsed = readRunChain(await world.chain(runId));
  const loaded = new Map<string, LoadedArtifact>([...planned.blobs].map(([sha, bytes]) => [sha, { state: 'ok', bytes }]));
  return { runId, planned, facts: runFacts(recordedRunOf(parsed!.receipts), loaded) };
}

async function appendFacts(runId: string, facts: Record<string, unknown>): Promise<ReceiptEnvelope> {
  return world.append(runId, { type: 'kernel.facts', actor: 'kernel', causation: `${runId}:10`, fields: { facts, operations: ['exit_code', 'file_digest', 'junit_summary', 'tap_summary'] } });
}

/** Publishes a receipt straight to the chain's subject for its type, past the evidence log: a forgery. */
async function forge(runId: string, body: Record<string, unknown>, link: (prev: string, body: Record<string, unknown>) => { prev_hash: string; hash: string }): Promise<void> {
  const head = (await world.chain(runId)).at(-1)!;
  const full = { v: 1, seq: head.seq + 1, run_id: runId, tenant: TENANT, actor: 'kernel', ts: new Date().toISOString(), causation: `${runId}:${head.seq}`, ...body };
  const receipt = { ...full, ...link(head.hash, full) };
  await jetstream(world.nc).publish(world.log.subjectFor(runId, String(body.type)), canonicalJson(receipt));
}

const forgedFacts = { type: 'kernel.facts', facts: { junit: { failed: 0 } }, operations: [] };

beforeAll(async () => {
  world = await createEvidenceWorld('verifier');
  stderr.start();
  verifier = await startService(VERIFIER_SERVICE, verifierModule(loadConfig(VerifierConfigSchema, world.env)));
});

afterAll(async () => {
  await verifier?.stop();
  stderr.stop();
  await world?.dispose();
});

describe('the verifier service', () => {
  it('supports the claim of an intact run: chain from genesis, every invariant, the claim’s checks', async () => {
    const { runId, facts } = await executed('vok', passingRun());
    const factsReceipt = await appendFacts(runId, facts);
    const receipts = await world.chainWith(runId, 'verification.completed');
    const verification = receipts.at(-1)!;
    expect(verification).toMatchObject({
      actor: 'verifier',
      causation: `${runId}:${factsReceipt.seq}`,
      verdict: 'SUPPORTS',
      chain_ok: true,
      head_hash: factsReceipt.hash,
      receipts_checked: factsReceipt.seq,
    });
    expect(verification.invariants).toEqual([
      { id: 'chain', ok: true, detail: `11 receipts recomputed from genesis; head ${factsReceipt.hash}` },
      { id: 'every_started_step_completed', ok: true, detail: '2 steps started and completed' },
      { id: 'every_step_has_receipt', ok: true, detail: 'all 2 steps have a receipt' },
      { id: 'caps_honoured', ok: true, detail: '1 sandbox(es) within their caps' },
      { id: 'teardown', ok: true, detail: '1 sandbox(es) destroyed and verified gone' },
      { id: 'artifacts_rehashed', ok: true, detail: '2 artifact hash(es) recomputed and equal' },
      { id: 'step_output_rehashed', ok: true, detail: '4 step outputs recomputed and equal' },
      { id: 'facts_recomputed', ok: true, detail: 'the kernel facts equal the facts recomputed from the stored bytes' },
    ]);
    expect((verification.checks as { id: string; outcome: string }[]).map((c) => [c.id, c.outcome])).toEqual([
      ['junit-clean', 'holds'],
      ['tap-clean', 'holds'],
      ['build-ok', 'holds'],
    ]);
  });

  it('rejects the claim of a run whose tests failed, with every invariant holding', async () => {
    const { runId, facts } = await executed('vfail', failingRun());
    await appendFacts(runId, facts);
    const verification = (await world.chainWith(runId, 'verification.completed')).at(-1)!;
    expect(verification.verdict).toBe('REJECTED');
    expect((verification.invariants as { ok: boolean }[]).every((i) => i.ok)).toBe(true);
  });

  it('re-hashes the bytes itself: an artifact rewritten after the kernel read it fails the artifact check and the claim is not supported', async () => {
    const scenario = passingRun();
    scenario.files['/out/results.tap'] = `TAP version 13\n1..1\nok 1 - only here\n`; // bytes of this test's own
    const { runId, planned, facts } = await executed('vcorrupt', scenario);
    await world.corrupt(planned.hashes['/out/results.tap']!, new TextEncoder().encode('TAP version 13\n1..1\nnot ok 1 - rewritten\n'));
    await appendFacts(runId, facts);
    const verification = (await world.chainWith(runId, 'verification.completed')).at(-1)!;
    const invariants = new Map((verification.invariants as { id: string; ok: boolean; detail: string }[]).map((i) => [i.id, i]));
    expect(invariants.get('artifacts_rehashed')).toMatchObject({ ok: false, detail: expect.stringContaining('/out/results.tap is recorded as') as string });
    expect(invariants.get('facts_recomputed')).toMatchObject({ ok: false, detail: expect.stringContaining('tap') as string });
    expect(invariants.get('chain')?.ok).toBe(true);
    expect(verification.verdict).toBe('INCONCLUSIVE');
    expect(verification.checks).toContainEqual(expect.objectContaining({ id: 'tap-clean', outcome: 'unresolved' }) as unknown);
  });

  it('on a receipt whose hash does not recompute: a fatal log line, alert.raised and run.failed E_CHAIN_BROKEN, every receipt kept', async () => {
    const { runId } = await executed('vforged', passingRun());
    await forge(runId, forgedFacts, (prev) => ({ prev_hash: prev, hash: 'f'.repeat(64) }));
    const receipts = await world.chainWith(runId, 'run.failed');
    expect(receipts.map((r) => r.type).slice(-3)).toEqual(['kernel.facts', 'alert.raised', 'run.failed']);
    expect(receipts.at(-2)).toMatchObject({ actor: 'verifier', severity: 'critical', error_code: 'E_CHAIN_BROKEN', causation: `${runId}:11` });
    expect(receipts.at(-1)).toMatchObject({ actor: 'verifier', error_code: 'E_CHAIN_BROKEN', message: expect.stringContaining('seq 11 hash_mismatch') as string });
    expect(receipts.some((r) => r.type === 'verification.completed')).toBe(false);
    expect(verifyChain(receipts)).toMatchObject({ ok: false, firstBadSeq: 11, reason: 'hash_mismatch', verified: 10 });
    expect(readRunChain(receipts)?.view).toMatchObject({ state: 'FAILED', errorCode: 'E_CHAIN_BROKEN' });
    expect(stderr.lines).toContainEqual(expect.objectContaining({ level: 'fatal', service: 'verifier', msg: 'evidence chain broken', run_id: runId, first_bad_seq: 11 }) as unknown);
  });

  it('on a broken link the run has already failed by its fold: the alert only, no second ending', async () => {
    const { runId } = await executed('vlink', passingRun());
    await forge(runId, forgedFacts, (_prev, body) => ({ prev_hash: 'a'.repeat(64), hash: receiptHash('a'.repeat(64), body) }));
    const receipts = await world.chainWith(runId, 'alert.raised');
    await sleep(500);
    const after = await world.chain(runId);
    expect(after.map((r) => r.type).slice(-2)).toEqual(['kernel.facts', 'alert.raised']);
    expect(receipts.at(-1)).toMatchObject({ error_code: 'E_CHAIN_BROKEN', message: expect.stringContaining('prev_hash_mismatch') as string });
    expect(readRunChain(after)?.view).toMatchObject({ state: 'FAILED', errorCode: 'E_CHAIN_BROKEN' });
  });

  it('appends nothing after run.sealed, even when a forged receipt follows the seal', async () => {
    const { runId } = await executed('vsealed', passingRun());
    const failed = await world.append(runId, { type: 'run.cancelled', actor: 'intake', causation: null, key: 'cancel', fields: { cancelled_by: 'key:k1' } });
    await world.append(runId, { type: 'run.sealed', actor: 'grader', causation: `${runId}:${failed.seq}`, fields: { final_state: 'CANCELLED', evidence_digest: failed.hash } });
    await forge(runId, forgedFacts, (prev) => ({ prev_hash: prev, hash: 'e'.repeat(64) }));
    await until(() => stderr.lines.some((l) => l.level === 'fatal' && l.run_id === runId));
    await sleep(300);
    expect((await world.chain(runId)).map((r) => r.type).slice(-3)).toEqual(['run.cancelled', 'run.sealed', 'kernel.facts']);
    expect(stderr.lines).toContainEqual(expect.objectContaining({ level: 'fatal', run_id: runId, recorded: 'nothing: the run is sealed' }) as unknown);
  });
});

async function until(check: () => boolean, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await sleep(50);
  }
}
