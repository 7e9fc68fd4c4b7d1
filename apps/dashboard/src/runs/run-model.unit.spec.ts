import { describe, expect, it } from 'vitest';
import type { Receipt } from '../api/api-types.js';
import { artifacts, earlierAttempts, execs, fileOperations, formatDuration, lifecycle, pendingApprovals, stateAfter, steps, summary } from './run-model.js';

let seq = 0;
function receipt(type: string, fields: Record<string, unknown> = {}): Receipt {
  seq += 1;
  return { v: 1, seq, run_id: 'run_x', tenant: 'default', type, actor: 'test', ts: `2026-01-01T00:00:${String(seq).padStart(2, '0')}.000Z`, causation: null, prev_hash: '0'.repeat(64), hash: '1'.repeat(64), ...fields };
}

const A = 'a'.repeat(64);

/** A held run, approved, with two steps (the second killed at its memory cap), sealed ROLLBACK. */
function heldThenRolledBack(): Receipt[] {
  seq = 0;
  return [
    receipt('run.submitted', { submitted_by: 'key:k1' }),
    receipt('policy.decided', { decision: 'hold', reasons: ['image needs approval'], policy_version: A }),
    receipt('approval.requested', { approval_id: 'image', scope: 'run', step_index: null, reason: 'image x needs approval', expires_at: '2026-01-02T00:00:00.000Z' }),
    receipt('approval.granted', { approval_id: 'image', approved_by: 'key:k2' }),
    receipt('run.scheduled', { worker_id: 'w1', attempt: 1 }),
    receipt('sandbox.created', { image: 'busybox', network: 'none' }),
    receipt('step.started', { step_index: 0, stage: 'step', argv: ['echo', 'hi'] }),
    receipt('step.completed', { step_index: 0, stage: 'step', argv: ['echo', 'hi'], exit_code: 0, duration_ms: 12, limits_hit: [], stdout_bytes: 3, stderr_bytes: 0, output_truncated: false, artifact_hashes: {} }),
    receipt('step.started', { step_index: 1, stage: 'step', argv: ['sh', '-c', 'x=$(yes)'] }),
    receipt('step.completed', { step_index: 1, stage: 'step', argv: ['sh', '-c', 'x=$(yes)'], exit_code: null, duration_ms: 2500, limits_hit: ['memory'], error_code: 'E_MEM_LIMIT', stdout_bytes: 0, stderr_bytes: 0, output_truncated: false, artifact_hashes: { '/out/a': A } }),
    receipt('sandbox.destroyed', { reason: 'failed', verified_gone: true }),
    receipt('run.rolled_back', { error_code: 'E_MEM_LIMIT', message: 'memory cap', step_index: 1 }),
    receipt('run.sealed', { final_state: 'ROLLBACK' }),
  ];
}

/** Attempt 1 on w-b ran step 0 and started step 1, then its worker was lost; attempt 2 on w-a ran both (ADR 0035). */
function retriedOnce(): Receipt[] {
  seq = 0;
  const done = (step: number, exit: number) =>
    receipt('step.completed', { step_index: step, stage: 'step', argv: ['make', String(step)], exit_code: exit, duration_ms: 10, limits_hit: [], stdout_bytes: 1, stderr_bytes: 0, output_truncated: false, artifact_hashes: {} });
  return [
    receipt('run.submitted', { submitted_by: 'key:k1' }),
    receipt('policy.decided', { decision: 'allow', reasons: [], policy_version: A }),
    receipt('run.scheduled', { worker_id: 'w-b', attempt: 1 }),
    receipt('sandbox.created', { image: 'busybox', network: 'none' }),
    receipt('step.started', { step_index: 0, stage: 'step', argv: ['make', '0'] }),
    done(0, 7),
    receipt('step.started', { step_index: 1, stage: 'step', argv: ['make', '1'] }),
    receipt('run.retried', { attempt: 1, error_code: 'E_WORKER_LOST', worker_id: 'w-b', lease_id: 'l1', message: 'worker w-b lost', retries_left: 0 }),
    receipt('run.scheduled', { worker_id: 'w-a', attempt: 2 }),
    receipt('sandbox.created', { image: 'busybox', network: 'none' }),
    receipt('step.started', { step_index: 0, stage: 'step', argv: ['make', '0'] }),
    done(0, 0),
    receipt('step.started', { step_index: 1, stage: 'step', argv: ['make', '1'] }),
    done(1, 0),
    receipt('sandbox.destroyed', { reason: 'completed', verified_gone: true }),
    receipt('run.executed', { steps_completed: 2, exit_codes: [0, 0], artifact_hashes: {} }),
  ];
}

