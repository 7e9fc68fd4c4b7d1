import { verifyChain } from '@cairn/evidence';
import type { RunView } from '@cairn/lifecycle';
import { outputRefsOf, recordedRunOf, runFacts } from '@cairn/service-kit';
import type { LoadedArtifact } from '@cairn/service-kit';
import { failingRun, LocalChain, missingSourceRun, passingRun, plannedRun, withLostAttempt } from '@cairn/service-kit/testing';
import type { RunScenario } from '@cairn/service-kit/testing';
import { describe, expect, it } from 'vitest';
import { chainBreakResponse, factsInvariant, overallVerdict, verifyRun } from './run-verification.js';

function loadedFrom(blobs: ReadonlyMap<string, Uint8Array>): Map<string, LoadedArtifact> {
  return new Map([...blobs].map(([sha, bytes]) => [sha, { state: 'ok', bytes }]));
}

/** A run as the kernel leaves it: executed, and its facts recorded from `kernelLoaded`. */
function factsRecorded(scenario: RunScenario, damage: (loaded: Map<string, LoadedArtifact>, hashes: Record<string, string>) => void = () => {}) {
  const runId = 'run_verify1';
  const planned = plannedRun(runId, scenario);
  const chain = new LocalChain(runId).addAll(planned.events);
  const facts = runFacts(recordedRunOf(chain.receipts), loadedFrom(planned.blobs));
  chain.add({ type: 'kernel.facts', actor: 'kernel', causation: `${runId}:${chain.receipts.length}`, fields: { facts, operations: ['exit_code', 'file_digest'] } });
  const integrity = verifyChain(chain.receipts);
  if (!integrity.ok) throw new Error(integrity.message);
  // What the verifier reads back from the store now.
  const loaded = loadedFrom(planned.blobs);
  damage(loaded, planned.hashes);
  return { receipts: chain.receipts, integrity, loaded };
}

function verified(scenario: RunScenario, damage?: Parameters<typeof factsRecorded>[1]) {
  const { receipts, integrity, loaded } = factsRecorded(scenario, damage);
  return verifyRun(integrity, receipts, loaded);
}

const invariant = (fields: ReturnType<typeof verifyRun>, id: string) => fields.invariants.find((i) => i.id === id);

describe('verifyRun', () => {
  it('given a run retried once (ADR 0035), when verified, then its second attempt supports the claim and its lost attempt is checked on its own', () => {
    const runId = 'run_verify2';
    const planned = withLostAttempt(runId, plannedRun(runId, passingRun()));
    const chain = new LocalChain(runId).addAll(planned.events);
    const facts = runFacts(recordedRunOf(chain.receipts), loadedFrom(planned.blobs));
    chain.add({ type: 'kernel.facts', actor: 'kernel', causation: `${runId}:${chain.receipts.length}`, fields: { facts, operations: ['exit_code', 'file_digest'] } });
    const integrity = verifyChain(chain.receipts);
    if (!integrity.ok) throw new Error(integrity.message);
    const fields = verifyRun(integrity, chain.receipts, loadedFrom(planned.blobs));
    expect(fields.verdict).toBe('SUPPORTS');
    expect(fields.invariants.map((i) => [i.id, i.ok])).toEqual([
      ['chain', true],
      ['every_started_step_completed', true],
      ['every_step_has_receipt', true],
      ['caps_honoured', true],
      ['teardown', true],
      ['artifacts_rehashed', true],
      ['earlier_attempts', true],
      ['step_output_rehashed', true],
      ['facts_recomputed', true],
    ]);
    expect(invariant(fields, 'teardown')?.detail).toBe('1 sandbox(es) destroyed and verified gone');
    expect(invariant(fields, 'earlier_attempts')?.detail).toContain('1 owed to the reaper');
    // The same facts and checks as the run would have had with no retry.
    const once = verified(passingRun());
    expect(fields.checks).toEqual(once.checks);
  });

  it('supports the claim of a run whose chain, receipts, bytes and facts all hold together', () => {
    const fields = verified(passingRun());
    expect(fields.verdict).toBe('SUPPORTS');
    expect(fields.chain_ok).toBe(true);
    expect(fields.receipts_checked).toBe(11);
    expect(fields.invariants.map((i) => [i.id, i.ok])).toEqual([
      ['chain', true],
      ['every_started_step_completed', true],
      ['every_step_has_receipt', true],
      ['caps_honoured', true],
      ['teardown', true],
      ['artifacts_rehashed', true],
      ['step_output_rehashed', true],
      ['facts_recomputed', true],
    ]);
    expect(fields.checks.map((c) => [c.id, c.outcome])).toEqual([
      ['junit-clean', 'holds'],
      ['tap-clean', 'holds'],
      ['build-ok', 'holds'],
    ]);
  });

  it('rejects the claim when a check is contradicted (a failing test is a verdict, not an invariant)', () => {
    const fields = verified(failingRun());
    expect(fields.verdict).toBe('REJECTED');
    expect(fields.invariants.every((i) => i.ok)).toBe(true);
    expect(fields.checks.find((c) => c.id === 'junit-clean')).toMatchObject({ outcome: 'contradicted' });
  });

  it('is inconclusive when a claim’s source is missing', () => {
    const fields = verified(missingSourceRun());
    expect(fields.verdict).toBe('INCONCLUSIVE');
    expect(fields.checks.find((c) => c.id === 'coverage')).toMatchObject({ outcome: 'unresolved' });
  });

  it('never supports a claim once an artifact’s bytes no longer match their record', () => {
    const fields = verified(passingRun(), (loaded, hashes) => loaded.set(hashes['/out/results.tap']!, { state: 'corrupt', actual: 'e'.repeat(64) }));
    expect(invariant(fields, 'artifacts_rehashed')).toMatchObject({ ok: false, detail: expect.stringContaining(`bytes hash to ${'e'.repeat(64)}`) as string });
    // The kernel read good bytes; the facts recomputed now differ.
    expect(invariant(fields, 'facts_recomputed')).toMatchObject({ ok: false, detail: expect.stringContaining('artifacts') as string });
    expect(fields.checks.find((c) => c.id === 'tap-clean')).toMatchObject({ outcome: 'unresolved' });
    expect(fields.verdict).toBe('INCONCLUSIVE');
  });

  it('fails step_output_rehashed when a step’s stdout is gone from the store', () => {
    const fields = verified(passingRun(), (loaded, hashes) => loaded.set(hashes['steps[0].stdout']!, { state: 'missing' }));
    expect(invariant(fields, 'step_output_rehashed')).toMatchObject({ ok: false, detail: expect.stringContaining('steps[0].stdout') as string });
    expect(invariant(fields, 'artifacts_rehashed')).toMatchObject({ ok: true });
    expect(fields.verdict).toBe('INCONCLUSIVE');
  });
});

