import { GENESIS_HASH, parseEvidenceReceipt } from '@cairn/contracts';
import type { EvidenceReceipt, EvidenceReceiptOf } from '@cairn/contracts';
import { sealReceipt } from '@cairn/evidence';
import { describe, expect, it } from 'vitest';
import { assessScheduled } from './run-assessment.js';
import type { EventFields } from './runtime-receipts.builder.js';
import { breachMessage, budgetBreach, budgetedTimeout, budgetStepFields, holdSeconds } from './step-budget.js';

const NONE = { outputBytesPerStep: null, runSeconds: null };

describe('budgetedTimeout', () => {
  it('keeps the step’s own timeout when the run has more time left (or no time budget)', () => {
    expect(budgetedTimeout(10_000, null)).toEqual({ timeoutMs: 10_000, byBudget: false });
    expect(budgetedTimeout(10_000, 10_000)).toEqual({ timeoutMs: 10_000, byBudget: false });
  });

  it('cuts the step at what the run has left, and says the budget did', () => {
    expect(budgetedTimeout(10_000, 2_500.7)).toEqual({ timeoutMs: 2_500, byBudget: true });
  });
});

describe('budgetBreach', () => {
  const result = (stdoutBytes: number, stderrBytes: number, limitHit: 'E_TIMEOUT' | 'E_MEM_LIMIT' | null = null) => ({ stdoutBytes, stderrBytes, limitHit });

  it('counts stdout and stderr together against the output budget; at the budget is within it', () => {
    const budget = { outputBytesPerStep: 4096, runSeconds: null };
    expect(budgetBreach(result(2048, 2048), budget, false)).toBeNull();
    expect(budgetBreach(result(4000, 97), budget, false)).toEqual({ kind: 'output', bytes: 4097, budget: 4096 });
  });

  it('makes an endless output that ran into its time cap a budget breach, but leaves a memory or process cap as the cause', () => {
    const budget = { outputBytesPerStep: 10, runSeconds: null };
    expect(budgetBreach(result(1 << 20, 0, 'E_TIMEOUT'), budget, false)).toMatchObject({ kind: 'output' });
    expect(budgetBreach(result(1 << 20, 0, 'E_MEM_LIMIT'), budget, false)).toBeNull();
  });

  it('makes a timeout the budget set a time breach, and a timeout of the step’s own no breach', () => {
    const budget = { outputBytesPerStep: null, runSeconds: 30 };
    expect(budgetBreach(result(0, 0, 'E_TIMEOUT'), budget, true)).toEqual({ kind: 'time', runSeconds: 30 });
    expect(budgetBreach(result(0, 0, 'E_TIMEOUT'), budget, false)).toBeNull();
    expect(budgetBreach(result(1 << 30, 0), NONE, false)).toBeNull();
  });

  it('marks the step receipt E_BUDGET with the limit it met, once', () => {
    const fields = { limits_hit: ['output_bytes'], exit_code: 0 } as unknown as EventFields<'step.completed'>;
    expect(budgetStepFields(fields, { kind: 'output', bytes: 9, budget: 8 })).toMatchObject({ limits_hit: ['output_bytes'], error_code: 'E_BUDGET' });
    expect(budgetStepFields(fields, { kind: 'time', runSeconds: 5 })).toMatchObject({ limits_hit: ['output_bytes', 'wall_time'], error_code: 'E_BUDGET' });
    expect(breachMessage(2, { kind: 'output', bytes: 9, budget: 8 })).toBe('step 2 wrote 9 bytes of output, more than the 8 bytes a step may write; the sandbox was destroyed');
  });
});

describe('holdSeconds', () => {
  it('holds a step for its rule’s timeout, within what the run has left to be held, never less than a second', () => {
    expect(holdSeconds(60, 86_400_000)).toBe(60);
    expect(holdSeconds(86_400, 3_600_000)).toBe(3600);
    expect(holdSeconds(60, 0)).toBe(1);
  });
});

describe('the run plan: what policy decided for while it runs', () => {
  function chainWith(decided: Record<string, unknown>): { receipts: EvidenceReceipt[]; scheduled: EvidenceReceiptOf<'run.scheduled'> } {
    const receipts: EvidenceReceipt[] = [];
    let head = GENESIS_HASH;
    const add = (type: string, fields: Record<string, unknown>) => {
      const body = { v: 1, seq: receipts.length + 1, run_id: 'run_budget1', tenant: 'acme', type, actor: 'intake', ts: '2026-11-30T00:00:00.000Z', causation: null, ...fields };
      const sealed = sealReceipt(head, body);
      const parsed = parseEvidenceReceipt(sealed);
      if (!parsed.ok) throw new Error(parsed.message);
      head = sealed.hash;
      receipts.push(parsed.receipt);
      return parsed.receipt;
    };
    add('run.submitted', {
      spec: { name: 'apply', steps: [{ argv: ['build'] }, { argv: ['deploy'], apply: true }] },
      spec_sha256: 'a'.repeat(64),
      submitted_by: 'key:k1',
      idempotency_key_sha256: 'b'.repeat(64),
    });
    const caps = { wall_seconds: 60, memory_mib: 64, pids: 32, disk_mib: 16, cpus: 1 };
    add('policy.decided', { decision: 'allow', policy_version: 'c'.repeat(64), reasons: [], caps, image: 'cairn/sandbox-busybox:1', ...decided });
    const scheduled = add('run.scheduled', { worker_id: 'w1', lease_id: 'l1', lease_expires_at: '2026-11-30T00:10:00.000Z', attempt: 1 });
    return { receipts, scheduled: scheduled as EvidenceReceiptOf<'run.scheduled'> };
  }

  it('carries the steps to hold and the budgets from the decision', () => {
    const step_approvals = [{ approval_id: 'step-1', step_index: 1, reason: 'step 1 is marked apply', timeout_seconds: 30 }];
    const { receipts, scheduled } = chainWith({ step_approvals, budget: { output_bytes_per_step: 4096, run_seconds: 120 } });
    const assessment = assessScheduled(receipts, scheduled, 'w1');
    expect(assessment.kind === 'execute' && assessment.plan.stepApprovals).toEqual(step_approvals);
    expect(assessment.kind === 'execute' && assessment.plan.budget).toEqual({ outputBytesPerStep: 4096, runSeconds: 120 });
  });

  it('holds nothing and budgets nothing when the decision says neither (a decision made before they existed)', () => {
    const { receipts, scheduled } = chainWith({});
    const assessment = assessScheduled(receipts, scheduled, 'w1');
    expect(assessment.kind === 'execute' && [assessment.plan.stepApprovals, assessment.plan.budget]).toEqual([[], NONE]);
  });
});
