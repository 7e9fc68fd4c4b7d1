import { GENESIS_HASH } from '@cairn/contracts';
import { sealReceipt } from '@cairn/evidence';
import type { RunView } from '@cairn/lifecycle';
import { describe, expect, it } from 'vitest';
import type { Receipt, Run } from '@cairn/contracts';
import { foldReceipt, formatArgv, formatEventLine, formatOutcome, formatRunDetails, formatRunTable, formatScore, formatTable, isUnsuccessful, outcomeOf, receiptProgressLine } from './run-report.js';

const SHA = (c: string) => c.repeat(64);
const STEP = { step_index: 0, stage: 'step', tool: 'sh', argv: ['sh', '-c', "echo 'hi'"] };

/** A run chain in the shape the services append, sealed from genesis. */
function chain(ending: 'sealed' | 'timeout'): Receipt[] {
  const bodies: [string, string, Record<string, unknown>][] = [
    ['run.submitted', 'intake', { spec: { name: 'demo', steps: [{ argv: STEP.argv }] }, spec_sha256: SHA('a'), submitted_by: 'key:k1', idempotency_key_sha256: SHA('b') }],
    ['policy.decided', 'policy', { decision: 'allow', policy_version: SHA('c'), reasons: [] }],
    ['run.scheduled', 'scheduler', { worker_id: 'w1', lease_id: 'l1', lease_expires_at: '2026-01-01T00:10:00.000Z', attempt: 1 }],
    ['sandbox.created', 'runtime', { container_name: 'cairn-run_demo-1', worker_id: 'w1', driver: 'docker', image: 'cairn/sandbox-busybox:1', image_digest: null, caps: { wall_seconds: 5, memory_mib: 64, pids: 32, disk_mib: 16, cpus: 1 }, network: 'none' }],
    ['step.started', 'runtime', { ...STEP, workdir: '/work', env_names: [] }],
  ];
  const result = { ...STEP, signal: null, stdout_sha256: SHA('d'), stderr_sha256: SHA('e'), stdout_bytes: 3, stderr_bytes: 0, output_truncated: false, duration_ms: 12, redactions: [], artifact_hashes: {} };
  if (ending === 'sealed') {
    bodies.push(
      ['step.completed', 'runtime', { ...result, exit_code: 0, limits_hit: [] }],
      ['sandbox.destroyed', 'runtime', { container_name: 'cairn-run_demo-1', verified_gone: true, reason: 'completed' }],
      ['run.executed', 'runtime', { steps_completed: 1, exit_codes: [0], artifact_hashes: {}, duration_ms: 20 }],
      ['kernel.facts', 'kernel', { facts: { tap: null }, operations: ['exit_code', 'file_digest'] }],
      ['verification.completed', 'verifier', { verdict: 'SUPPORTS', chain_ok: true, head_hash: SHA('f'), receipts_checked: 9, invariants: [], checks: [] }],
      ['grade.recorded', 'grader', { score: 3, max_score: 4, upper_bound: 3, criteria: [] }],
      ['run.sealed', 'grader', { final_state: 'SEALED', evidence_digest: SHA('9') }],
    );
  } else {
    bodies.push(
      ['step.completed', 'runtime', { ...result, exit_code: null, signal: 'SIGKILL', limits_hit: ['wall_time'], error_code: 'E_TIMEOUT' }],
      ['sandbox.destroyed', 'runtime', { container_name: 'cairn-run_demo-1', verified_gone: true, reason: 'failed' }],
      ['run.failed', 'runtime', { error_code: 'E_TIMEOUT', message: 'step 0 passed its time cap', step_index: 0 }],
      ['run.sealed', 'grader', { final_state: 'ROLLBACK', evidence_digest: SHA('9'), error_code: 'E_TIMEOUT' }],
    );
  }
  let prev = GENESIS_HASH;
  return bodies.map(([type, actor, fields], i) => {
    const receipt = sealReceipt(prev, { v: 1, seq: i + 1, run_id: 'run_demo', tenant: 'default', type, actor, ts: `2026-01-01T00:00:0${i % 10}.000Z`, causation: null, ...fields });
    prev = receipt.hash;
    return receipt;
  });
}

function fold(receipts: Receipt[]): RunView {
  let view: RunView | null = null;
  for (const receipt of receipts) view = foldReceipt(view, receipt);
  return view!;
}

describe('folding a followed run', () => {
  it('ends SEALED with the verdict and the first grade', () => {
    const view = fold(chain('sealed'));
    expect(outcomeOf(view)).toEqual({ runId: 'run_demo', state: 'SEALED', verdict: 'SUPPORTS', score: 3, maxScore: 4, errorCode: null });
    expect(view.sealed).toBe(true);
    expect(isUnsuccessful(view.state)).toBe(false);
  });

  it('ends ROLLBACK with the error code when a cap stopped a step', () => {
    const view = fold(chain('timeout'));
    expect(outcomeOf(view)).toMatchObject({ state: 'ROLLBACK', errorCode: 'E_TIMEOUT', verdict: null });
    expect(isUnsuccessful(view.state)).toBe(true);
    expect(formatOutcome(outcomeOf(view))).toBe('run_demo  ROLLBACK  E_TIMEOUT  verdict -  score -');
  });

  it('refuses something that is not a receipt at all', () => {
    expect(() => foldReceipt(null, { seq: 1, type: 'run.submitted', run_id: 'run_demo', hash: 'x' } as unknown as Receipt)).toThrow(expect.objectContaining({ code: 'E_INTERNAL' }) as Error);
  });
});

