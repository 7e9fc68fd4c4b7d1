import { describe, expect, it } from 'vitest';
import { isCairnError } from './error-codes.js';
import { parseEvidenceReceipt } from './evidence-event.schema.js';
import { VerificationCompletedSchema } from './run-events.schema.js';
import { gatePatchStepIndex, parseRunSpec } from './run-spec.schema.js';

/* The regression gate's contracts (docs/adr/0004): the RunSpec's `gate`, and its outcome on `verification.completed`. */

const gated = {
  name: 'a patch under a gate',
  steps: [
    { name: 'test-before', argv: ['sh', '/work/test.sh'] },
    { name: 'patch', argv: ['sh', '-c', 'patch -p1 < /work/fix.diff && cp /work/fix.diff /out/fix.diff'] },
    { name: 'test-after', argv: ['sh', '/work/test.sh'] },
  ],
  outputs: ['/out'],
  gate: {
    patchStep: 'patch',
    patch: '/out/fix.diff',
    checks: [
      { id: 'tests-pass', before: 'steps[0].exit_code', after: 'steps[2].exit_code', op: 'eq', value: 0 },
      { id: 'no-tap-failures', before: 'artifacts["/out/before.tap"].tap.failed', after: 'artifacts["/out/after.tap"].tap.failed', op: 'eq', value: 0 },
    ],
  },
};

function withGate(gate: Record<string, unknown>, more: Record<string, unknown> = {}) {
  return { ...gated, ...more, gate: { ...gated.gate, ...gate } };
}

function inputError(input: unknown): string {
  try {
    parseRunSpec(input);
  } catch (error) {
    if (isCairnError(error) && error.code === 'E_INPUT') return error.message;
    throw error;
  }
  throw new Error('expected E_INPUT, the spec was accepted');
}

describe('RunSpec gate: accepted', () => {
  it('accepts a gate naming its patch step by name or by index, unchanged', () => {
    expect(parseRunSpec(gated)).toEqual(gated);
    const byIndex = withGate({ patchStep: 1 });
    expect(parseRunSpec(byIndex)).toEqual(byIndex);
  });

  it('finds the patch step: by index, by a unique name; null for a missing or shared name', () => {
    expect(gatePatchStepIndex({ patchStep: 'patch' }, gated.steps)).toBe(1);
    expect(gatePatchStepIndex({ patchStep: 2 }, gated.steps)).toBe(2);
    expect(gatePatchStepIndex({ patchStep: 3 }, gated.steps)).toBeNull();
    expect(gatePatchStepIndex({ patchStep: 'nope' }, gated.steps)).toBeNull();
    expect(gatePatchStepIndex({ patchStep: 'x' }, [{ name: 'x' }, { name: 'x' }])).toBeNull();
  });
});

describe('RunSpec gate: refused with E_INPUT naming the field', () => {
  it.each([
    ['a patch step index past the steps', withGate({ patchStep: 3 }), 'gate.patchStep: step 3 does not exist (the spec has 3 steps)'],
    ['a patch step name no step has', withGate({ patchStep: 'apply' }), 'gate.patchStep: no step is named apply'],
    [
      'a patch step name two steps share',
      withGate({}, { steps: [...gated.steps.slice(0, 2), { ...gated.steps[2], name: 'patch' }] }),
      'gate.patchStep: 2 steps are named patch',
    ],
    ['a patch outside the collected outputs', withGate({ patch: '/work/fix.diff' }), 'gate.patch: /work/fix.diff is not under any collected output'],
    ['the output directory itself as the patch', withGate({ patch: '/out' }), 'gate.patch: an absolute normalised path under /work, /out (below it, not the directory itself)'],
    [
      'a before step at or after the patch step',
      withGate({ checks: [{ id: 'x', before: 'steps[1].exit_code', after: 'steps[2].exit_code', op: 'eq', value: 0 }] }),
      'gate.checks[0].before: steps[1].exit_code must name a step before the patch step (step 1)',
    ],
    [
      'an after step at or before the patch step',
      withGate({ checks: [{ id: 'x', before: 'steps[0].exit_code', after: 'steps[1].exit_code', op: 'eq', value: 0 }] }),
      'gate.checks[0].after: steps[1].exit_code must name a step after the patch step (step 1)',
    ],
    [
      'a step the spec does not have',
      withGate({ checks: [{ id: 'x', before: 'steps[0].exit_code', after: 'steps[9].exit_code', op: 'eq', value: 0 }] }),
      'gate.checks[0].after: steps[9].exit_code names a step the spec does not have',
    ],
    [
      'the same value before and after',
      withGate({ checks: [{ id: 'x', before: 'facts.tap.failed', after: 'facts.tap.failed', op: 'eq', value: 0 }] }),
      'gate.checks[0].after: before and after name the same value; a gate compares two',
    ],
    [
      'an artifact source outside the outputs',
      withGate({ checks: [{ id: 'x', before: 'artifacts["/work/a"]', after: 'artifacts["/out/a"]', op: 'exists' }] }),
      'gate.checks[0].before: artifacts["/work/a"] is not under any collected output',
    ],
    [
      'duplicate check ids',
      withGate({ checks: [gated.gate.checks[0], gated.gate.checks[0]] }),
      'gate.checks: duplicate check id tests-pass',
    ],
    ['an op without the value it needs', withGate({ checks: [{ ...gated.gate.checks[0], op: 'lt', value: 'x' }] }), 'gate.checks[0].value: lt needs a finite number value'],
    ['a check with a single source field', withGate({ checks: [{ id: 'x', source: 'steps[0].exit_code', op: 'eq', value: 0 }] }), 'gate.checks[0].source: unknown field'],
    ['no checks', withGate({ checks: [] }), 'gate.checks:'],
    ['an unknown gate field', withGate({ privileged: true }), 'gate.privileged: unknown field'],
  ])('%s', (_what, input, message) => {
    expect(inputError(input)).toContain(message);
  });
});