describe('factsInvariant', () => {
  it('names the facts that differ, and fails without kernel facts', () => {
    const planned = plannedRun('run_facts1', passingRun());
    const run = recordedRunOf(new LocalChain('run_facts1').addAll(planned.events).receipts);
    const facts = runFacts(run, loadedFrom(planned.blobs));
    expect(factsInvariant(JSON.parse(JSON.stringify(facts)) as Record<string, unknown>, facts).ok).toBe(true);
    expect(factsInvariant({ ...facts, junit: null }, facts)).toMatchObject({ ok: false, detail: expect.stringContaining('junit') as string });
    const { tap: _tap, ...withoutTap } = facts;
    expect(factsInvariant(withoutTap, facts)).toMatchObject({ ok: false, detail: expect.stringContaining('tap') as string });
    expect(factsInvariant(null, facts).ok).toBe(false);
    expect(outputRefsOf(run)).toHaveLength(6);
  });
});

describe('overallVerdict', () => {
  const ok = { id: 'a', ok: true, detail: '' };
  const bad = { id: 'b', ok: false, detail: '' };
  it('keeps the claim’s verdict when every invariant holds, and never lets a failed one support a claim', () => {
    expect(overallVerdict('SUPPORTS', [ok])).toBe('SUPPORTS');
    expect(overallVerdict('SUPPORTS', [ok, bad])).toBe('INCONCLUSIVE');
    expect(overallVerdict('REJECTED', [bad])).toBe('REJECTED');
    expect(overallVerdict('INCONCLUSIVE', [bad])).toBe('INCONCLUSIVE');
  });
});

describe('chainBreakResponse', () => {
  const view = (state: RunView['state'], sealed = false) => ({ state, sealed }) as RunView;
  it('fails a live run, only alerts on one that has ended, and appends nothing to a sealed one', () => {
    expect(chainBreakResponse(view('EXECUTED'))).toEqual({ alert: true, fail: true });
    expect(chainBreakResponse(view('VERIFIED'))).toEqual({ alert: true, fail: true });
    expect(chainBreakResponse(view('FAILED'))).toEqual({ alert: true, fail: false });
    expect(chainBreakResponse(view('CANCELLED'))).toEqual({ alert: true, fail: false });
    expect(chainBreakResponse(view('SEALED', true))).toEqual({ alert: false, fail: false });
    expect(chainBreakResponse(view('FAILED', true))).toEqual({ alert: false, fail: false });
    expect(chainBreakResponse(null)).toEqual({ alert: false, fail: false });
  });
});
