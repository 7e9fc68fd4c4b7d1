import { PolicyDecidedSchema, validatePolicy } from '@cairn/contracts';
import { describe, expect, it } from 'vitest';
import { decidePolicy, policyDecidedFields } from './decide-policy.js';
import type { PolicyContext, PolicySpec } from './decide-policy.js';
import { DEFAULT_POLICY } from './default-policy.constants.js';
import type { PolicyDocument } from '@cairn/contracts';

/* Tenant quotas, output bytes, the time left for the runtime, and the steps handed to it to hold. */

function spec(extra: Partial<PolicySpec> = {}): PolicySpec {
  return { steps: [{ argv: ['echo', 'hi'] }], ...extra };
}

function policyWith(change: (policy: PolicyDocument) => void): PolicyDocument {
  const policy = structuredClone<PolicyDocument>(DEFAULT_POLICY);
  change(policy);
  return policy;
}

function decide(s: PolicySpec, context: Partial<PolicyContext> = {}) {
  return decidePolicy(s, { policy: DEFAULT_POLICY, ...context });
}

const ENVELOPE = {
  v: 1,
  seq: 2,
  run_id: 'run_abc',
  tenant: 'default',
  type: 'policy.decided',
  actor: 'policy',
  ts: '2026-11-30T00:00:00.000Z',
  causation: 'run_abc:1',
} as const;

const QUOTAS = policyWith((p) => {
  p.budgets.tenantConcurrentRuns = 2;
  p.budgets.tenantCpuSecondsPerDay = 3600;
  p.budgets.outputBytesPerStep = 4096;
});

describe('the policy document: budgets', () => {
  it('given the new budgets absent, when validated, then the document is valid (they are no limit)', () => {
    expect(validatePolicy(DEFAULT_POLICY).ok).toBe(true);
    expect(validatePolicy(QUOTAS).ok).toBe(true);
  });

  it('given a job budget above the frozen one, or a quota that is not a positive integer, when validated, then it is refused naming the field', () => {
    const raised = validatePolicy(policyWith((p) => (p.budgets.runsPerJob = 7)));
    expect(raised.ok).toBe(false);
    expect(!raised.ok && raised.issues.map((i) => i.path)).toContain('budgets.runsPerJob');
    const zero = validatePolicy(policyWith((p) => (p.budgets.tenantConcurrentRuns = 0)));
    expect(!zero.ok && zero.issues.map((i) => i.path)).toContain('budgets.tenantConcurrentRuns');
    const huge = validatePolicy(policyWith((p) => (p.budgets.outputBytesPerStep = 2 ** 40)));
    expect(!huge.ok && huge.issues.map((i) => i.path)).toContain('budgets.outputBytesPerStep');
  });
});

describe('decidePolicy: tenant quotas', () => {
  it('given a tenant quota and no usage supplied, when decided, then it is denied E_BUDGET: an unchecked quota is no quota', () => {
    expect(decide(spec(), { policy: QUOTAS })).toMatchObject({ decision: 'deny', error_code: 'E_BUDGET', reasons: [expect.stringContaining('usage is unknown')] });
  });

  it('given two runs in flight of two allowed, when a third is decided, then it is denied E_BUDGET before it starts', () => {
    const outcome = decide(spec(), { policy: QUOTAS, tenantUsage: { concurrentRuns: 2, cpuSecondsToday: 0 } });
    expect(outcome).toMatchObject({ decision: 'deny', error_code: 'E_BUDGET', reasons: ['tenant: this would be run 3 in flight of the 2 allowed at once'] });
    expect(policyDecidedFields(outcome)).not.toHaveProperty('budget');
  });

  it('given room in the quotas, when decided, then the run is allowed with the output budget and the seconds its CPUs leave today', () => {
    const outcome = decide(spec({ caps: { cpus: 2 } }), { policy: QUOTAS, tenantUsage: { concurrentRuns: 1, cpuSecondsToday: 3000 } });
    expect(outcome.decision).toBe('allow');
    expect(outcome.budget).toEqual({ output_bytes_per_step: 4096, run_seconds: 300 });
    const fields = policyDecidedFields(outcome);
    expect(fields.budget).toEqual({ output_bytes_per_step: 4096, run_seconds: 300 });
    expect(PolicyDecidedSchema.safeParse({ ...ENVELOPE, ...fields }).success).toBe(true);
  });

  it('given a job and a daily quota, when decided, then the run gets the smaller of the times they leave', () => {
    const policy = policyWith((p) => (p.budgets.tenantCpuSecondsPerDay = 100_000));
    const jobRuns = [{ runId: 'run_a', seconds: 90 * 60 - 120 }];
    const outcome = decide(spec({ job: 'nightly' }), { policy, jobRuns, tenantUsage: { concurrentRuns: 0, cpuSecondsToday: 0 } });
    expect(outcome.budget).toEqual({ run_seconds: 120 });
  });

  it('given a budget refusal and a hold at once, when decided, then the refusal wins', () => {
    const policy = policyWith((p) => {
      p.budgets.tenantConcurrentRuns = 1;
      p.approvals.rules = [{ when: { image: 'cairn/sandbox-busybox:1' } }];
    });
    expect(decide(spec(), { policy, tenantUsage: { concurrentRuns: 1, cpuSecondsToday: 0 } })).toMatchObject({ decision: 'deny', error_code: 'E_BUDGET' });
  });
});

