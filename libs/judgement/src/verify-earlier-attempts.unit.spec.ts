import type { EvidenceReceipt } from '@cairn/contracts';
import { GENESIS_HASH, InvariantOutcomeSchema, parseEvidenceReceipt } from '@cairn/contracts';
import { sealReceipt, verifyChain } from '@cairn/evidence';
import { splitAttempts } from '@cairn/lifecycle';
import { describe, expect, it } from 'vitest';
import { endsRetriedByItsPlacement, fencedAfterRetry, lostSandboxes, verifyEarlierAttempts } from './verify-earlier-attempts.js';
import { RUN_INVARIANTS, verifyRunEvidence } from './verify-run-evidence.js';

const SHA = (c: string) => c.repeat(64);
const RUN = 'run_att';
const CAPS = { wall_seconds: 300, memory_mib: 1024, pids: 128, disk_mib: 1024, cpus: 1 };

/** An event and, unless given, the causation of every runtime receipt: the placement it runs under. */
type Event = [type: string, fields: Record<string, unknown>];

function chain(events: readonly Event[]): EvidenceReceipt[] {
  let head = GENESIS_HASH;
  const receipts = events.map(([type, fields], k) => {
    const body = { v: 1, seq: k + 1, run_id: RUN, tenant: 'acme', type, actor: 'runtime', ts: '2026-11-30T00:00:00.000Z', causation: k === 0 ? null : `${RUN}:${k}`, ...fields };
    const receipt = sealReceipt(head, body);
    head = receipt.hash;
    const parsed = parseEvidenceReceipt(receipt);
    if (!parsed.ok) throw new Error(parsed.message);
    return parsed.receipt;
  });
  expect(verifyChain(receipts).ok).toBe(true);
  return receipts;
}

const by = (seq: number) => ({ causation: `${RUN}:${seq}` });
const scheduled = (worker: string, lease: string, attempt: number, cause: number) => ({ worker_id: worker, lease_id: lease, lease_expires_at: '2026-11-30T00:10:00.000Z', attempt, ...by(cause) });
const created = (container: string, worker: string, cause: number) => ({ container_name: container, worker_id: worker, driver: 'docker', image: 'cairn/sandbox:1', image_digest: null, caps: CAPS, network: 'none', ...by(cause) });
const started = (step: number, cause: number) => ({ step_index: step, stage: 'step', tool: 'step', argv: ['step', String(step)], workdir: '/work', env_names: [], ...by(cause) });
const completed = (step: number, cause: number) => ({
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
  ...by(cause),
});
const destroyed = (container: string, cause: number, reason = 'completed') => ({ container_name: container, verified_gone: true, reason, ...by(cause) });
const retried = (worker: string, lease: string, attempt: number, cause: number) => ({
  attempt,
  error_code: 'E_WORKER_LOST',
  worker_id: worker,
  lease_id: lease,
  message: `worker ${worker} lost: lease ${lease} expired`,
  retries_left: 0,
  ...by(cause),
});

/**
 * Attempt 1 on w-b (seq 3) ran step 0 and started step 1, then its worker was lost (seq 8,
 * caused by seq 3); attempt 2 on w-a (seq 9) ran both steps and tore its sandbox down.
 */
function twoAttempts(lostExtra: Event[] = []): Event[] {
  return [
    ['run.submitted', { spec: { name: 'ci', steps: [{ argv: ['step', '0'] }, { argv: ['step', '1'] }] }, spec_sha256: SHA('a'), submitted_by: 'key:k1', idempotency_key_sha256: SHA('b') }],
    ['policy.decided', { decision: 'allow', policy_version: SHA('c'), reasons: [], caps: CAPS }],
    ['run.scheduled', scheduled('w-b', 'lease-1', 1, 2)],
    ['sandbox.created', created('cairn-run_att-a1', 'w-b', 3)],
    ['step.started', started(0, 3)],
    ['step.completed', completed(0, 3)],
    ['step.started', started(1, 3)],
    ...lostExtra,
    ['run.retried', retried('w-b', 'lease-1', 1, 3)],
    ['run.scheduled', scheduled('w-a', 'lease-2', 2, 8 + lostExtra.length)],
    ['sandbox.created', created('cairn-run_att-a2', 'w-a', 9 + lostExtra.length)],
    ['step.started', started(0, 9 + lostExtra.length)],
    ['step.completed', completed(0, 9 + lostExtra.length)],
    ['step.started', started(1, 9 + lostExtra.length)],
    ['step.completed', completed(1, 9 + lostExtra.length)],
    ['sandbox.destroyed', destroyed('cairn-run_att-a2', 9 + lostExtra.length)],
    ['run.executed', { steps_completed: 2, exit_codes: [0, 0], artifact_hashes: {}, duration_ms: 100, ...by(9 + lostExtra.length) }],
  ];
}

function lostOf(receipts: readonly EvidenceReceipt[]) {
  const [lost] = splitAttempts(receipts).lost;
  if (lost === undefined) throw new Error('no lost attempt');
  return lost;
}

