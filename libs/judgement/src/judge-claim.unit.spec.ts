import type { ClaimCheck } from '@cairn/contracts';
import { CheckOutcomeSchema, ClaimSchema } from '@cairn/contracts';
import { describe, expect, it } from 'vitest';
import { evaluateCheck } from './evaluate-check.js';
import { judgeClaim } from './judge-claim.js';
import { fixtureContext } from './judgement.fixture.js';

const ctx = fixtureContext();

const installWorked: ClaimCheck = { id: 'install', source: 'steps[0].exit_code', op: 'eq', value: 0 };
const noFailures: ClaimCheck = { id: 'no-failures', source: 'facts.junit.failed', op: 'eq', value: 0 };
const tapPasses: ClaimCheck = { id: 'tap', source: 'facts.tap.passed', op: 'gte', value: 2 };
const coverage: ClaimCheck = { id: 'coverage', source: 'artifacts["/out/summary.json"].json.coverage.lines', op: 'gte', value: 80 };
const reportExists: ClaimCheck = { id: 'report', source: 'artifacts["/out/junit.xml"]', op: 'exists' };
const missingReport: ClaimCheck = { id: 'missing', source: 'artifacts["/out/lcov.info"]', op: 'contains', value: 'SF:' };
const unreadableBench: ClaimCheck = { id: 'bench', source: 'steps[2].stdout', op: 'contains', value: 'ops/s' };

describe('judgeClaim', () => {
  it('Given every check holds, when judged, then the verdict is SUPPORTS', () => {
    const judgement = judgeClaim([installWorked, tapPasses, coverage, reportExists], ctx);
    expect(judgement.verdict).toBe('SUPPORTS');
    expect(judgement.checks.map((c) => [c.id, c.outcome])).toEqual([
      ['install', 'holds'],
      ['tap', 'holds'],
      ['coverage', 'holds'],
      ['report', 'holds'],
    ]);
  });

  it('Given one check is contradicted, when judged, then the verdict is REJECTED', () => {
    const judgement = judgeClaim([installWorked, noFailures], ctx);
    expect(judgement.verdict).toBe('REJECTED');
    expect(judgement.checks[1]).toEqual({
      id: 'no-failures',
      outcome: 'contradicted',
      detail: 'facts.junit.failed eq 0: found 1; not equal',
    });
  });

  it('Given a source that is missing, when judged, then the verdict is INCONCLUSIVE', () => {
    const judgement = judgeClaim([installWorked, missingReport], ctx);
    expect(judgement.verdict).toBe('INCONCLUSIVE');
    expect(judgement.checks[1]).toEqual({
      id: 'missing',
      outcome: 'unresolved',
      detail: 'artifacts["/out/lcov.info"] contains "SF:": source missing: /out/lcov.info was not collected',
    });
  });

  it('Given a value that cannot be read, when judged, then the verdict is INCONCLUSIVE', () => {
    const judgement = judgeClaim([installWorked, unreadableBench], ctx);
    expect(judgement.verdict).toBe('INCONCLUSIVE');
    expect(judgement.checks[1]!.detail).toMatch(/found 4 bytes; unreadable: the bytes are not valid UTF-8/);
  });

  it('Given a contradiction and an unresolved check, when judged, then the contradiction wins: REJECTED', () => {
    expect(judgeClaim([missingReport, noFailures, unreadableBench], ctx).verdict).toBe('REJECTED');
  });

  it('Given a claim without checks, when judged, then it is INCONCLUSIVE (it asserts nothing checkable)', () => {
    expect(judgeClaim([], ctx)).toEqual({ verdict: 'INCONCLUSIVE', checks: [] });
  });

  it('Given a killed step, when its exit code is claimed, then the claim is INCONCLUSIVE, not REJECTED', () => {
    const judgement = judgeClaim([{ id: 'bench-ok', source: 'steps[2].exit_code', op: 'eq', value: 0 }], ctx);
    expect(judgement).toMatchObject({ verdict: 'INCONCLUSIVE', checks: [{ outcome: 'unresolved' }] });
  });

  it('Given exists on something absent, when judged, then it is contradicted; on an invalid source, unresolved', () => {
    const absent = evaluateCheck({ id: 'a', source: 'artifacts["/out/core"]', op: 'exists' }, ctx);
    expect(absent).toMatchObject({ outcome: 'contradicted', detail: expect.stringMatching(/does not exist/) as unknown });
    const killed = evaluateCheck({ id: 'b', source: 'steps[2].exit_code', op: 'exists' }, ctx);
    expect(killed.outcome).toBe('contradicted');
    const invalid = evaluateCheck({ id: 'c', source: 'steps[0].nope', op: 'exists' }, ctx);
    expect(invalid).toMatchObject({ outcome: 'unresolved', detail: expect.stringMatching(/invalid source/) as unknown });
  });

  it('Given long or hostile output, when judged, then each detail is bounded and fits the contract', () => {
    const hostile = fixtureContext({
      steps: [{ index: 0, argv: ['x'], exit_code: 0, stdout: new TextEncoder().encode(`\u0000${'😀'.repeat(5000)}`), stderr: new Uint8Array(), limits_hit: [] }],
      outputs: [],
    });
    const check: ClaimCheck = { id: 'long', source: 'steps[0].stdout', op: 'eq', value: 'x'.repeat(5000) };
    const judgement = judgeClaim([check, { id: 'op', source: 'steps[0].exit_code', op: 'bogus', value: 0 }], hostile);
    for (const outcome of judgement.checks) {
      expect(outcome.detail.length).toBeLessThanOrEqual(1024);
      expect(outcome.detail).not.toContain('\u0000');
      expect(outcome.detail.isWellFormed()).toBe(true);
      expect(CheckOutcomeSchema.parse(outcome)).toEqual(outcome);
    }
    expect(judgement.checks[1]).toMatchObject({ outcome: 'unresolved', detail: expect.stringMatching(/not a registered op/) as unknown });
  });

  it('judges a claim parsed from a RunSpec', () => {
    const claim = ClaimSchema.parse({ statement: 'the suite passes', checks: [installWorked, noFailures] });
    expect(judgeClaim(claim.checks, ctx).verdict).toBe('REJECTED');
  });
});
