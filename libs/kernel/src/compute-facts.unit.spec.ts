import { canonicalJson } from '@cairn/evidence';
import { describe, expect, it } from 'vitest';
import { computeFacts, FACTS_OPERATIONS } from './compute-facts.js';
import { sha256Hex } from './digest.operation.js';
import type { FactsInput, RecordedStep } from './facts.types.js';
import { isKernelOperation, KERNEL_OPERATION_IDS, KERNEL_OPERATIONS } from './kernel-operations.registry.js';
import { decodeUtf8, textContains } from './text.operation.js';

const utf8 = (text: string) => new TextEncoder().encode(text);

function step(index: number, fields: Partial<RecordedStep> = {}): RecordedStep {
  return {
    index,
    name: `step-${index}`,
    argv: ['sh', '-c', 'true'],
    exit_code: 0,
    stdout: utf8(`out ${index}\n`),
    stderr: new Uint8Array(),
    limits_hit: [],
    error_code: null,
    ...fields,
  };
}

const JUNIT = '<testsuite tests="3"><testcase name="a"/><testcase name="b"><failure/></testcase><testcase name="c"><skipped/></testcase></testsuite>';
const MORE_JUNIT = '<testsuites><testsuite><testcase name="d"/></testsuite></testsuites>';
const TAP = '1..2\nok 1\nnot ok 2 # TODO later\n';

const INPUT: FactsInput = {
  steps: [
    step(1, { name: 'test', exit_code: 1, stderr: utf8('1 failed\n') }),
    step(0, { name: undefined, argv: ['npm', 'ci'] }),
    step(2, { exit_code: null, signal: 'SIGKILL', limits_hit: ['wall_time'], error_code: 'E_TIMEOUT' }),
  ],
  outputs: [
    { path: '/out/report.xml', content: utf8(JUNIT) },
    { path: '/out/more/REPORT.XML', content: utf8(MORE_JUNIT) },
    { path: '/out/pom.xml', content: utf8('<project><testsuite/></project>') },
    { path: '/out/run.tap', content: utf8(TAP) },
    { path: '/out/data.bin', content: new Uint8Array([0, 1, 2, 255]) },
  ],
};

describe('computeFacts', () => {
  it('Given a recorded run, when facts are computed, then steps, artifacts and test summaries are exact', () => {
    const facts = computeFacts(INPUT);
    expect(facts.steps).toEqual([
      {
        index: 0,
        name: null,
        exit_code: 0,
        signal: null,
        stdout_sha256: sha256Hex('out 0\n'),
        stdout_bytes: 6,
        stderr_sha256: sha256Hex(''),
        stderr_bytes: 0,
        limits_hit: [],
        error_code: null,
      },
      expect.objectContaining({ index: 1, name: 'test', exit_code: 1, stderr_sha256: sha256Hex('1 failed\n'), stderr_bytes: 9 }),
      expect.objectContaining({ index: 2, exit_code: null, signal: 'SIGKILL', limits_hit: ['wall_time'], error_code: 'E_TIMEOUT' }),
    ]);
    expect(facts.artifacts).toEqual({
      '/out/data.bin': { sha256: sha256Hex(new Uint8Array([0, 1, 2, 255])), bytes: 4 },
      '/out/more/REPORT.XML': { sha256: sha256Hex(MORE_JUNIT), bytes: MORE_JUNIT.length },
      '/out/pom.xml': { sha256: sha256Hex('<project><testsuite/></project>'), bytes: 31 },
      '/out/report.xml': { sha256: sha256Hex(JUNIT), bytes: JUNIT.length },
      '/out/run.tap': { sha256: sha256Hex(TAP), bytes: TAP.length },
    });
    // pom.xml is XML but not a JUnit report; REPORT.XML counts (extensions match in any case).
    expect(facts.junit).toEqual({
      tests: 4,
      passed: 2,
      failed: 1,
      failures: 1,
      errors: 0,
      skipped: 1,
      suites: 2,
      well_formed: true,
      reports: ['/out/more/REPORT.XML', '/out/report.xml'],
    });
    expect(facts.tap).toEqual({
      planned: 2,
      tests: 2,
      passed: 1,
      failed: 0,
      skipped: 0,
      todo: 1,
      bailed_out: false,
      bail_reason: null,
      ok: true,
      reports: ['/out/run.tap'],
    });
  });

  it('Given any run, when facts are computed, then they are canonical JSON with lower-case token keys', () => {
    const facts = computeFacts(INPUT);
    const text = canonicalJson(facts);
    expect(JSON.parse(text)).toEqual(facts);
    const keys = [...text.matchAll(/"([^"]+)":/g)].map((m) => m[1]!).filter((key) => !key.startsWith('/'));
    for (const key of keys) expect(key).toMatch(/^[a-z][a-z0-9_]*$/);
  });

  it('Given the same run in another order, when facts are computed, then they are identical', () => {
    const shuffled: FactsInput = { steps: [...INPUT.steps].reverse(), outputs: [...INPUT.outputs].reverse() };
    expect(canonicalJson(computeFacts(shuffled))).toBe(canonicalJson(computeFacts(INPUT)));
  });

  it('Given no reports, when facts are computed, then junit and tap are null', () => {
    const facts = computeFacts({ steps: [step(0)], outputs: [{ path: '/out/a.txt', content: utf8('hello') }] });
    expect(facts).toMatchObject({ junit: null, tap: null });
  });

  it('Given a path collected twice, when facts are computed, then the first content wins', () => {
    const facts = computeFacts({
      steps: [],
      outputs: [
        { path: '/out/a', content: utf8('first') },
        { path: '/out/a', content: utf8('second') },
      ],
    });
    expect(facts.artifacts['/out/a']).toEqual({ sha256: sha256Hex('first'), bytes: 5 });
  });

  it('Given an output named __proto__, when facts are computed, then it is an own key and no prototype changes', () => {
    const facts = computeFacts({ steps: [], outputs: [{ path: '__proto__', content: utf8('x') }] });
    expect(Object.hasOwn(facts.artifacts, '__proto__')).toBe(true);
    expect(Object.getPrototypeOf(facts.artifacts)).toBe(Object.prototype);
  });

  it('Given a non-integer exit code, when facts are computed, then it is recorded as null', () => {
    expect(computeFacts({ steps: [step(0, { exit_code: 1.5 })], outputs: [] }).steps[0]!.exit_code).toBeNull();
  });
});

