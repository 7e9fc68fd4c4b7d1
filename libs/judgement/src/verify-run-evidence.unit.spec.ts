import type { EvidenceReceipt } from '@cairn/contracts';
import { GENESIS_HASH, InvariantOutcomeSchema, parseEvidenceReceipt } from '@cairn/contracts';
import { sealReceipt, verifyChain } from '@cairn/evidence';
import { describe, expect, it } from 'vitest';
import type { InvariantOutcome, RunInvariant } from './verify-run-evidence.js';
import { invariantsHold, RUN_INVARIANTS, verifyRunEvidence } from './verify-run-evidence.js';

const SHA = (c: string) => c.repeat(64);
const REPORT_SHA = SHA('1');
const LOG_SHA = SHA('2');

/** Builds a linked run chain whose every receipt satisfies its contract. */
function chain(events: readonly [type: string, fields: Record<string, unknown>][]): EvidenceReceipt[] {
  let head = GENESIS_HASH;
  const receipts = events.map(([type, fields], k) => {
    const body = {
      v: 1,
      seq: k + 1,
      run_id: 'run_inv',
      tenant: 'acme',
      type,
      actor: 'runtime',
      ts: '2026-11-30T00:00:00.000Z',
      causation: k === 0 ? null : `run_inv:${k}`,
      ...fields,
    };
    const receipt = sealReceipt(head, body);
    head = receipt.hash;
    const parsed = parseEvidenceReceipt(receipt);
    if (!parsed.ok) throw new Error(parsed.message);
    return parsed.receipt;
  });
  expect(verifyChain(receipts).ok).toBe(true);
  return receipts;
}

const spec = (steps: number, caps?: Record<string, number>) => ({
  spec: { name: 'ci', steps: Array.from({ length: steps }, (_, k) => ({ argv: ['step', String(k)] })), outputs: ['/out'], ...(caps ? { caps } : {}) },
  spec_sha256: SHA('a'),
  submitted_by: 'key:k1',
  idempotency_key_sha256: SHA('b'),
});
const allowed = (caps = { wall_seconds: 300, memory_mib: 1024, pids: 128, disk_mib: 1024, cpus: 1 }) => ({
  decision: 'allow',
  policy_version: SHA('c'),
  reasons: [],
  caps,
});
const created = (container = 'cairn-run_inv', caps = { wall_seconds: 300, memory_mib: 1024, pids: 128, disk_mib: 1024, cpus: 1 }) => ({
  container_name: container,
  worker_id: 'w1',
  driver: 'docker',
  image: 'cairn/sandbox:1',
  image_digest: null,
  caps,
  network: 'none',
});
const started = (step: number) => ({ step_index: step, stage: 'step', tool: 'step', argv: ['step', String(step)], workdir: '/work', env_names: [] });
const completed = (step: number, extra: Record<string, unknown> = {}) => ({
  step_index: step,
  stage: 'step',
  tool: 'step',
  argv: ['step', String(step)],
  exit_code: 0,
  signal: null,
  stdout_sha256: SHA('d'),
  stderr_sha256: SHA('e'),
  stdout_bytes: 3,
  stderr_bytes: 0,
  output_truncated: false,
  duration_ms: 10,
  limits_hit: [],
  redactions: [],
  artifact_hashes: {},
  ...extra,
});
const destroyed = (container = 'cairn-run_inv', verified_gone = true) => ({ container_name: container, verified_gone, reason: 'completed' });
const executed = (artifact_hashes: Record<string, string>) => ({ steps_completed: 2, exit_codes: [0, 0], artifact_hashes, duration_ms: 100 });

type Event = [string, Record<string, unknown>];

function goodRun(): Event[] {
  return [
    ['run.submitted', spec(2, { memoryMiB: 2048 })],
    ['policy.decided', allowed()],
    ['sandbox.created', created()],
    ['step.started', started(0)],
    ['step.completed', completed(0, { artifact_hashes: { '/out/log.txt': LOG_SHA } })],
    ['step.started', started(1)],
    ['step.completed', completed(1)],
    ['sandbox.destroyed', destroyed()],
    ['run.executed', executed({ '/out/report.xml': REPORT_SHA, '/out/log.txt': LOG_SHA })],
  ];
}

const ALL_BYTES = new Map([
  [REPORT_SHA, REPORT_SHA],
  [LOG_SHA, LOG_SHA],
]);

function outcomeOf(outcomes: InvariantOutcome[], id: RunInvariant): InvariantOutcome {
  return outcomes.find((o) => o.id === id)!;
}

/** Replaces the event at `index` (or removes it when `event` is null). */
function edit(events: Event[], index: number, event: Event | null): Event[] {
  const copy = [...events];
  if (event === null) copy.splice(index, 1);
  else copy[index] = event;
  return copy;
}