describe('progress lines', () => {
  it('show each step’s argv and how it ended, and the seal', () => {
    const lines = chain('timeout').map(receiptProgressLine);
    expect(lines).toContain(`step 0      $ sh -c 'echo '\\''hi'\\'''`);
    expect(lines).toContain('step 0      → killed (SIGKILL) E_TIMEOUT  (12 ms)  limits hit: wall_time');
    expect(lines).toContain('rollback    E_TIMEOUT: step 0 passed its time cap'.replace('rollback', 'failed '));
    expect(lines.at(-1)).toBe('sealed      ROLLBACK E_TIMEOUT');
    const sealed = chain('sealed').map(receiptProgressLine);
    expect(sealed).toContain('step 0      → exit 0  (12 ms)');
    expect(sealed).toContain('verified    verdict SUPPORTS, chain ok');
    expect(sealed).toContain('graded      3/4');
  });

  it('given a run retried once (ADR 0035), when followed, then the retry has its line and the fold ends on the second attempt', () => {
    const once = chain('sealed');
    const lost = once.slice(0, 5); // placed on w1, sandbox up, step 0 started
    const bodies: [string, string, Record<string, unknown>][] = [
      ['run.retried', 'scheduler', { attempt: 1, error_code: 'E_WORKER_LOST', worker_id: 'w1', lease_id: 'l1', message: 'worker w1 lost: lease l1 expired', retries_left: 0 }],
      ...once.slice(2).map((r): [string, string, Record<string, unknown>] => {
        const { v: _v, seq: _s, run_id: _r, tenant: _t, type, actor, ts: _ts, causation: _c, prev_hash: _p, hash: _h, ...fields } = r as Record<string, unknown> & { type: string; actor: string };
        return [type, actor, type === 'run.scheduled' ? { ...fields, worker_id: 'w2', lease_id: 'l2', attempt: 2 } : fields];
      }),
    ];
    const receipts = [...lost];
    for (const [type, actor, fields] of bodies) {
      const seq = receipts.length + 1;
      receipts.push(sealReceipt(receipts.at(-1)!.hash, { v: 1, seq, run_id: 'run_demo', tenant: 'default', type, actor, ts: `2026-01-01T00:01:${String(seq).padStart(2, '0')}.000Z`, causation: null, ...fields }));
    }
    expect(receiptProgressLine(receipts[5]!)).toBe('retried     attempt 1 lost with w1 (E_WORKER_LOST): placed again, 0 retries left after the next');
    expect(receiptProgressLine(receipts[6]!)).toBe('scheduled   on w2 (attempt 2)');
    expect(outcomeOf(fold(receipts))).toEqual({ runId: 'run_demo', state: 'SEALED', verdict: 'SUPPORTS', score: 3, maxScore: 4, errorCode: null });
  });

  it('format event lines with seq, time, type and actor', () => {
    const line = formatEventLine(chain('sealed')[5]!);
    expect(line).toMatch(/^ {3}6 {2}2026-01-01T00:00:05\.000Z {2}step\.completed {10}runtime {4}→ exit 0 {2}\(12 ms\)$/);
  });
});

describe('formatting', () => {
  it('quotes argv only where a shell would need it', () => {
    expect(formatArgv(['echo', 'a b', "it's", 'x=1', ''])).toBe(`echo 'a b' 'it'\\''s' x=1 ''`);
  });

  it('scores as score/max, with the upper bound when it differs', () => {
    expect(formatScore(3, 4)).toBe('3/4');
    expect(formatScore(3, 4, 3.5)).toBe('3/4 (upper bound 3.5)');
    expect(formatScore(null, null)).toBe('-');
  });

  it('pads table columns to the widest cell', () => {
    expect(formatTable(['A', 'BB'], [['xxx', 'y'], ['z', 'w']])).toBe('A    BB\nxxx  y\nz    w');
    const run: Run = {
      runId: 'run_a',
      tenant: 'default',
      name: 'n',
      state: 'SEALED',
      errorCode: null,
      verdict: 'SUPPORTS',
      score: 1,
      maxScore: 1,
      upperBound: 1,
      createdAt: 't0',
      updatedAt: 't1',
      eventCount: 13,
      headHash: SHA('a'),
      sealed: true,
    };
    expect(formatRunTable([run]).split('\n')[1]).toBe('run_a  SEALED  -      SUPPORTS  1/1    t1       n');
    expect(formatRunTable([])).toBe('no runs yet');
  });

  it("shows a run's trace id on a line of its own, and no such line for a run submitted untraced", () => {
    const run: Run = {
      runId: 'run_a',
      tenant: 'default',
      name: null,
      state: 'RUNNING',
      errorCode: null,
      verdict: null,
      score: null,
      maxScore: null,
      upperBound: null,
      createdAt: 't0',
      updatedAt: 't1',
      eventCount: 5,
      headHash: SHA('a'),
      sealed: false,
    };
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    const traced = formatRunDetails({ ...run, traceId }).split('\n');
    expect(traced.filter((line) => line.startsWith('trace'))).toEqual([`trace    ${traceId}`]);
    expect(traced.slice(0, -1)).toEqual(formatRunDetails(run).split('\n'));
    expect(formatRunDetails(run)).not.toMatch(/^trace/m);
  });
});