describe('the run page model of a run retried once (ADR 0035)', () => {
  it('shows the steps of the current attempt only, each once', () => {
    expect(steps(retriedOnce()).map((s) => [s.index, s.exitCode, s.startSeq, s.endSeq])).toEqual([
      [0, 0, 11, 12],
      [1, 0, 13, 14],
    ]);
  });

  it('shows the lost attempt as an earlier attempt: its worker, its steps as they were left, the run.retried that ended it', () => {
    expect(earlierAttempts(retriedOnce())).toEqual([
      {
        attempt: 1,
        workerId: 'w-b',
        steps: [expect.objectContaining({ index: 0, exitCode: 7, completed: true }), expect.objectContaining({ index: 1, completed: false, startSeq: 7 })],
        retriedSeq: 8,
        retriedTs: '2026-01-01T00:00:08.000Z',
        message: 'worker w-b lost',
      },
    ]);
    expect(earlierAttempts(heldThenRolledBack())).toEqual([]);
  });

  it('reads the lifecycle of both attempts: back to SUBMITTED at the run.retried, then placed again', () => {
    expect(lifecycle(retriedOnce()).map((step) => [step.state, step.seq])).toEqual([
      ['SUBMITTED', 1],
      ['SCHEDULED', 3],
      ['RUNNING', 4],
      ['SUBMITTED', 8],
      ['SCHEDULED', 9],
      ['RUNNING', 10],
      ['EXECUTED', 16],
    ]);
    expect(summary(retriedOnce()[7]!)).toBe('attempt 1 lost with worker w-b (E_WORKER_LOST); placed again, 0 retries left after the next');
  });
});

