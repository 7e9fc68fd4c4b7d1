import { CheckSourceSchema } from '@cairn/contracts';
import { sha256Hex } from '@cairn/kernel';
import { describe, expect, it } from 'vitest';
import { BINARY, fixtureContext, SUMMARY_JSON } from './judgement.fixture.js';
import { resolveSource } from './resolve-source.js';

const ctx = fixtureContext();
const text = (value: unknown) => new TextDecoder().decode(value as Uint8Array);

describe('resolveSource: what a source names', () => {
  it.each([
    ['steps[0].exit_code', 0],
    ['steps[1].exit_code', 1],
    ['steps[2].exit_code', null],
    ['steps[2].signal', 'SIGKILL'],
    ['steps[2].error_code', 'E_TIMEOUT'],
    ['steps[2].limits_hit', ['wall_time']],
    ['steps[1].stderr_sha256', sha256Hex('FAIL c\n')],
    ['steps[1].stdout_bytes', 37],
    ['steps[1].name', 'test'],
    ['facts.junit.failed', 1],
    ['facts.junit.passed', 2],
    ['facts.junit.reports', ['/out/junit.xml']],
    ['facts.tap.passed', 2],
    ['facts.tap.skipped', 1],
    ['facts.tap.ok', true],
    ['facts.steps[1].index', 1],
    ['facts.artifacts["/out/notes.txt"].bytes', 9],
    ['artifacts["/out/notes.txt"].sha256', sha256Hex('all good\n')],
    ['artifacts["/out/notes.txt"].bytes', 9],
    ['artifacts["/out/summary.json"].json.coverage.lines', 87.5],
    ['artifacts["/out/summary.json"].json.coverage.files[1]', 'b.ts'],
    ['artifacts["/out/summary.json"].json["label"]', 'nightly'],
    ['artifacts["/out/junit.xml"].junit.failed', 1],
    ['artifacts["/out/results.tap"].tap.planned', 3],
  ])('Given %s, when resolved, then it is found', (source, value) => {
    expect(resolveSource(ctx, source)).toEqual({ found: true, value });
  });

  it('Given a step output or an artifact, when resolved, then the stored bytes are returned', () => {
    const stdout = resolveSource(ctx, 'steps[1].stdout');
    expect(stdout.found && text(stdout.value)).toBe('Tests: 2 passed, 1 failed, 1 skipped\n');
    const artifact = resolveSource(ctx, 'artifacts["/out/summary.json"]');
    expect(artifact.found && text(artifact.value)).toBe(SUMMARY_JSON);
    expect(resolveSource(ctx, 'steps[2].stdout')).toEqual({ found: true, value: BINARY });
    expect(resolveSource(ctx, "artifacts['/out/blob.bin']")).toEqual({ found: true, value: BINARY });
  });

  it('Given the facts, when resolved whole, then a null report is found as null', () => {
    const noReports = fixtureContext({ steps: [], outputs: [] });
    expect(resolveSource(noReports, 'facts.junit')).toEqual({ found: true, value: null });
  });
});

describe('resolveSource: what it cannot resolve, it says why', () => {
  it.each([
    ['steps[3].exit_code', 'absent', /step 3 did not run/],
    ['steps[3].stdout', 'absent', /step 3 has no recorded output/],
    ['artifacts["/out/missing.txt"]', 'absent', /was not collected/],
    ['artifacts["/out/missing.txt"].sha256', 'absent', /no artifact/],
    ['artifacts["/out/missing.json"].json.a', 'absent', /was not collected/],
    ['artifacts["/out/summary.json"].json.coverage.branches', 'absent', /has no key "branches"/],
    ['artifacts["/out/summary.json"].json.coverage.files[5]', 'absent', /has no element 5/],
    ['facts.junit.flaky', 'absent', /has no key "flaky"/],
    ['facts.constructor', 'absent', /has no key "constructor"/],
    ['facts.__proto__', 'absent', /has no key "__proto__"/],
    ['artifacts["/out/notes.txt"].json.a', 'unreadable', /not JSON/],
    ['artifacts["/out/blob.bin"].json', 'unreadable', /not valid UTF-8/],
    ['artifacts["/out/notes.txt"].junit.failed', 'unreadable', /no root element/],
    ['steps[0].no_such_field', 'invalid', /has no field no_such_field/],
    ['steps[0]', 'invalid', /expected steps/],
    ['steps[-1].exit_code', 'invalid', /expected steps/],
    ['steps[01].exit_code', 'invalid', /expected steps/],
    ['steps[0].exit_code.more', 'invalid', /field name/],
    ['artifacts[/out/x]', 'invalid', /expected artifacts/],
    ['artifacts["/out/x"', 'invalid', /expected artifacts/],
    ['artifacts["/out/notes.txt"].size', 'invalid', /after artifacts/],
    ['artifacts["/out/notes.txt"].jsonx', 'invalid', /after artifacts/],
    ['artifacts["/out/summary.json"].json..a', 'invalid', /a name must follow/],
    ['artifacts["/out/summary.json"].json.a b', 'invalid', /unexpected ' '/],
    ['facts', 'invalid', /is not steps/],
    ['facts.', 'invalid', /a name must follow/],
    ['facts.junit[*]', 'invalid', /non-negative integer/],
    ['stdout', 'invalid', /is not steps/],
    ['', 'invalid', /is not steps/],
    ['process.env.HOME', 'invalid', /is not steps/],
  ])('Given %s, when resolved, then it is not found (%s)', (source, kind, reason) => {
    const result = resolveSource(ctx, source);
    expect(result).toMatchObject({ found: false, kind });
    if (!result.found) expect(result.reason).toMatch(reason);
  });

  it('Given a source longer than the limit, when resolved, then it is invalid', () => {
    expect(resolveSource(ctx, `facts${'.a'.repeat(1100)}`)).toMatchObject({ found: false, kind: 'invalid' });
  });

  it('Given random junk, when resolved, then it never throws', () => {
    let seed = 42;
    const random = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
    const pieces = ['steps[', 'artifacts[', 'facts', '"', "'", ']', '[', '.', '0', '1', 'json', 'junit', 'tap', 'a', '\\', '/out/x', '$', ' ', '😀', '\u0000'];
    for (let k = 0; k < 5000; k++) {
      const source = Array.from({ length: Math.floor(random() * 8) }, () => pieces[Math.floor(random() * pieces.length)]!).join('');
      expect(() => resolveSource(ctx, source)).not.toThrow();
    }
  });

  it('resolves every source form the RunSpec schema admits', () => {
    for (const source of ['steps[0].exit_code', 'artifacts["/out/notes.txt"]', 'artifacts["/out/notes.txt"].sha256', 'facts.junit.failed']) {
      expect(CheckSourceSchema.safeParse(source).success).toBe(true);
      expect(resolveSource(ctx, source).found).toBe(true);
    }
  });
});
