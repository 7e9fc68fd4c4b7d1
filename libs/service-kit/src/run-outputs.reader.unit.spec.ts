import { sha256Hex } from '@cairn/evidence';
import { resolveSource } from '@cairn/judgement';
import { describe, expect, it } from 'vitest';
import { JUNIT_PASS, LocalChain, passingRun, plannedRun, TAP_PASS, withLostAttempt } from './testing/executed-run.fixture.js';
import type { LoadedArtifact } from './run-outputs.reader.js';
import { judgementContextOf, outputRefsOf, recordedRunOf, runFacts } from './run-outputs.reader.js';

const RUN = 'run_outputs1';

function executed() {
  const planned = plannedRun(RUN, passingRun());
  const chain = new LocalChain(RUN).addAll(planned.events);
  return { planned, run: recordedRunOf(chain.receipts) };
}

function allLoaded(blobs: ReadonlyMap<string, Uint8Array>): Map<string, LoadedArtifact> {
  return new Map([...blobs].map(([sha, bytes]) => [sha, { state: 'ok', bytes }]));
}

describe('recordedRunOf and outputRefsOf', () => {
  it('reads the step receipts, the spec’s step names and the collected files, and names each output as a check source', () => {
    const { planned, run } = executed();
    expect(run.steps.map((s) => s.step_index)).toEqual([0, 1]);
    expect([...run.stepNames]).toEqual([
      [0, 'build'],
      [1, 'test'],
    ]);
    expect([...run.files.keys()]).toEqual(['/out/junit.xml', '/out/results.tap']);
    expect(outputRefsOf(run)).toEqual([
      { source: 'steps[0].stdout', sha256: planned.hashes['steps[0].stdout'] },
      { source: 'steps[0].stderr', sha256: planned.hashes['steps[0].stderr'] },
      { source: 'steps[1].stdout', sha256: planned.hashes['steps[1].stdout'] },
      { source: 'steps[1].stderr', sha256: planned.hashes['steps[1].stderr'] },
      { source: 'artifacts["/out/junit.xml"]', sha256: planned.hashes['/out/junit.xml'] },
      { source: 'artifacts["/out/results.tap"]', sha256: planned.hashes['/out/results.tap'] },
    ]);
  });
});

describe('recordedRunOf over a run retried once (ADR 0035)', () => {
  it('reads the current attempt only: the lost attempt\'s step 0 is neither the run\'s nor counted twice', () => {
    const once = plannedRun(RUN, passingRun());
    const planned = withLostAttempt(RUN, once);
    const chain = new LocalChain(RUN).addAll(planned.events);
    expect(chain.receipts.filter((r) => r.type === 'step.completed' && r.step_index === 0)).toHaveLength(2);
    const run = recordedRunOf(chain.receipts);
    expect(run.steps.map((s) => s.step_index)).toEqual([0, 1]);
    expect(run.steps[0]!.stdout_sha256).toBe(planned.hashes['steps[0].stdout']);
    expect(run.steps[0]!.stdout_sha256).not.toBe(planned.hashes['attempts[1].steps[0].stdout']);
    expect(outputRefsOf(run)).toEqual(outputRefsOf(recordedRunOf(new LocalChain(RUN).addAll(once.events).receipts)));
    const facts = runFacts(run, allLoaded(planned.blobs));
    expect(facts.steps).toHaveLength(2);
    expect(facts.unavailable).toEqual([]);
  });
});

describe('runFacts', () => {
  it('summarises steps, files, the JUnit report and the TAP stream from the bytes', () => {
    const { planned, run } = executed();
    const facts = runFacts(run, allLoaded(planned.blobs));
    expect(facts.steps[1]).toEqual({
      index: 1,
      name: 'test',
      exit_code: 0,
      signal: null,
      stdout_sha256: planned.hashes['steps[1].stdout'],
      stdout_bytes: 'ran 3 tests: all tests passed\n'.length,
      stderr_sha256: sha256Hex(''),
      stderr_bytes: 0,
      limits_hit: [],
      error_code: null,
    });
    expect(facts.artifacts).toEqual({
      '/out/junit.xml': { sha256: sha256Hex(JUNIT_PASS), bytes: JUNIT_PASS.length },
      '/out/results.tap': { sha256: sha256Hex(TAP_PASS), bytes: TAP_PASS.length },
    });
    expect(facts.junit).toMatchObject({ tests: 3, passed: 2, failed: 0, skipped: 1, reports: ['/out/junit.xml'] });
    expect(facts.tap).toMatchObject({ planned: 2, tests: 2, passed: 2, failed: 0, ok: true, reports: ['/out/results.tap'] });
    expect(facts.unavailable).toEqual([]);
  });

  it('names what could not be read, and computes nothing from it: no guessed hash, no report', () => {
    const { planned, run } = executed();
    const loaded = allLoaded(planned.blobs);
    const junit = planned.hashes['/out/junit.xml']!;
    const stdout = planned.hashes['steps[1].stdout']!;
    loaded.set(junit, { state: 'corrupt', actual: 'f'.repeat(64) });
    loaded.set(stdout, { state: 'missing' });
    const facts = runFacts(run, loaded);
    expect(facts.unavailable).toEqual([
      { source: 'artifacts["/out/junit.xml"]', sha256: junit, state: 'corrupt' },
      { source: 'steps[1].stdout', sha256: stdout, state: 'missing' },
    ]);
    expect(facts.junit).toBeNull();
    expect(facts.artifacts).not.toHaveProperty('/out/junit.xml');
    expect(facts.steps[1]).toMatchObject({ stdout_sha256: null, stdout_bytes: null, stderr_bytes: 0, exit_code: 0 });
    expect(facts.tap).toMatchObject({ ok: true });
  });

  it('is the same for the same chain and bytes, whatever order the bytes were loaded in', () => {
    const { planned, run } = executed();
    const forward = runFacts(run, allLoaded(planned.blobs));
    const backward = runFacts(run, allLoaded(new Map([...planned.blobs].reverse())));
    expect(JSON.stringify(backward)).toBe(JSON.stringify(forward));
  });
});

describe('judgementContextOf', () => {
  it('offers checks only bytes that were read: a step whose stdout is missing has no output to judge', () => {
    const { planned, run } = executed();
    const loaded = allLoaded(planned.blobs);
    loaded.set(planned.hashes['steps[1].stdout']!, { state: 'missing' });
    const facts = runFacts(run, loaded);
    const ctx = judgementContextOf(run, loaded, facts);
    expect(ctx.steps.map((s) => s.index)).toEqual([0]);
    expect(resolveSource(ctx, 'steps[1].stdout')).toMatchObject({ found: false, kind: 'absent' });
    expect(resolveSource(ctx, 'steps[0].stdout')).toEqual({ found: true, value: new TextEncoder().encode('built 3 targets\n') });
    expect(resolveSource(ctx, 'artifacts["/out/results.tap"].tap.passed')).toEqual({ found: true, value: 2 });
    expect(resolveSource(ctx, 'facts.junit.failed')).toEqual({ found: true, value: 0 });
  });
});