describe('the operation registry', () => {
  it('lists exactly the registered operations, frozen', () => {
    expect(KERNEL_OPERATION_IDS).toEqual([
      'exit_code',
      'sha256',
      'file_digest',
      'text_contains',
      'regex_match',
      'json_path',
      'junit_summary',
      'tap_summary',
      'line_diff',
    ]);
    expect(Object.isFrozen(KERNEL_OPERATIONS)).toBe(true);
    expect(FACTS_OPERATIONS.every(isKernelOperation)).toBe(true);
    expect(isKernelOperation('eval')).toBe(false);
    expect(isKernelOperation('toString')).toBe(false);
  });

  it('operations are plain functions of data', () => {
    expect(KERNEL_OPERATIONS.sha256('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    expect(KERNEL_OPERATIONS.text_contains('all 12 passed', '12 passed')).toEqual({ ok: true, contains: true });
    expect(KERNEL_OPERATIONS.regex_match('all 12 passed', '^all \\d+ passed$')).toEqual({ ok: true, matched: true });
    expect(KERNEL_OPERATIONS.json_path('{"a":{"b":[1]}}', '$.a.b[0]')).toEqual({ found: true, value: 1 });
    expect(KERNEL_OPERATIONS.line_diff('a\n', 'b\n')).toMatchObject({ ok: true, diff: { added: 1, removed: 1 } });
  });
});

describe('text operations', () => {
  it('decode exact UTF-8, keep a BOM, and refuse invalid bytes or too many', () => {
    expect(decodeUtf8(utf8('héllo'))).toEqual({ ok: true, text: 'héllo' });
    expect(decodeUtf8(new Uint8Array([0xef, 0xbb, 0xbf, 0x61]))).toEqual({ ok: true, text: '\ufeffa' });
    expect(decodeUtf8(new Uint8Array([0xc3]))).toEqual({ ok: false, reason: 'not valid UTF-8' });
    expect(decodeUtf8(utf8('abcd'), 3)).toMatchObject({ ok: false, reason: expect.stringMatching(/limit/) as unknown });
  });

  it('contains is exact and case-sensitive', () => {
    expect(textContains('Hello', 'hello')).toEqual({ ok: true, contains: false });
    expect(textContains('Hello', '')).toEqual({ ok: true, contains: true });
  });
});
