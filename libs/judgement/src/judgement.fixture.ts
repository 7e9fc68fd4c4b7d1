import type { FactsInput } from '@cairn/kernel';
import { computeFacts } from '@cairn/kernel';
import type { JudgementContext } from './judgement-context.js';

/*
 * Test fixture: a small recorded run (three steps, a JUnit report, a TAP stream, a JSON summary)
 * and the judgement context built from it the way the verifier and grader build theirs.
 */

const utf8 = (text: string) => new TextEncoder().encode(text);

export const JUNIT_XML =
  '<testsuite tests="4"><testcase name="a"/><testcase name="b"/><testcase name="c"><failure/></testcase><testcase name="d"><skipped/></testcase></testsuite>';
export const TAP_TEXT = '1..3\nok 1\nok 2\nok 3 # SKIP slow\n';
export const SUMMARY_JSON = '{"coverage": {"lines": 87.5, "files": ["a.ts", "b.ts"]}, "ok": true, "label": "nightly"}';
export const BINARY = new Uint8Array([0xff, 0xfe, 0x00, 0x01]);

export const RECORDED: FactsInput = {
  steps: [
    {
      index: 0,
      name: 'install',
      argv: ['npm', 'ci'],
      exit_code: 0,
      stdout: utf8('added 120 packages\n'),
      stderr: new Uint8Array(),
      limits_hit: [],
    },
    {
      index: 1,
      name: 'test',
      argv: ['npm', 'test'],
      exit_code: 1,
      stdout: utf8('Tests: 2 passed, 1 failed, 1 skipped\n'),
      stderr: utf8('FAIL c\n'),
      limits_hit: [],
    },
    {
      index: 2,
      name: 'bench',
      argv: ['node', 'bench.js'],
      exit_code: null,
      signal: 'SIGKILL',
      stdout: BINARY,
      stderr: new Uint8Array(),
      limits_hit: ['wall_time'],
      error_code: 'E_TIMEOUT',
    },
  ],
  outputs: [
    { path: '/out/junit.xml', content: utf8(JUNIT_XML) },
    { path: '/out/results.tap', content: utf8(TAP_TEXT) },
    { path: '/out/summary.json', content: utf8(SUMMARY_JSON) },
    { path: '/out/notes.txt', content: utf8('all good\n') },
    { path: '/out/blob.bin', content: BINARY },
  ],
};

export function fixtureContext(recorded: FactsInput = RECORDED): JudgementContext {
  return {
    facts: computeFacts(recorded),
    steps: recorded.steps.map((s) => ({ index: s.index, stdout: s.stdout, stderr: s.stderr })),
    artifacts: new Map(recorded.outputs.map((o) => [o.path, o.content])),
  };
}
