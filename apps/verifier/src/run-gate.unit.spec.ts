import type { RunSpec } from '@cairn/contracts';
import { parseEvidenceReceipt, parseRunSpec } from '@cairn/contracts';
import { sealReceipt, sha256Hex, verifyChain } from '@cairn/evidence';
import { outputRefsOf, recordedRunOf, runFacts } from '@cairn/service-kit';
import type { LoadedArtifact } from '@cairn/service-kit';
import { LocalChain, plannedRun } from '@cairn/service-kit/testing';
import type { RunScenario } from '@cairn/service-kit/testing';
import { describe, expect, it } from 'vitest';
import { verifyRun } from './run-verification.js';

/*
 * The verifier judges a run's regression gate (docs/adr/0004): the same test before and after a
 * patch step, the patch collected under /out. A failed gate is E_GATE_FAIL on the verification
 * itself, with the patch rejected by its hash.
 */

const DIFF = '--- a/calc.sh\n+++ b/calc.sh\n@@ -1 +1 @@\n-echo 4\n+echo 5\n';
const TAP_OK = 'TAP version 13\n1..1\nok 1 - adds\n';
const TAP_FAIL = 'TAP version 13\n1..1\nnot ok 1 - adds\n';

const gatedSpec: RunSpec = parseRunSpec({
  name: 'a patch under a gate',
  image: 'cairn/sandbox-busybox:1',
  steps: [
    { name: 'test-before', argv: ['sh', '/work/test.sh', '/out/before.tap'] },
    { name: 'patch', argv: ['sh', '-c', 'patch -p1 < /work/fix.diff && cp /work/fix.diff /out/fix.diff'] },
    { name: 'test-after', argv: ['sh', '/work/test.sh', '/out/after.tap'] },
  ],
  outputs: ['/out'],
  claim: { checks: [{ id: 'ran', source: 'steps[2].stdout', op: 'contains', value: 'ran' }] },
  gate: {
    patchStep: 'patch',
    patch: '/out/fix.diff',
    checks: [
      { id: 'tests-pass', before: 'steps[0].exit_code', after: 'steps[2].exit_code', op: 'eq', value: 0 },
      { id: 'tap-clean', before: 'artifacts["/out/before.tap"].tap.failed', after: 'artifacts["/out/after.tap"].tap.failed', op: 'eq', value: 0 },
    ],
  },
});

function patchScenario(afterExit: number, afterTap: string, files: Record<string, string> = { '/out/fix.diff': DIFF }): RunScenario {
  return {
    spec: gatedSpec,
    steps: [
      { stdout: 'ran 1 test\n', exit_code: 0 },
      { stdout: 'patching file calc.sh\n', exit_code: 0 },
      { stdout: 'ran 1 test\n', exit_code: afterExit },
    ],
    files: { '/out/before.tap': TAP_OK, '/out/after.tap': afterTap, ...files },
  };
}

function verified(scenario: RunScenario) {
  const runId = 'run_gate1';
  const planned = plannedRun(runId, scenario);
  const chain = new LocalChain(runId).addAll(planned.events);
  const loaded = new Map<string, LoadedArtifact>([...planned.blobs].map(([sha, bytes]) => [sha, { state: 'ok', bytes }]));
  const facts = runFacts(recordedRunOf(chain.receipts), loaded);
  chain.add({ type: 'kernel.facts', actor: 'kernel', causation: `${runId}:${chain.receipts.length}`, fields: { facts, operations: ['exit_code', 'file_digest'] } });
  const integrity = verifyChain(chain.receipts);
  if (!integrity.ok) throw new Error(integrity.message);
  expect(outputRefsOf(recordedRunOf(chain.receipts)).length).toBeGreaterThan(0);
  const fields = verifyRun(integrity, chain.receipts, loaded);
  // What the verifier appends is a valid receipt.
  const last = chain.receipts.at(-1)!;
  const body = { v: 1, seq: last.seq + 1, run_id: runId, tenant: last.tenant, type: 'verification.completed', actor: 'verifier', ts: last.ts, causation: `${runId}:${last.seq}`, ...fields };
  const parsed = parseEvidenceReceipt(sealReceipt(last.hash, body));
  expect(parsed.ok, parsed.ok ? '' : parsed.message).toBe(true);
  return fields;
}

describe('verifyRun with a regression gate', () => {
  it('a patch that keeps the tests passing: the gate passes, no error code, the patch is not rejected', () => {
    const fields = verified(patchScenario(0, TAP_OK));
    expect(fields.error_code).toBeUndefined();
    expect(fields.gate).toMatchObject({
      passed: true,
      patch_step: 1,
      patch_exit_code: 0,
      patch: { path: '/out/fix.diff', sha256: sha256Hex(DIFF), rejected: false },
    });
    expect(fields.gate?.checks.map((c) => c.result)).toEqual(['held', 'held']);
    expect(fields.verdict).toBe('SUPPORTS');
  });

  it('a patch that breaks a passing test: E_GATE_FAIL, the checks regressed, the patch rejected by its hash', () => {
    const fields = verified(patchScenario(1, TAP_FAIL));
    expect(fields.error_code).toBe('E_GATE_FAIL');
    expect(fields.gate).toMatchObject({ passed: false, patch: { path: '/out/fix.diff', sha256: sha256Hex(DIFF), rejected: true } });
    expect(fields.gate?.checks.map((c) => [c.id, c.before, c.after, c.result])).toEqual([
      ['tests-pass', 'holds', 'contradicted', 'regressed'],
      ['tap-clean', 'holds', 'contradicted', 'regressed'],
    ]);
    // The claim is judged on its own: the gate does not change the verdict.
    expect(fields.verdict).toBe('SUPPORTS');
    expect(fields.invariants.every((i) => i.ok)).toBe(true);
  });

  it('a patch step that wrote no patch: E_GATE_FAIL, nothing to accept', () => {
    const fields = verified(patchScenario(0, TAP_OK, {}));
    expect(fields.error_code).toBe('E_GATE_FAIL');
    expect(fields.gate).toMatchObject({ passed: false, patch: { sha256: null, rejected: true } });
  });

  it('a run without a gate: no gate outcome, no error code', () => {
    const { gate: _gate, ...ungated } = gatedSpec;
    const fields = verified({ ...patchScenario(1, TAP_FAIL), spec: ungated });
    expect(fields.gate).toBeUndefined();
    expect(fields.error_code).toBeUndefined();
  });
});
