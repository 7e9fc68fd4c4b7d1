import { describe, expect, it } from 'vitest';
import type { TapSummary } from './tap-summary.operation.js';
import { sumTap, tapSummary } from './tap-summary.operation.js';

function summary(tap: string | Uint8Array): TapSummary {
  const result = tapSummary(tap);
  if (!result.ok) throw new Error(result.reason);
  return result.summary;
}

describe('tapSummary', () => {
  it('Given a passing TAP 13 stream with a plan, when summarised, then it is ok', () => {
    const tap = 'TAP version 13\n1..3\nok 1 - adds\nok 2 - subtracts\nok 3\n';
    expect(summary(tap)).toEqual({
      planned: 3,
      tests: 3,
      passed: 3,
      failed: 0,
      skipped: 0,
      todo: 0,
      bailed_out: false,
      bail_reason: null,
      ok: true,
    });
  });

  it('Given ok and not ok test points with a trailing plan, when summarised, then failures are counted', () => {
    const tap = 'ok 1 - one\nnot ok 2 - two\n  ---\n  message: "boom"\n  ...\nnot ok 3 - three\n1..3\n';
    expect(summary(tap)).toMatchObject({ planned: 3, tests: 3, passed: 1, failed: 2, ok: false });
  });

  it('Given SKIP and TODO directives, when summarised, then neither is a pass or a failure', () => {
    const tap = [
      '1..6',
      'ok 1 - fine',
      'ok 2 - not here # SKIP no database',
      'not ok 3 - also skipped # skip',
      'not ok 4 - not done yet # TODO write it',
      'ok 5 - unexpectedly passing # todo',
      'ok 6 - description with an escaped \\# SKIP is a pass',
    ].join('\n');
    expect(summary(tap)).toMatchObject({ tests: 6, passed: 2, failed: 0, skipped: 2, todo: 2, ok: true });
  });

  it('Given a bail out, when summarised, then parsing stops and it is not ok', () => {
    const tap = '1..4\nok 1\nnot ok 2\nBail out! database went away\nok 3\nok 4\n';
    expect(summary(tap)).toMatchObject({ tests: 2, passed: 1, failed: 1, bailed_out: true, bail_reason: 'database went away', ok: false });
  });

  it('Given a bail out with a very long reason, when summarised, then the reason is bounded and well formed', () => {
    const reason = summary(`Bail out! ${'x'.repeat(199)}😀 and more`).bail_reason!;
    expect(reason.length).toBeLessThanOrEqual(200);
    expect(reason.isWellFormed()).toBe(true);
  });


  it('Given a bail out whose reason holds NUL, when summarised, then the NUL is shown as U+FFFD (no receipt can carry one)', () => {
    const reason = summary(new TextEncoder().encode('1..2\nBail out! disk\u0000full\n')).bail_reason!;
    expect(reason).toBe('disk\uFFFDfull');
  });
  it('Given no plan, when summarised, then planned is null and it is not ok even if all pass', () => {
    expect(summary('ok 1\nok 2\n')).toMatchObject({ planned: null, tests: 2, passed: 2, ok: false });
  });

  it('Given fewer test points than planned, when summarised, then it is not ok', () => {
    expect(summary('1..5\nok 1\nok 2\n')).toMatchObject({ planned: 5, tests: 2, ok: false });
  });

  it('Given a skip-all plan, when summarised, then an empty run is ok', () => {
    expect(summary('1..0 # SKIP no tests on this platform\n')).toMatchObject({ planned: 0, tests: 0, ok: true });
  });

  it('Given indented subtests, when summarised, then only the top-level points count', () => {
    const tap = [
      'TAP version 14',
      '# Subtest: parser',
      '    ok 1 - inner one',
      '    not ok 2 - inner two # TODO later',
      '    1..2',
      'ok 1 - parser',
      '1..1',
    ].join('\n');
    expect(summary(tap)).toMatchObject({ planned: 1, tests: 1, passed: 1, todo: 0, ok: true });
  });

  it('Given junk, CRLF line ends, a second plan and look-alike words, when summarised, then they are ignored', () => {
    const tap = '1..2\r\nokay this is not a test\r\nnot okay either\r\nok 1\r\n# a comment\r\nok\r\n1..9\r\nrandom noise\r\n';
    expect(summary(tap)).toMatchObject({ planned: 2, tests: 2, passed: 2, ok: true });
  });

  it('Given bytes, when summarised, then they are read as UTF-8', () => {
    expect(summary(new TextEncoder().encode('1..1\nok 1 - café\n'))).toMatchObject({ tests: 1, passed: 1, ok: true });
  });

  it('sums several streams; planned is null unless every stream had a plan', () => {
    const a = summary('1..2\nok 1\nnot ok 2\n');
    const b = summary('1..1\nok 1 # skip\n');
    expect(sumTap([a, b])).toMatchObject({ planned: 3, tests: 3, passed: 1, failed: 1, skipped: 1, ok: false });
    expect(sumTap([b, summary('ok 1\n')]).planned).toBeNull();
    expect(sumTap([b, summary('1..1\nBail out! gone\n')])).toMatchObject({ bailed_out: true, bail_reason: 'gone', ok: false });
    expect(sumTap([]).ok).toBe(false);
  });
});