describe('verifyRunEvidence over a run retried once (ADR 0035)', () => {
  it('Given two attempts, when verified, then the invariants read the second attempt only and the earlier attempt holds, its sandbox owed to the reaper', () => {
    const outcomes = verifyRunEvidence(chain(twoAttempts()), new Map());
    expect(outcomes.map((o) => o.id)).toEqual([...RUN_INVARIANTS, 'earlier_attempts']);
    expect(outcomes).toEqual([
      { id: 'every_started_step_completed', ok: true, detail: '2 steps started and completed' },
      { id: 'every_step_has_receipt', ok: true, detail: 'all 2 steps have a receipt' },
      { id: 'caps_honoured', ok: true, detail: '1 sandbox(es) within their caps' },
      { id: 'teardown', ok: true, detail: '1 sandbox(es) destroyed and verified gone' },
      { id: 'artifacts_rehashed', ok: true, detail: 'no artifacts were recorded' },
      {
        id: 'earlier_attempts',
        ok: true,
        detail: '1 earlier attempt lost to their worker, each retried by its placement and fenced after it; sandboxes: 0 torn down on the record, 1 owed to the reaper',
      },
    ]);
    for (const outcome of outcomes) expect(InvariantOutcomeSchema.parse(outcome)).toEqual(outcome);
  });

  it('Given a chain with no run.retried, when its earlier attempts are asked for, then there is no outcome to record', () => {
    const once = twoAttempts().filter((_, k) => k < 2 || k > 7);
    expect(verifyEarlierAttempts(chain(once.map(([type, fields]) => [type, type === 'run.scheduled' ? { ...fields, ...by(2) } : fields])))).toBeNull();
  });
});

describe('endsRetriedByItsPlacement', () => {
  it('Given a run.retried caused by its own placement, naming its worker, lease and attempt, then nothing is wrong', () => {
    expect(endsRetriedByItsPlacement(lostOf(chain(twoAttempts())))).toEqual([]);
  });

  it('Given a run.retried caused by another receipt and naming another worker, when checked, then each is named and the verification fails', () => {
    const events = twoAttempts();
    events[7] = ['run.retried', retried('w-a', 'lease-1', 1, 7)];
    const receipts = chain(events);
    expect(endsRetriedByItsPlacement(lostOf(receipts))).toEqual([
      `attempt 1's run.retried at seq 8 is caused by ${RUN}:7, not by its placement ${RUN}:3`,
      "attempt 1's run.retried names worker w-a, but w-b held it",
    ]);
    expect(verifyEarlierAttempts(receipts)).toMatchObject({ id: 'earlier_attempts', ok: false, detail: expect.stringMatching(/^2 problems: /) as string });
  });

  it('Given a lease re-offered before any step ran, when retried, then the placement in force is the last run.scheduled', () => {
    const events = twoAttempts();
    events.splice(3, 0, ['run.scheduled', scheduled('w-b', 'lease-1b', 2, 3)]);
    // Everything after moves down one: the lost attempt now runs under seq 4, its run.retried at seq 9.
    const moved = events.map(([type, fields], k): Event => (k > 3 && k < 8 ? [type, { ...fields, ...by(4) }] : [type, fields]));
    moved[8] = ['run.retried', retried('w-b', 'lease-1b', 2, 4)];
    expect(endsRetriedByItsPlacement(lostOf(chain(moved)))).toEqual([]);
  });
});

describe('fencedAfterRetry', () => {
  it('Given the lost worker\'s step.completed landing after the run.retried, when checked, then it is named', () => {
    const events = twoAttempts();
    events.splice(8, 0, ['step.completed', completed(1, 3)]); // seq 9, before the next placement
    const receipts = chain(events);
    expect(fencedAfterRetry(lostOf(receipts), receipts)).toEqual([`step.completed at seq 9, caused by ${RUN}:3 of attempt 1, came after its run.retried`]);
    expect(verifyEarlierAttempts(receipts)).toMatchObject({ ok: false });
  });

  it('Given a receipt naming the lost lease after the run.retried, when checked, then it is named', () => {
    const events = twoAttempts();
    events[8] = ['run.scheduled', scheduled('w-b', 'lease-1', 1, 8)];
    const receipts = chain(events);
    expect(fencedAfterRetry(lostOf(receipts), receipts)).toEqual(['run.scheduled at seq 9 names lease lease-1 of attempt 1 after its run.retried']);
  });

  it('Given an honest second attempt, when checked, then nothing after the run.retried is the lost worker\'s', () => {
    const receipts = chain(twoAttempts());
    expect(fencedAfterRetry(lostOf(receipts), receipts)).toEqual([]);
  });
});

describe('lostSandboxes', () => {
  it('Given the lost sandbox reaped on the record before the run.retried, when checked, then its teardown is recorded', () => {
    const receipts = chain(twoAttempts([['sandbox.destroyed', destroyed('cairn-run_att-a1', 3, 'reaped')]]));
    expect(lostSandboxes(lostOf(receipts), receipts)).toEqual({ sandboxes: [{ containerName: 'cairn-run_att-a1', teardown: 'recorded' }], problems: [] });
    expect(verifyEarlierAttempts(receipts)).toMatchObject({ ok: true, detail: expect.stringContaining('1 torn down on the record, 0 owed to the reaper') as string });
  });

  it('Given no teardown on the record, when checked, then the sandbox is owed to the reaper', () => {
    const receipts = chain(twoAttempts());
    expect(lostSandboxes(lostOf(receipts), receipts)).toEqual({ sandboxes: [{ containerName: 'cairn-run_att-a1', teardown: 'owed_to_reaper' }], problems: [] });
  });

  it('Given the next attempt\'s sandbox named as the one owed to the reaper, when checked, then it is named: the reaper would take it', () => {
    const events = twoAttempts().map(([type, fields]): Event => [type, fields['container_name'] === 'cairn-run_att-a2' ? { ...fields, container_name: 'cairn-run_att-a1' } : fields]);
    const receipts = chain(events);
    expect(lostSandboxes(lostOf(receipts), receipts).problems).toEqual(['cairn-run_att-a1 of attempt 1 is owed to the reaper, but a sandbox of the same name was created at seq 10']);
    expect(verifyEarlierAttempts(receipts)).toMatchObject({ ok: false });
  });
});
