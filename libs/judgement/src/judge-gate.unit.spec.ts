import { GateOutcomeSchema } from '@cairn/contracts';
import type { FactsInput } from '@cairn/kernel';
import { sha256Hex } from '@cairn/kernel';
import { describe, expect, it } from 'vitest';
import type { GateCheckInput, GateInput } from './judge-gate.js';
import { gateCheckResult, judgeGate } from './judge-gate.js';
import { fixtureContext } from './judgement.fixture.js';

/*
 * A patch run: a test before the patch (step 0), the patch (step 1), the same test after it
 * (step 2), TAP reports from both tests, and the patch's diff collected under /out.
 */

const utf8 = (text: string) => new TextEncoder().encode(text);
const DIFF = '--- a/x\n+++ b/x\n@@ -1 +1 @@\n-1\n+2\n';
const TAP_OK = 'TAP version 13\n1..2\nok 1\nok 2\n';
const TAP_ONE_FAILS = 'TAP version 13\n1..2\nok 1\nnot ok 2\n';

function step(index: number, exit: number | null, stdout = '') {
  return { index, argv: ['sh', '/work/test.sh'], exit_code: exit, stdout: utf8(stdout), stderr: new Uint8Array(), limits_hit: [] };
}

function patchRun(o: { before: number; patch: number | null; after: number; beforeTap?: string; afterTap?: string; diff?: string | null }): FactsInput {
  const outputs = [
    { path: '/out/before.tap', content: utf8(o.beforeTap ?? TAP_OK) },
    { path: '/out/after.tap', content: utf8(o.afterTap ?? TAP_OK) },
  ];
  if (o.diff !== null) outputs.push({ path: '/out/fix.diff', content: utf8(o.diff ?? DIFF) });
  return { steps: [step(0, o.before, 'ok\n'), step(1, o.patch), step(2, o.after, 'ok\n')], outputs };
}

const testsPass: GateCheckInput = { id: 'tests-pass', before: 'steps[0].exit_code', after: 'steps[2].exit_code', op: 'eq', value: 0 };
const tapClean: GateCheckInput = {
  id: 'tap-clean',
  before: 'artifacts["/out/before.tap"].tap.failed',
  after: 'artifacts["/out/after.tap"].tap.failed',
  op: 'eq',
  value: 0,
};
const gate: GateInput = { patchStep: 1, patch: '/out/fix.diff', checks: [testsPass, tapClean] };

function judge(run: FactsInput, g: GateInput = gate) {
  const judgement = judgeGate(g, fixtureContext(run));
  // Whatever it decides fits the receipt's schema.
  expect(GateOutcomeSchema.safeParse(judgement).success).toBe(true);
  return judgement;
}

describe('gateCheckResult', () => {
  it.each([
    ['holds', 'holds', 'held'],
    ['contradicted', 'holds', 'fixed'],
    ['unresolved', 'holds', 'fixed'],
    ['holds', 'contradicted', 'regressed'],
    ['contradicted', 'contradicted', 'failing'],
    ['unresolved', 'contradicted', 'failing'],
    ['holds', 'unresolved', 'unresolved'],
    ['contradicted', 'unresolved', 'unresolved'],
  ] as const)('before %s, after %s → %s', (before, after, result) => {
    expect(gateCheckResult(before, after)).toBe(result);
  });
});

