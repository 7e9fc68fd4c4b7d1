import { ProofBundleSchema } from '@cairn/contracts';
import type { Receipt } from '@cairn/contracts';
import { verifyChain } from '@cairn/evidence';
import { FixtureChain, retriedRunLifecycleEvents, runLifecycleEvents, sandboxSessionEvents } from '@cairn/persistence/testing';
import { describe, expect, it } from 'vitest';
import { buildProofBundle } from './proof-bundle.builder.js';

const RUN = 'run_bundle1';
const sha = (c: string) => c.repeat(64);

function chainOf(events: ReturnType<typeof runLifecycleEvents>): Receipt[] {
  const chain = new FixtureChain(RUN);
  return events.map((event) => chain.next(event) as Receipt);
}

describe('buildProofBundle', () => {
  it('carries the receipts untouched, so the bundle verifies offline', () => {
    const receipts = chainOf(runLifecycleEvents(RUN, 2, 4));
    const bundle = buildProofBundle(RUN, receipts);
    expect(ProofBundleSchema.parse(bundle)).toEqual(bundle);
    expect(bundle.format).toBe('cairn.bundle/v1');
    expect(bundle.receipts).toEqual(receipts);
    const verification = verifyChain(bundle.receipts, { requireNonEmpty: true, chainId: RUN });
    expect(verification).toMatchObject({ ok: true, count: receipts.length, headHash: bundle.headHash });
  });

  it('given a run retried once (ADR 0035), when bundled, then every receipt of both attempts is in it and the earlier attempt\'s outputs are named as such', () => {
    const receipts = chainOf(retriedRunLifecycleEvents(RUN, 2, 4));
    const bundle = buildProofBundle(RUN, receipts);
    expect(ProofBundleSchema.parse(bundle)).toEqual(bundle);
    expect(bundle.receipts).toEqual(receipts);
    expect(bundle.receipts.filter((r) => r.type === 'step.completed')).toHaveLength(3);
    expect(verifyChain(bundle.receipts, { requireNonEmpty: true, chainId: RUN })).toMatchObject({ ok: true });
    expect(bundle.artifacts).toEqual({
      '/out/report.txt': sha('7'),
      'attempts[1]./out/report.txt': sha('8'),
      'attempts[1].steps[0].stderr': sha('6'),
      'attempts[1].steps[0].stdout': sha('5'),
      'steps[0].stderr': sha('e'),
      'steps[0].stdout': sha('d'),
      'steps[1].stderr': sha('e'),
      'steps[1].stdout': sha('d'),
    });
    expect(bundle.verdict).toBe('SUPPORTS');
  });

  it('lifts verdict, first grade and artifact hashes from the receipts', () => {
    const events = runLifecycleEvents(RUN, 2, 4);
    const executed = events.find((e) => e.type === 'run.executed')!;
    executed.fields = { ...executed.fields, artifact_hashes: { '/out/report.txt': sha('1'), '/out/junit.xml': sha('2') } };
    // A second grade never wins (I-11): inserted before the seal.
    const sealIndex = events.findIndex((e) => e.type === 'run.sealed');
    events.splice(sealIndex, 0, { type: 'grade.recorded', actor: 'grader', fields: { score: 5, max_score: 5, upper_bound: 5, criteria: [] } });
    const bundle = buildProofBundle(RUN, chainOf(events));
    expect(bundle.verdict).toBe('SUPPORTS');
    expect(bundle.grade).toEqual({ score: 4, maxScore: 5, upperBound: 4 });
    expect(bundle.artifacts).toEqual({
      // run.executed's collected files win over a step's report of the same path
      '/out/junit.xml': sha('2'),
      '/out/report.txt': sha('1'),
      'steps[0].stderr': sha('e'),
      'steps[0].stdout': sha('d'),
      'steps[1].stderr': sha('e'),
      'steps[1].stdout': sha('d'),
    });
    expect(Object.keys(bundle.artifacts)).toEqual(Object.keys(bundle.artifacts).sort());
  });

  it('says null where the run has not got that far', () => {
    const bundle = buildProofBundle(RUN, chainOf(runLifecycleEvents(RUN).slice(0, 3)));
    expect(bundle).toMatchObject({ verdict: null, grade: null, artifacts: {} });
    expect(bundle.headHash).toBe(bundle.receipts.at(-1)?.hash);
  });

  it('refuses an empty chain', () => {
    expect(() => buildProofBundle(RUN, [])).toThrow(/no receipts/);
  });

  it("bundles a sandbox session's chain: named by its id, with each exec's output hashes and the last write of each path", () => {
    const SBX = 'sbx_bundle1';
    const chain = new FixtureChain(SBX);
    const receipts = sandboxSessionEvents(SBX, 2).map((event) => chain.next(event) as Receipt);
    const bundle = buildProofBundle(SBX, receipts);
    expect(ProofBundleSchema.parse(bundle)).toEqual(bundle);
    expect(bundle.runId).toBe(SBX);
    expect(Object.keys(bundle.artifacts)).toEqual(['/work/a.txt', 'execs[x0].stderr', 'execs[x0].stdout', 'execs[x1].stderr', 'execs[x1].stdout']);
    expect(bundle.artifacts['/work/a.txt']).toBe(sha('1'));
    expect(verifyChain(bundle.receipts, { requireNonEmpty: true, chainId: SBX })).toMatchObject({ ok: true, headHash: bundle.headHash });
  });
});
