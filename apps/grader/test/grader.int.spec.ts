import 'reflect-metadata';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig, tlogNames } from '@cairn/config';
import type { ReceiptEnvelope } from '@cairn/contracts';
import { readRunChain } from '@cairn/lifecycle';
import { ensureSealKeyFile, readPublicKeysFile } from '@cairn/secret-store';
import { recordedRunOf, runFacts, startService } from '@cairn/service-kit';
import type { LoadedArtifact, RunningService } from '@cairn/service-kit';
import { CAPS, createEvidenceWorld, expectSealedChain, passingRun, plannedRun, sleep, timedOutRun } from '@cairn/service-kit/testing';
import type { EvidenceWorld, PlannedEvent, RunScenario } from '@cairn/service-kit/testing';
import { TransparencyLog } from '@cairn/tlog';
import { sealLeafHash, sealOfReceipt, sealStatementText, toBase64, verifySealInclusion, verifySealSignature } from '@cairn/transparency';
import type { NoteVerifier } from '@cairn/transparency';
import { jetstreamManager } from '@nats-io/jetstream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GraderConfigSchema } from '../src/grader.config.js';
import type { GraderConfig } from '../src/grader.config.js';
import { GRADER_SERVICE, graderModule } from '../src/grader.module.js';

const GRACE_MS = 1500;
let world: EvidenceWorld;
let config: GraderConfig;
let grader: RunningService;
let keyDir: string;
let trusted: NoteVerifier[];