describe('the run page model', () => {
  it('reads the lifecycle off the chain: each state once, with the receipt that moved it', () => {
    expect(lifecycle(heldThenRolledBack()).map((step) => [step.state, step.seq])).toEqual([
      ['SUBMITTED', 1],
      ['AWAITING_APPROVAL', 2],
      ['SCHEDULED', 5],
      ['RUNNING', 6],
      ['ROLLBACK', 12],
    ]);
  });

  it('moves a run whose step approval was granted back to RUNNING, and a denied one to REJECTED', () => {
    expect(stateAfter(receipt('approval.granted', { approval_id: 'step-2' }), 'AWAITING_APPROVAL')).toBe('RUNNING');
    expect(stateAfter(receipt('approval.granted', { approval_id: 'image' }), 'AWAITING_APPROVAL')).toBeNull();
    expect(stateAfter(receipt('policy.decided', { decision: 'deny' }), 'SUBMITTED')).toBe('REJECTED');
    expect(stateAfter(receipt('run.sealed', { final_state: 'SEALED' }), 'GRADED')).toBe('SEALED');
    expect(stateAfter(receipt('kernel.facts'), 'EXECUTED')).toBeNull();
  });

  it('joins each step’s started and completed receipts: argv, exit code, duration, limits hit, error', () => {
    const [first, second] = steps(heldThenRolledBack());
    expect(first).toMatchObject({ index: 0, argv: ['echo', 'hi'], exitCode: 0, durationMs: 12, limitsHit: [], errorCode: null, completed: true, startSeq: 7, endSeq: 8 });
    expect(second).toMatchObject({ index: 1, exitCode: null, durationMs: 2500, limitsHit: ['memory'], errorCode: 'E_MEM_LIMIT', artifacts: { '/out/a': A } });
    seq = 0;
    const running = steps([receipt('step.started', { step_index: 0, stage: 'step', argv: ['sleep', '9'] })]);
    expect(running).toMatchObject([{ index: 0, completed: false, exitCode: null, startSeq: 1, endSeq: null }]);
  });

  it('lists approvals requested and not yet decided', () => {
    const chain = heldThenRolledBack();
    expect(pendingApprovals(chain.slice(0, 3))).toEqual([{ approvalId: 'image', scope: 'run', stepIndex: null, reason: 'image x needs approval', expiresAt: '2026-01-02T00:00:00.000Z' }]);
    expect(pendingApprovals(chain)).toEqual([]);
  });

  it('given a step held for approval when its attempt was lost (ADR 0035), then it waits no more; the next attempt\'s request does', () => {
    seq = 0;
    const held = [
      receipt('run.scheduled', { worker_id: 'w-b', attempt: 1 }),
      receipt('approval.requested', { approval_id: 'step-0', scope: 'step', step_index: 0, reason: 'apply', expires_at: '2026-01-01T00:00:00.000Z' }),
      receipt('run.retried', { attempt: 1 }),
    ];
    expect(pendingApprovals(held)).toEqual([]);
    const again = [...held, receipt('run.scheduled', { worker_id: 'w-a', attempt: 2 }), receipt('approval.requested', { approval_id: 'step-0', scope: 'step', step_index: 0, reason: 'apply', expires_at: '2026-01-02T00:00:00.000Z' })];
    expect(pendingApprovals(again)).toEqual([{ approvalId: 'step-0', scope: 'step', stepIndex: 0, reason: 'apply', expiresAt: '2026-01-02T00:00:00.000Z' }]);
  });

  it("takes the run's artifacts from run.executed, and summarises receipts for people", () => {
    seq = 0;
    expect(artifacts([receipt('run.executed', { artifact_hashes: { '/out/r.json': A }, steps_completed: 1, exit_codes: [0] })])).toEqual({ '/out/r.json': A });
    expect(artifacts(heldThenRolledBack())).toEqual({});
    const chain = heldThenRolledBack();
    expect(summary(chain[1]!)).toBe('hold — image needs approval');
    expect(summary(chain[9]!)).toBe('exit none (killed) after 2.50 s');
    expect(summary(chain[11]!)).toBe('E_MEM_LIMIT: memory cap');
    expect(summary(chain[12]!)).toBe('final state ROLLBACK');
  });

  it('writes durations the way people read them', () => {
    expect([formatDuration(null), formatDuration(7), formatDuration(3012), formatDuration(42_500), formatDuration(125_000)]).toEqual(['—', '7 ms', '3.01 s', '42.5 s', '2 min 5 s']);
  });
});

describe('the sandbox page model', () => {
  it("joins a sandbox's exec receipts on exec_id, and lists its file operations in order", () => {
    seq = 0;
    const chain = [
      receipt('sandbox.requested', { requested_by: 'key:k1', expires_at: '2026-01-01T01:00:00.000Z' }),
      receipt('sandbox.exec.started', { exec_id: 'exe_1', argv: ['echo', 'hi'] }),
      receipt('sandbox.exec.completed', { exec_id: 'exe_1', argv: ['echo', 'hi'], exit_code: 0, duration_ms: 4, limits_hit: [], stdout_bytes: 3, stderr_bytes: 0 }),
      receipt('sandbox.file.written', { path: '/work/a.txt', sha256: A, bytes: 6 }),
      receipt('sandbox.exec.started', { exec_id: 'exe_2', argv: ['sleep', '99'] }),
      receipt('sandbox.file.read', { path: '/out/r.json', sha256: A, bytes: 2 }),
    ];
    expect(execs(chain)).toMatchObject([
      { execId: 'exe_1', argv: ['echo', 'hi'], exitCode: 0, durationMs: 4, completed: true },
      { execId: 'exe_2', argv: ['sleep', '99'], exitCode: null, completed: false },
    ]);
    expect(fileOperations(chain)).toEqual([
      { seq: 4, direction: 'written', path: '/work/a.txt', bytes: 6, sha256: A, ts: chain[3]!.ts },
      { seq: 6, direction: 'read', path: '/out/r.json', bytes: 2, sha256: A, ts: chain[5]!.ts },
    ]);
    expect(summary(chain[2]!)).toBe('echo hi → exit 0 after 4 ms');
    expect(summary(chain[3]!)).toBe('/work/a.txt (6 bytes)');
  });
});
