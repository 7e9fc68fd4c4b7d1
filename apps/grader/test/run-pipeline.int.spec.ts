import 'reflect-metadata';
import { loadConfig } from '@cairn/config';
import type { ReceiptEnvelope } from '@cairn/contracts';
import { readRunChain } from '@cairn/lifecycle';
import { startService } from '@cairn/service-kit';
import type { RunningService } from '@cairn/service-kit';
import { createEvidenceWorld, expectSealedChain, failingRun, JUNIT_PASS, missingSourceRun, passingRun, plannedRun, startProcess, stopAll } from '@cairn/service-kit/testing';
import type { EvidenceWorld, RunScenario, ServiceProcess } from '@cairn/service-kit/testing';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GraderConfigSchema } from '../src/grader.config.js';
import { GRADER_SERVICE, graderModule } from '../src/grader.module.js';

// The kernel and the verifier as real processes, from their builds (`npm run build` first); the
// grader in this process. Apps never import each other: they meet only on the evidence stream.
const MAINS = [fileURLToPath(new URL('../../kernel/dist/main.js', import.meta.url)), fileURLToPath(new URL('../../verifier/dist/main.js', import.meta.url))];

let world: EvidenceWorld;
let grader: RunningService;
const processes: ServiceProcess[] = [];

/** Appends an executed run (optionally rewriting a stored output before `run.executed`) and waits for its seal. */
async function throughThePipeline(label: string, scenario: RunScenario, corrupt?: { path: string; bytes: string }): Promise<{ runId: string; tail: ReceiptEnvelope[]; receipts: ReceiptEnvelope[] }> {
  const runId = world.runId(label);
  const planned = plannedRun(runId, scenario);
  await world.appendRun(runId, planned, { upTo: planned.events.length - 1 });
  if (corrupt !== undefined) await world.corrupt(planned.hashes[corrupt.path]!, new TextEncoder().encode(corrupt.bytes));
  const executed = await world.append(runId, planned.events.at(-1)!);
  const receipts = await world.chainWith(runId, 'run.sealed', 30_000);
  expect(expectSealedChain(receipts)).toEqual({ ok: true, problems: [] });
  return { runId, tail: receipts.slice(executed.seq - 1), receipts };
}

const byId = (items: unknown) => new Map((items as { id: string }[]).map((item) => [item.id, item]));

beforeAll(async () => {
  for (const main of MAINS) if (!existsSync(main)) throw new Error(`${main} is missing: run npm run build first`);
  world = await createEvidenceWorld('pipeline');
  for (const main of MAINS) processes.push(startProcess(main, world.env));
  grader = await startService(GRADER_SERVICE, graderModule(loadConfig(GraderConfigSchema, world.env)));
});

afterAll(async () => {
  await grader?.stop();
  await stopAll(processes);
  await world?.dispose();
});

describe('an executed run through kernel, verifier and grader', () => {
  it('passes: facts with the JUnit and TAP summaries, SUPPORTS, full marks, SEALED, and the chain verifies', async () => {
    const { tail, receipts } = await throughThePipeline('ppass', passingRun());
    expect(tail.map((r) => [r.type, r.actor])).toEqual([
      ['run.executed', 'runtime'],
      ['kernel.facts', 'kernel'],
      ['verification.completed', 'verifier'],
      ['grade.recorded', 'grader'],
      ['run.sealed', 'grader'],
    ]);
    const [executed, facts, verification, grade, seal] = tail;
    expect(facts).toMatchObject({
      causation: `${executed!.run_id}:${executed!.seq}`,
      facts: {
        junit: { tests: 3, passed: 2, failed: 0, skipped: 1, reports: ['/out/junit.xml'] },
        tap: { planned: 2, tests: 2, passed: 2, failed: 0, ok: true, reports: ['/out/results.tap'] },
        unavailable: [],
      },
    });
    expect(verification).toMatchObject({ verdict: 'SUPPORTS', chain_ok: true, head_hash: facts!.hash, receipts_checked: facts!.seq });
    expect((verification!.invariants as { ok: boolean }[]).every((i) => i.ok)).toBe(true);
    expect(grade).toMatchObject({ score: 7, max_score: 7, upper_bound: 7 });
    expect(seal).toMatchObject({ final_state: 'SEALED', evidence_digest: grade!.hash });
    expect(readRunChain(receipts)?.view).toMatchObject({ state: 'SEALED', verdict: 'SUPPORTS', score: 7, maxScore: 7, errorCode: null });
  });

  it('a failing check: REJECTED, a lower score, and still SEALED (a failing step is not a failed run)', async () => {
    const { tail } = await throughThePipeline('pfail', failingRun());
    const [, facts, verification, grade, seal] = tail;
    expect(facts).toMatchObject({ facts: { junit: { failed: 1 }, steps: [{ exit_code: 0 }, { exit_code: 1 }] } });
    expect(verification).toMatchObject({ verdict: 'REJECTED' });
    expect(byId(verification!.checks).get('junit-clean')).toMatchObject({ outcome: 'contradicted' });
    expect(grade).toMatchObject({ score: 2, max_score: 7, upper_bound: 2 });
    expect(seal).toMatchObject({ final_state: 'SEALED' });
  });

  it('a missing source: INCONCLUSIVE, and the grade’s upper bound above its score', async () => {
    const { tail } = await throughThePipeline('pmissing', missingSourceRun());
    const [, , verification, grade, seal] = tail;
    expect(verification).toMatchObject({ verdict: 'INCONCLUSIVE' });
    expect(byId(verification!.checks).get('coverage')).toMatchObject({ outcome: 'unresolved', detail: expect.stringContaining('/out/coverage.json was not collected') as string });
    expect(grade).toMatchObject({ score: 7, max_score: 9, upper_bound: 9 });
    expect(byId(grade!.criteria).get('coverage')).toMatchObject({ earned: 0, scored: false });
    expect(seal).toMatchObject({ final_state: 'SEALED' });
  });

  it('a corrupted artifact: recorded by the kernel, failed by the verifier’s re-hash, never SUPPORTS, graded without it, SEALED', async () => {
    const scenario = passingRun();
    // Bytes of this run's own (the store is content-addressed and shared by the file's runs).
    const junit = JUNIT_PASS.replace('<testsuites>', '<testsuites name="corrupted-run">');
    scenario.files['/out/junit.xml'] = junit;
    const { tail } = await throughThePipeline('pcorrupt', scenario, { path: '/out/junit.xml', bytes: junit.replace('<skipped/>', '') });
    const [, facts, verification, grade, seal] = tail;
    expect(facts).toMatchObject({ facts: { junit: null, unavailable: [{ source: 'artifacts["/out/junit.xml"]', state: 'corrupt' }] } });
    const invariants = byId(verification!.invariants);
    expect(invariants.get('artifacts_rehashed')).toMatchObject({ ok: false, detail: expect.stringContaining('/out/junit.xml is recorded as') as string });
    expect(invariants.get('facts_recomputed')).toMatchObject({ ok: true });
    expect(verification).toMatchObject({ verdict: 'INCONCLUSIVE' });
    expect(byId(verification!.checks).get('junit-clean')).toMatchObject({ outcome: 'unresolved' });
    expect(grade).toMatchObject({ score: 4, max_score: 7, upper_bound: 7 });
    expect(seal).toMatchObject({ final_state: 'SEALED' });
  });
});