describe('judgeGate', () => {
  it('Given the tests pass before and after a clean patch, then the gate passes and the patch is not rejected', () => {
    const judgement = judge(patchRun({ before: 0, patch: 0, after: 0 }));
    expect(judgement).toMatchObject({
      passed: true,
      patch_step: 1,
      patch_exit_code: 0,
      patch: { path: '/out/fix.diff', sha256: sha256Hex(utf8(DIFF)), rejected: false },
    });
    expect(judgement.checks.map((c) => [c.id, c.before, c.after, c.result])).toEqual([
      ['tests-pass', 'holds', 'holds', 'held'],
      ['tap-clean', 'holds', 'holds', 'held'],
    ]);
    expect(judgement.detail).toBe('all 2 checks hold after the patch (0 fixed by it); the gate passes');
  });

  it('Given a patch that breaks a passing test, then it regressed, the gate fails and the patch is rejected with its hash', () => {
    const judgement = judge(patchRun({ before: 0, patch: 0, after: 1, afterTap: TAP_ONE_FAILS }));
    expect(judgement.passed).toBe(false);
    expect(judgement.patch).toEqual({ path: '/out/fix.diff', sha256: sha256Hex(utf8(DIFF)), rejected: true });
    expect(judgement.checks.map((c) => c.result)).toEqual(['regressed', 'regressed']);
    expect(judgement.checks[0]!.detail).toBe(
      'regressed: before holds (steps[0].exit_code eq 0: found 0; equal); after contradicted (steps[2].exit_code eq 0: found 1; not equal)',
    );
    expect(judgement.detail).toBe('the patch is rejected: 2 of 2 checks do not hold after the patch: tests-pass regressed, tap-clean regressed');
  });

  it('Given a patch that fixes a failing test, then the check is fixed and the gate passes', () => {
    const judgement = judge(patchRun({ before: 1, patch: 0, after: 0, beforeTap: TAP_ONE_FAILS }));
    expect(judgement.passed).toBe(true);
    expect(judgement.checks.map((c) => c.result)).toEqual(['fixed', 'fixed']);
    expect(judgement.detail).toContain('(2 fixed by it)');
  });

  it('Given a test that fails before and after, then it is failing: the gate fails (it must hold after the patch)', () => {
    const judgement = judge(patchRun({ before: 1, patch: 0, after: 1 }), { ...gate, checks: [testsPass] });
    expect(judgement.passed).toBe(false);
    expect(judgement.checks[0]!.result).toBe('failing');
  });

  it('Given an after value that cannot be read, then the check is unresolved and the gate fails closed', () => {
    const notJson: GateCheckInput = { ...tapClean, after: 'artifacts["/out/after.tap"].json.failed' };
    const judgement = judge(patchRun({ before: 0, patch: 0, after: 0 }), { ...gate, checks: [notJson] });
    expect(judgement.checks[0]).toMatchObject({ before: 'holds', after: 'unresolved', result: 'unresolved' });
    expect(judgement.passed).toBe(false);
    expect(judgement.patch.rejected).toBe(true);
  });

  it('Given a patch step that did not exit 0, then the gate fails even though every check holds', () => {
    const judgement = judge(patchRun({ before: 0, patch: 2, after: 0 }));
    expect(judgement.checks.every((c) => c.result === 'held')).toBe(true);
    expect(judgement).toMatchObject({ passed: false, patch_exit_code: 2, patch: { rejected: true } });
    expect(judgement.detail).toBe('the patch is rejected: the patch step (step 1) exited 2');
  });

  it('Given a patch step killed by a signal, then its exit code is null and the gate fails', () => {
    const judgement = judge(patchRun({ before: 0, patch: null, after: 0 }));
    expect(judgement).toMatchObject({ passed: false, patch_exit_code: null });
    expect(judgement.detail).toContain('did not exit on its own');
  });

  it('Given no patch artifact was collected, then the gate fails and names no hash', () => {
    const judgement = judge(patchRun({ before: 0, patch: 0, after: 0, diff: null }));
    expect(judgement).toMatchObject({ passed: false, patch: { path: '/out/fix.diff', sha256: null, rejected: true } });
    expect(judgement.detail).toContain('the patch /out/fix.diff was not collected or did not re-hash');
  });

  it('Given an exists check, then an after artifact that is missing contradicts it', () => {
    const exists: GateCheckInput = { id: 'report', before: 'artifacts["/out/before.tap"]', after: 'artifacts["/out/missing.tap"]', op: 'exists' };
    const judgement = judge(patchRun({ before: 0, patch: 0, after: 0 }), { ...gate, checks: [exists] });
    expect(judgement.checks[0]).toMatchObject({ before: 'holds', after: 'contradicted', result: 'regressed' });
  });

  it('keeps every detail within the receipt bound, whatever the sources hold', () => {
    const long = 'x'.repeat(5000);
    const contains: GateCheckInput = { id: 'says', before: 'steps[0].stdout', after: 'steps[2].stdout', op: 'contains', value: long };
    const judgement = judge(patchRun({ before: 0, patch: 0, after: 0 }), { ...gate, checks: Array.from({ length: 64 }, (_, i) => ({ ...contains, id: `c${i}` })) });
    expect(judgement.detail.length).toBeLessThanOrEqual(1024);
    for (const check of judgement.checks) expect(check.detail.length).toBeLessThanOrEqual(1024);
  });
});