describe('verifyRunEvidence', () => {
  it('Given a complete, honest run, when verified, then every invariant holds', () => {
    const outcomes = verifyRunEvidence(chain(goodRun()), ALL_BYTES);
    expect(outcomes.map((o) => o.id)).toEqual([...RUN_INVARIANTS]);
    expect(outcomes).toEqual([
      { id: 'every_started_step_completed', ok: true, detail: '2 steps started and completed' },
      { id: 'every_step_has_receipt', ok: true, detail: 'all 2 steps have a receipt' },
      { id: 'caps_honoured', ok: true, detail: '1 sandbox(es) within their caps' },
      { id: 'teardown', ok: true, detail: '1 sandbox(es) destroyed and verified gone' },
      { id: 'artifacts_rehashed', ok: true, detail: '2 artifact hash(es) recomputed and equal' },
    ]);
    expect(invariantsHold(outcomes)).toBe(true);
    for (const outcome of outcomes) expect(InvariantOutcomeSchema.parse(outcome)).toEqual(outcome);
  });

  it('Given a step that started and never completed, when verified, then it is named', () => {
    const outcomes = verifyRunEvidence(chain(edit(goodRun(), 6, null)), ALL_BYTES);
    expect(outcomeOf(outcomes, 'every_started_step_completed')).toEqual({
      id: 'every_started_step_completed',
      ok: false,
      detail: '1 problem: step 1 started at seq 6 and never completed',
    });
    expect(invariantsHold(outcomes)).toBe(false);
  });

  it('Given a step that completed without starting, when verified, then it is named', () => {
    const outcomes = verifyRunEvidence(chain(edit(goodRun(), 5, null)), ALL_BYTES);
    expect(outcomeOf(outcomes, 'every_started_step_completed')).toMatchObject({ ok: false, detail: expect.stringMatching(/step 1 completed at seq 6 without a step.started/) as unknown });
  });

  it('Given a spec step with no receipt and no recorded error, when verified, then the run fails every_step_has_receipt', () => {
    const events = goodRun().filter(([, fields]) => fields.step_index !== 1);
    const outcome = outcomeOf(verifyRunEvidence(chain(events), ALL_BYTES), 'every_step_has_receipt');
    expect(outcome).toEqual({ id: 'every_step_has_receipt', ok: false, detail: '1 problem: no step.completed for step 1 and no recorded error stopped the run' });
  });

  it('Given a run stopped by a recorded error, when verified, then the steps after it may be missing', () => {
    const events: Event[] = [
      ['run.submitted', spec(3)],
      ['sandbox.created', created()],
      ['step.started', started(0)],
      ['step.completed', completed(0, { exit_code: null, signal: 'SIGKILL', limits_hit: ['wall_time'], error_code: 'E_TIMEOUT' })],
      ['sandbox.destroyed', destroyed()],
      ['run.rolled_back', { error_code: 'E_TIMEOUT', message: 'step 0 passed its time cap', step_index: 0 }],
    ];
    const outcome = outcomeOf(verifyRunEvidence(chain(events), new Map()), 'every_step_has_receipt');
    expect(outcome).toEqual({ id: 'every_step_has_receipt', ok: true, detail: '1 of 3 steps have a receipt; the run stopped early (E_TIMEOUT at step 0)' });
  });

  it('Given a step whose sandbox ended under it (no exit code, no error), when verified, then the steps after it may be missing', () => {
    const events: Event[] = [
      ['run.submitted', spec(3)],
      ['sandbox.created', created()],
      ['step.started', started(0)],
      ['step.completed', completed(0, { exit_code: null, signal: 'SIGKILL' })],
      ['sandbox.destroyed', destroyed()],
    ];
    const outcome = outcomeOf(verifyRunEvidence(chain(events), new Map()), 'every_step_has_receipt');
    expect(outcome).toEqual({ id: 'every_step_has_receipt', ok: true, detail: '1 of 3 steps have a receipt; the run stopped early (the sandbox ended during step 0)' });
  });

  it('Given a run that failed before any step, when verified, then missing steps are allowed', () => {
    const events: Event[] = [
      ['run.submitted', spec(2)],
      ['run.failed', { error_code: 'E_IMAGE_PULL', message: 'no such image' }],
    ];
    const outcomes = verifyRunEvidence(chain(events), new Map());
    expect(invariantsHold(outcomes)).toBe(true);
    expect(outcomeOf(outcomes, 'teardown').detail).toBe('no sandbox was created');
  });

  it('Given a gap before the last receipted step, when verified, then even a recorded error does not excuse it', () => {
    const events: Event[] = [
      ['run.submitted', spec(3)],
      ['step.started', started(0)],
      ['step.completed', completed(0)],
      ['step.started', started(2)],
      ['step.completed', completed(2, { error_code: 'E_MEM_LIMIT', exit_code: null, limits_hit: ['memory'] })],
    ];
    expect(outcomeOf(verifyRunEvidence(chain(events), new Map()), 'every_step_has_receipt')).toMatchObject({
      ok: false,
      detail: '1 problem: no step.completed for step 1',
    });
  });

  it('Given a receipt for a step the spec does not have, when verified, then it is named', () => {
    const events = [...goodRun(), ['step.started', started(5)], ['step.completed', completed(5)]] as Event[];
    expect(outcomeOf(verifyRunEvidence(chain(events), ALL_BYTES), 'every_step_has_receipt').detail).toMatch(/a receipt for step 5, but the spec has 2 steps/);
  });

  it('Given no run.submitted, when verified, then the steps cannot be accounted for', () => {
    expect(outcomeOf(verifyRunEvidence(chain(goodRun().slice(1)), ALL_BYTES), 'every_step_has_receipt')).toMatchObject({ ok: false });
  });

  it('Given caps over the frozen caps, the spec or the policy grant, when verified, then each excess is named', () => {
    const greedy = { wall_seconds: 900, memory_mib: 3000, pids: 200, disk_mib: 1024, cpus: 2 };
    const events = edit(goodRun(), 2, ['sandbox.created', created('cairn-run_inv', greedy)]);
    const outcome = outcomeOf(verifyRunEvidence(chain(events), ALL_BYTES), 'caps_honoured');
    expect(outcome.ok).toBe(false);
    expect(outcome.detail).toContain('cairn-run_inv wall_seconds 900 exceeds the frozen cap 600');
    expect(outcome.detail).toContain('cairn-run_inv wall_seconds 900 exceeds the 300 policy granted');
    expect(outcome.detail).toContain("cairn-run_inv memory_mib 3000 exceeds the spec's 2048");
    expect(outcome.detail).toContain('cairn-run_inv memory_mib 3000 exceeds the 1024 policy granted');
    expect(outcome.detail).toContain('cairn-run_inv pids 200 exceeds the 128 policy granted');
    expect(outcome.detail).toContain('cairn-run_inv cpus 2 exceeds the 1 policy granted');
    expect(outcome.detail).toMatch(/^6 problems: /);
  });

  it('Given lower frozen caps from the operator, when verified, then they apply', () => {
    const outcome = outcomeOf(verifyRunEvidence(chain(goodRun()), ALL_BYTES, { frozenCaps: { wallSeconds: 60, memoryMiB: 4096, pids: 256, diskMiB: 8192, runsPerJob: 6, jobMinutes: 90 } }), 'caps_honoured');
    expect(outcome).toMatchObject({ ok: false, detail: '1 problem: cairn-run_inv wall_seconds 300 exceeds the frozen cap 60' });
  });

  it('Given a sandbox never destroyed, when verified, then teardown fails', () => {
    const outcome = outcomeOf(verifyRunEvidence(chain(edit(goodRun(), 7, null)), ALL_BYTES), 'teardown');
    expect(outcome).toEqual({ id: 'teardown', ok: false, detail: '1 problem: cairn-run_inv has no sandbox.destroyed' });
  });

  it('Given a destroy that was not verified gone, when verified, then teardown fails unless a later one verified it', () => {
    const unverified = edit(goodRun(), 7, ['sandbox.destroyed', destroyed('cairn-run_inv', false)]);
    expect(outcomeOf(verifyRunEvidence(chain(unverified), ALL_BYTES), 'teardown')).toMatchObject({
      ok: false,
      detail: '1 problem: cairn-run_inv was destroyed but never verified gone',
    });
    const reaped = [...unverified, ['sandbox.destroyed', { ...destroyed(), reason: 'reaped' }]] as Event[];
    expect(outcomeOf(verifyRunEvidence(chain(reaped), ALL_BYTES), 'teardown').ok).toBe(true);
  });

  it('Given two sandboxes, when only one is destroyed, then the other is named', () => {
    const events = [...goodRun(), ['sandbox.created', created('cairn-run_inv-2')]] as Event[];
    expect(outcomeOf(verifyRunEvidence(chain(events), ALL_BYTES), 'teardown').detail).toBe('1 problem: cairn-run_inv-2 has no sandbox.destroyed');
  });

  it('Given an artifact whose bytes hash differently, when verified, then artifacts_rehashed fails', () => {
    const tampered = new Map([
      [REPORT_SHA, SHA('f')],
      [LOG_SHA, LOG_SHA],
    ]);
    expect(outcomeOf(verifyRunEvidence(chain(goodRun()), tampered), 'artifacts_rehashed')).toEqual({
      id: 'artifacts_rehashed',
      ok: false,
      detail: `1 problem: /out/report.xml is recorded as ${REPORT_SHA} but its bytes hash to ${SHA('f')}`,
    });
  });

  it('Given an artifact whose bytes are gone, when verified, then artifacts_rehashed fails', () => {
    const outcome = outcomeOf(verifyRunEvidence(chain(goodRun()), new Map([[LOG_SHA, LOG_SHA]])), 'artifacts_rehashed');
    expect(outcome).toMatchObject({ ok: false, detail: `1 problem: the bytes of /out/report.xml (${REPORT_SHA}) were not available` });
  });

  it('Given many problems, when verified, then the detail stays within the contract', () => {
    const events: Event[] = [['run.submitted', spec(40)], ...Array.from({ length: 40 }, (_, k): Event => ['step.started', started(k)])];
    const outcomes = verifyRunEvidence(chain(events), new Map());
    for (const outcome of outcomes) expect(InvariantOutcomeSchema.parse(outcome)).toEqual(outcome);
    expect(outcomeOf(outcomes, 'every_started_step_completed').detail).toMatch(/^40 problems: /);
  });
});