/** A run as the kernel and the verifier leave it: executed, its facts, its verification. */
async function verifiedRun(label: string, scenario: RunScenario = passingRun()): Promise<{ runId: string; verification: ReceiptEnvelope }> {
  const runId = world.runId(label);
  const planned = plannedRun(runId, scenario);
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

/** `run.submitted`, then `events`. */
async function endedRun(label: string, events: PlannedEvent[]): Promise<string> {
  const runId = world.runId(label);
  const submitted = plannedRun(runId, passingRun()).events[0]!;
  for (const event of [submitted, ...events]) await world.append(runId, event);
  return runId;
}

const policy = (decision: 'allow' | 'deny' | 'hold', extra: Record<string, unknown> = {}): PlannedEvent => ({
  type: 'policy.decided',
  actor: 'policy',
  causation: null,
  fields: { decision, policy_version: 'c'.repeat(64), reasons: decision === 'allow' ? [] : ['because'], ...extra },
});

async function sealOf(runId: string, ms?: number): Promise<ReceiptEnvelope[]> {
  const receipts = await world.chainWith(runId, 'run.sealed', ms);
  expect(expectSealedChain(receipts)).toEqual({ ok: true, problems: [] });
  return receipts;
}

beforeAll(async () => {
  // A 1 s dedupe window, so a test can show the grader seals once without leaning on it.
  world = await createEvidenceWorld('grader', { duplicateWindowMs: 1000 });
  // The deployment key as `cairn up` makes it: the grader signs every seal with it.
  keyDir = await mkdtemp(join(tmpdir(), 'cairn-grader-seal-'));
  await ensureSealKeyFile(join(keyDir, 'seal.key'), join(keyDir, 'seal-keys.pub'), 'cairn.test/grader');
  trusted = (await readPublicKeysFile(join(keyDir, 'seal-keys.pub'))).map((k) => k.verifier);
  config = loadConfig(GraderConfigSchema, { ...world.env, CAIRN_GRADER_TEARDOWN_GRACE_MS: String(GRACE_MS), CAIRN_SEAL_KEY_FILE: join(keyDir, 'seal.key') });
  grader = await startService(GRADER_SERVICE, graderModule(config));
});

afterAll(async () => {
  await grader?.stop();
  await world?.dispose();
  if (keyDir !== undefined) await rm(keyDir, { recursive: true, force: true });
});

async function expectSignedSeal(seal: ReceiptEnvelope | undefined): Promise<void> {
  const found = sealOfReceipt(seal);
  expect(found.kind).toBe('signed');
  if (found.kind !== 'signed') return;
  expect(found.fields).toMatchObject({ key_name: 'cairn.test/grader', key_id: expect.stringMatching(/^[0-9a-f]{8}$/) as string });
  expect(await verifySealSignature(found.statement, found.fields, trusted)).toMatchObject({ ok: true });
}

describe('the grader service', () => {
  it('grades a verified run by its rubric, then seals it SEALED over the grade', async () => {
    const { runId, verification } = await verifiedRun('gok');
    const receipts = await sealOf(runId);
    const [grade, seal] = receipts.slice(-2);
    expect(grade).toMatchObject({ type: 'grade.recorded', actor: 'grader', causation: `${runId}:${verification.seq}`, score: 7, max_score: 7, upper_bound: 7 });
    expect((grade!.criteria as { id: string; earned: number }[]).map((c) => [c.id, c.earned])).toEqual([
      ['junit-clean', 3],
      ['tap-ok', 2],
      ['test-exit', 1],
      ['says-passed', 1],
    ]);
    expect(seal).toMatchObject({ actor: 'grader', causation: `${runId}:${verification.seq}`, final_state: 'SEALED', evidence_digest: grade!.hash });
    expect(seal).not.toHaveProperty('error_code');
    expect(readRunChain(receipts)?.view).toMatchObject({ state: 'SEALED', score: 7, maxScore: 7, upperBound: 7 });
    await expectSignedSeal(seal);
  });

  it('seals a run that passed its time cap ROLLBACK with E_TIMEOUT, after the runtime’s teardown', async () => {
    const runId = world.runId('gtimeout');
    const planned = plannedRun(runId, timedOutRun());
    await world.appendRun(runId, planned);
    const receipts = await sealOf(runId);
    expect(receipts.map((r) => r.type).slice(-3)).toEqual(['sandbox.destroyed', 'run.failed', 'run.sealed']);
    expect(receipts.at(-1)).toMatchObject({ final_state: 'ROLLBACK', error_code: 'E_TIMEOUT', causation: `${runId}:${receipts.at(-2)!.seq}` });
    await expectSignedSeal(receipts.at(-1));
    expect(receipts.some((r) => r.type === 'grade.recorded')).toBe(false);
  });

  it('seals a run policy denied REJECTED, a cancelled run CANCELLED, and a rejected approval CANCELLED E_NO_APPROVAL', async () => {
    const denied = await endedRun('gdeny', [policy('deny', { error_code: 'E_POLICY_DENIED' })]);
    const cancelled = await endedRun('gcancel', [policy('allow', { caps: CAPS, image: 'cairn/sandbox-busybox:1' }), { type: 'run.cancelled', actor: 'intake', causation: null, fields: { cancelled_by: 'key:k1' } }]);
    const rejected = await endedRun('greject', [
      policy('hold', { caps: CAPS, image: 'cairn/sandbox-debian:1' }),
      { type: 'approval.rejected', actor: 'key:admin', causation: null, fields: { approval_id: 'image', rejected_by: 'key:admin', cause: 'rejected' } },
    ]);
    expect((await sealOf(denied)).at(-1)).toMatchObject({ final_state: 'REJECTED', error_code: 'E_POLICY_DENIED' });
    const cancelSeal = (await sealOf(cancelled)).at(-1);
    expect(cancelSeal).toMatchObject({ final_state: 'CANCELLED' });
    expect(cancelSeal).not.toHaveProperty('error_code');
    expect((await sealOf(rejected)).at(-1)).toMatchObject({ final_state: 'CANCELLED', error_code: 'E_NO_APPROVAL' });
  });

  it('lets the runtime record the teardown of a sandbox a cancel stopped before it seals, and seals without it after the grace', async () => {
    const running = async (label: string) => {
      const runId = world.runId(label);
      await world.appendRun(runId, plannedRun(runId, passingRun()), { upTo: 5 }); // sandbox up, step 0 started
      const cancelled = await world.append(runId, { type: 'run.cancelled', actor: 'intake', causation: null, key: 'cancel', fields: { cancelled_by: 'key:k1' } });
      return { runId, cancelled };
    };
    const torn = await running('gteardown');
    await sleep(400);
    expect((await world.chain(torn.runId)).at(-1)?.type).toBe('run.cancelled');
    await world.append(torn.runId, { type: 'sandbox.destroyed', actor: 'runtime', causation: null, key: 'teardown', fields: { container_name: `cairn-${torn.runId}`, verified_gone: true, reason: 'cancelled' } });
    expect((await sealOf(torn.runId)).map((r) => r.type).slice(-3)).toEqual(['run.cancelled', 'sandbox.destroyed', 'run.sealed']);

    const lost = await running('gnoteardown');
    const receipts = await sealOf(lost.runId, GRACE_MS + 15_000);
    expect(Date.parse(receipts.at(-1)!.ts) - Date.parse(lost.cancelled.ts)).toBeGreaterThanOrEqual(GRACE_MS);
    expect(receipts.at(-1)).toMatchObject({ final_state: 'CANCELLED', evidence_digest: lost.cancelled.hash });
  });

  it('keeps the first grade, and seals each run once, redelivered past the dedupe window', async () => {
    await grader.stop();
    // Graded before this grader got to it (another grader, or one that crashed before sealing).
    const { runId, verification } = await verifiedRun('gfirst');
    const first = await world.append(runId, {
      type: 'grade.recorded',
      actor: 'grader',
      causation: `${runId}:${verification.seq}`,
      key: 'earlier',
      fields: { score: 3, max_score: 7, upper_bound: 7, criteria: [] },
    });
    grader = await startService(GRADER_SERVICE, graderModule(config));
    const receipts = await sealOf(runId);
    expect(receipts.filter((r) => r.type === 'grade.recorded')).toEqual([first]);
    expect(readRunChain(receipts)?.view).toMatchObject({ state: 'SEALED', score: 3, upperBound: 7 });

    // Past the window, a fresh durable delivers every receipt again, the sealed runs' included.
    await grader.stop();
    await sleep(1500);
    await (await jetstreamManager(world.nc)).consumers.delete(world.env.CAIRN_EVIDENCE_STREAM!, 'cairn-grader');
    grader = await startService(GRADER_SERVICE, graderModule(config));
    const last = await verifiedRun('glast');
    await sealOf(last.runId);
    await sleep(500);

    const seals = new Map<string, number>();
    const grades = new Map<string, number>();
    for await (const message of world.log.readAll()) {
      const r = JSON.parse(new TextDecoder().decode(message.data)) as ReceiptEnvelope;
      if (r.type === 'run.sealed') seals.set(r.run_id, (seals.get(r.run_id) ?? 0) + 1);
      if (r.type === 'grade.recorded') grades.set(r.run_id, (grades.get(r.run_id) ?? 0) + 1);
    }
    expect(seals.size).toBe(9);
    expect([...seals.values()].every((n) => n === 1)).toBe(true);
    expect([...grades.values()].every((n) => n === 1)).toBe(true);
    for (const run of seals.keys()) expect(expectSealedChain(await world.chain(run)), run).toEqual({ ok: true, problems: [] });
  });

  it('appends each seal once to the log of seal heads, signs checkpoints that prove them, and heals a seal without its leaf', async () => {
    const names = tlogNames(config);
    const log = await TransparencyLog.open(world.nc, { ...names }, 'reader');
    const sealedNow = async () => {
      const seals = new Map<string, ReceiptEnvelope>();
      for await (const message of world.log.readAll()) {
        const r = JSON.parse(new TextDecoder().decode(message.data)) as ReceiptEnvelope;
        if (r.type === 'run.sealed') seals.set(r.run_id, r);
      }
      return seals;
    };
    const allLogged = async (count: number) => {
      for (let i = 0; i < 100; i++) {
        if ((await log.chainsWithLeaves()).size >= count) return;
        await sleep(100);
      }
    };
    const seals = await sealedNow();
    await allLogged(seals.size);
    // Every seal once, though the last test delivered every seal a second time.
    expect([...(await log.chainsWithLeaves())].sort()).toEqual([...seals.keys()].sort());
    expect((await (await jetstreamManager(world.nc)).streams.info(names.stream)).state.messages).toBe(seals.size);
    for (const [chainId, seal] of seals) {
      const statement = sealOfReceipt(seal);
      if (statement.kind === 'not_sealed') throw new Error('not a seal');
      expect(new TextDecoder().decode((await log.leafOf(chainId))!.data)).toBe(sealStatementText(statement.statement));
    }

    // A checkpoint on demand, signed with the deployment key, proving a seal's leaf.
    const { note, checkpoint } = await log.requestCheckpoint();
    expect(checkpoint).toMatchObject({ origin: 'cairn.test/grader', size: seals.size });
    const [chainId, seal] = [...seals][3]!;
    const leaf = (await log.leafOf(chainId))!;
    const tree = await log.currentTree(checkpoint.size);
    const of = sealOfReceipt(seal);
    if (of.kind === 'not_sealed') throw new Error('not a seal');
    const proof = {
      chainId,
      leafIndex: leaf.index,
      treeSize: checkpoint.size,
      leafHash: toBase64(await sealLeafHash(of.statement)),
      hashes: (await tree.inclusionProof(leaf.index, checkpoint.size)).map(toBase64),
      checkpoint: note,
    };
    expect(await verifySealInclusion(of.statement, proof, trusted)).toMatchObject({ ok: true, leafIndex: leaf.index });

    // Sealed while no grader ran (a crash between the seal and its leaf): the seal's delivery appends it.
    await grader.stop();
    const orphan = await endedRun('gorphan', [policy('deny', { error_code: 'E_POLICY_DENIED' })]);
    grader = await startService(GRADER_SERVICE, graderModule(config));
    await sealOf(orphan);
    await allLogged(seals.size + 1);
    expect((await log.leafOf(orphan))?.index).toBe(seals.size);

    // A log lost (or a deployment from before it): the catch-up at boot appends every seal again.
    await grader.stop();
    const jsm = await jetstreamManager(world.nc);
    await jsm.streams.delete(names.stream);
    await jsm.streams.delete(`KV_${names.checkpointBucket}`);
    grader = await startService(GRADER_SERVICE, graderModule(config));
    await allLogged(seals.size + 1);
    expect((await log.chainsWithLeaves()).size).toBe(seals.size + 1);
    expect((await log.requestCheckpoint()).checkpoint.size).toBe(seals.size + 1);

    // Rewritten under the grader (another first leaf), its last checkpoint kept: it signs no checkpoint over that.
    await grader.stop();
    await jsm.streams.delete(names.stream);
    const forger = await TransparencyLog.open(world.nc, names, 'writer');
    await forger.appendLeaf('run_forged', new TextEncoder().encode('cairn.seal/v1\nchain run_forged\n'));
    forger.close();
    grader = await startService(GRADER_SERVICE, graderModule(config));
    await allLogged(seals.size + 2);
    await expect(log.requestCheckpoint()).rejects.toMatchObject({ code: 'E_CHAIN_BROKEN', message: expect.stringContaining('does not extend its last checkpoint') as string });
    log.close();
  });
});