const sha = (c: string) => c.repeat(64);
const verification = {
  v: 1,
  seq: 14,
  run_id: 'run_abc',
  tenant: 'default',
  type: 'verification.completed',
  actor: 'verifier',
  ts: '2025-01-01T00:00:00.000Z',
  causation: 'run_abc:13',
  verdict: 'SUPPORTS',
  chain_ok: true,
  head_hash: sha('f'),
  receipts_checked: 13,
  invariants: [{ id: 'chain', ok: true }],
  checks: [],
};
const failedGate = {
  passed: false,
  patch_step: 1,
  patch_exit_code: 0,
  patch: { path: '/out/fix.diff', sha256: sha('a'), rejected: true },
  checks: [{ id: 'tests-pass', before: 'holds', after: 'contradicted', result: 'regressed', detail: 'steps[2].exit_code eq 0: found 1' }],
};
const passedGate = { ...failedGate, passed: true, patch: { ...failedGate.patch, rejected: false }, checks: [{ ...failedGate.checks[0], after: 'holds', result: 'held' }] };

describe('verification.completed with a gate', () => {
  it('a failed gate carries E_GATE_FAIL and a rejected patch; a passed gate neither', () => {
    expect(VerificationCompletedSchema.safeParse({ ...verification, gate: failedGate, error_code: 'E_GATE_FAIL' }).success).toBe(true);
    expect(VerificationCompletedSchema.safeParse({ ...verification, gate: passedGate }).success).toBe(true);
    expect(VerificationCompletedSchema.safeParse(verification).success).toBe(true);
    const receipt = { ...verification, gate: failedGate, error_code: 'E_GATE_FAIL', prev_hash: sha('1'), hash: sha('2') };
    expect(parseEvidenceReceipt(receipt).ok).toBe(true);
  });

  it.each([
    ['a failed gate without E_GATE_FAIL', { gate: failedGate }, 'error_code'],
    ['E_GATE_FAIL with a passed gate', { gate: passedGate, error_code: 'E_GATE_FAIL' }, 'error_code'],
    ['E_GATE_FAIL without a gate', { error_code: 'E_GATE_FAIL' }, 'error_code'],
    ['a failed gate whose patch is not rejected', { gate: { ...failedGate, patch: { ...failedGate.patch, rejected: false } }, error_code: 'E_GATE_FAIL' }, 'gate.patch.rejected'],
    ['a passed gate whose patch is rejected', { gate: { ...passedGate, patch: { ...passedGate.patch, rejected: true } } }, 'gate.patch.rejected'],
    ['an unknown gate result', { gate: { ...passedGate, checks: [{ ...passedGate.checks[0], result: 'improved' }] } }, 'gate.checks'],
  ])('refuses %s', (_what, fields, path) => {
    const receipt = { ...verification, ...fields, prev_hash: sha('1'), hash: sha('2') };
    const parsed = parseEvidenceReceipt(receipt);
    expect(parsed.ok).toBe(false);
    if (!parsed.ok) expect(parsed.issues.map((i) => i.path).join(' ')).toContain(path);
  });
});