describe('policyDecidedFields: steps held for approval', () => {
  it('given a step marked apply under the default policy, when allowed, then the receipt names the step to hold, its reason and its timeout', () => {
    const outcome = decide(spec({ steps: [{ argv: ['build'] }, { argv: ['deploy'], apply: true }] }));
    const fields = policyDecidedFields(outcome);
    expect(fields.step_approvals).toEqual([{ approval_id: 'step-1', step_index: 1, reason: 'step 1 is marked apply', timeout_seconds: 86_400 }]);
    expect(PolicyDecidedSchema.safeParse({ ...ENVELOPE, ...fields }).success).toBe(true);
  });

  it('given a rule with its own timeout, when allowed, then the step keeps that timeout', () => {
    const policy = policyWith((p) => (p.approvals.rules = [{ when: 'apply_step', timeoutSeconds: 30 }]));
    expect(policyDecidedFields(decide(spec({ steps: [{ argv: ['deploy'], apply: true }] }), { policy })).step_approvals).toEqual([
      { approval_id: 'step-0', step_index: 0, reason: 'step 0 is marked apply', timeout_seconds: 30 },
    ]);
  });

  it('given no apply step and no budget, when allowed, then the receipt carries neither field (old readers see what they always saw)', () => {
    const fields = policyDecidedFields(decide(spec()));
    expect(fields).not.toHaveProperty('step_approvals');
    expect(fields).not.toHaveProperty('budget');
  });

  it('given a policy without the apply rule, when a step is marked apply, then nothing holds it', () => {
    const policy = policyWith((p) => (p.approvals.rules = []));
    expect(policyDecidedFields(decide(spec({ steps: [{ argv: ['deploy'], apply: true }] }), { policy }))).not.toHaveProperty('step_approvals');
  });
});

describe('decidePolicy: sandbox and memory quotas', () => {
  const SANDBOXES = policyWith((p) => {
    p.budgets.tenantConcurrentRuns = 2;
    p.budgets.tenantConcurrentSandboxes = 3;
    p.budgets.tenantMemoryMiB = 2048;
  });
  const small = spec({ caps: { memoryMiB: 128, diskMiB: 64 } });

  it('given its own sandbox quota, when a sandbox is decided, then sandboxes count there and not against the runs in flight', () => {
    const usage = { concurrentRuns: 4, concurrentSandboxes: 2, memoryMiB: 600, cpuSecondsToday: 0 };
    expect(decide(small, { policy: SANDBOXES, tenantUsage: usage, kind: 'sandbox' }).decision).toBe('allow');
    // The same usage refuses a run: two runs (4 in flight less 2 sandboxes) are the 2 allowed.
    const run = decide(small, { policy: SANDBOXES, tenantUsage: usage, kind: 'run' });
    expect(run).toMatchObject({ decision: 'deny', error_code: 'E_BUDGET' });
    expect(run.reasons.join(' ')).toContain('run 3 in flight of the 2 allowed');
    const full = decide(small, { policy: SANDBOXES, tenantUsage: { ...usage, concurrentSandboxes: 3, concurrentRuns: 3 }, kind: 'sandbox' });
    expect(full).toMatchObject({ decision: 'deny', error_code: 'E_BUDGET' });
    expect(full.reasons.join(' ')).toContain('sandbox 4 open of the 3 allowed');
  });

  it('given a memory quota, when what is in flight plus this one (memory and tmpfs) would pass it, then it is denied E_BUDGET naming the figures', () => {
    const usage = { concurrentRuns: 1, concurrentSandboxes: 1, memoryMiB: 1900, cpuSecondsToday: 0 };
    const denied = decide(small, { policy: SANDBOXES, tenantUsage: usage, kind: 'sandbox' });
    expect(denied).toMatchObject({ decision: 'deny', error_code: 'E_BUDGET' });
    expect(denied.reasons.join(' ')).toContain('1900 MiB of memory in flight, and 192 MiB more would pass the 2048 MiB allowed');
    expect(decide(small, { policy: SANDBOXES, tenantUsage: { ...usage, memoryMiB: 1856 }, kind: 'sandbox' }).decision).toBe('allow');
  });

  it('given no sandbox quota, when a sandbox is decided, then it counts as a run in flight (as before)', () => {
    const runsOnly = policyWith((p) => (p.budgets.tenantConcurrentRuns = 2));
    const denied = decide(small, { policy: runsOnly, tenantUsage: { concurrentRuns: 2, concurrentSandboxes: 2, memoryMiB: 0, cpuSecondsToday: 0 }, kind: 'sandbox' });
    expect(denied).toMatchObject({ decision: 'deny', error_code: 'E_BUDGET' });
  });

  it('given a sandbox or memory quota that is not a positive integer, when validated, then it is refused naming the field', () => {
    const zero = validatePolicy(policyWith((p) => (p.budgets.tenantConcurrentSandboxes = 0)));
    expect(!zero.ok && zero.issues.map((i) => i.path)).toContain('budgets.tenantConcurrentSandboxes');
    const half = validatePolicy(policyWith((p) => (p.budgets.tenantMemoryMiB = 0.5)));
    expect(!half.ok && half.issues.map((i) => i.path)).toContain('budgets.tenantMemoryMiB');
  });
});
