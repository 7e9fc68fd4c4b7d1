import type { EvidenceReceipt } from '@cairn/contracts';
import { readRunChain } from '@cairn/lifecycle';
import { recordedRunOf, runFacts } from '@cairn/service-kit';
import type { LoadedArtifact } from '@cairn/service-kit';
import { failingRun, LocalChain, missingSourceRun, passingRun, plannedRun, timedOutRun, unitTestSpec, withLostAttempt } from '@cairn/service-kit/testing';
import type { PlannedEvent, RunScenario } from '@cairn/service-kit/testing';
import { describe, expect, it } from 'vitest';
import { decideSeal, gradeRun, shouldGrade } from './run-seal.js';

const RUN = 'run_seal1';
const GRACE = 10_000;

function loadedFrom(blobs: ReadonlyMap<string, Uint8Array>): Map<string, LoadedArtifact> {
  return new Map([...blobs].map(([sha, bytes]) => [sha, { state: 'ok', bytes }]));
}

/** The run's chain up to its verification, as kernel and verifier leave it. */
function verifiedRun(scenario: RunScenario = passingRun()) {
  const planned = plannedRun(RUN, scenario);
  const chain = new LocalChain(RUN).addAll(planned.events);
  const facts = runFacts(recordedRunOf(chain.receipts), loadedFrom(planned.blobs));
  chain.add({ type: 'kernel.facts', actor: 'kernel', causation: `${RUN}:10`, fields: { facts, operations: ['file_digest'] } });
  const verification = chain.add({
    type: 'verification.completed',
    actor: 'verifier',
    causation: `${RUN}:11`,
    fields: { verdict: 'SUPPORTS', chain_ok: true, head_hash: chain.receipts.at(-1)!.hash, receipts_checked: 11, invariants: [], checks: [] },
  });
  return { chain, verification, loaded: loadedFrom(planned.blobs) };
}

function decide(chain: LocalChain, trigger: EvidenceReceipt, nowMs = Date.parse(trigger.ts)) {
  return decideSeal(readRunChain(chain.receipts)!, trigger, nowMs, GRACE);
}

function event(type: PlannedEvent['type'], fields: Record<string, unknown>, actor = 'runtime'): PlannedEvent {
  return { type, actor, causation: null, fields };
}

describe('gradeRun', () => {
  it('scores the rubric: every criterion of a passing run holds', () => {
    const { chain, loaded } = verifiedRun();
    expect(gradeRun(chain.receipts, loaded)).toMatchObject({ score: 7, max_score: 7, upper_bound: 7 });
  });

  it('scores a failing run lower, criterion by criterion', () => {
    const { chain, loaded } = verifiedRun(failingRun());
    const grade = gradeRun(chain.receipts, loaded);
    expect(grade).toMatchObject({ score: 2, max_score: 7, upper_bound: 2 });
    expect(grade.criteria.map((c) => [c.id, c.earned, c.scored])).toEqual([
      ['junit-clean', 0, true],
      ['tap-ok', 2, true],
      ['test-exit', 0, true],
      ['says-passed', 0, true],
    ]);
  });

  it('leaves a criterion whose source is missing unscored, raising the upper bound', () => {
    const { chain, loaded } = verifiedRun(missingSourceRun());
    expect(gradeRun(chain.receipts, loaded)).toMatchObject({ score: 7, max_score: 9, upper_bound: 9 });
  });

  it('never scores bytes that did not re-hash: their criteria are unscored', () => {
    const { chain, loaded } = verifiedRun();
    const run = recordedRunOf(chain.receipts);
    loaded.set(run.steps[1]!.stdout_sha256, { state: 'corrupt', actual: 'a'.repeat(64) });
    const grade = gradeRun(chain.receipts, loaded);
    expect(grade.criteria.find((c) => c.id === 'says-passed')).toMatchObject({ earned: 0, scored: false });
    expect(grade).toMatchObject({ score: 6, max_score: 7, upper_bound: 7 });
  });
});

describe('decideSeal', () => {
  it('seals a graded run SEALED on its verification, covering the head, with no error code', () => {
    const { chain, verification, loaded } = verifiedRun();
    expect(shouldGrade(readRunChain(chain.receipts)!, verification)).toBe(true);
    const graded = chain.add({ type: 'grade.recorded', actor: 'grader', causation: `${RUN}:12`, fields: gradeRun(chain.receipts, loaded) });
    expect(shouldGrade(readRunChain(chain.receipts)!, verification)).toBe(false);
    expect(decide(chain, verification)).toEqual({ kind: 'seal', fields: { final_state: 'SEALED', evidence_digest: graded.hash } });
  });

  it('never seals a verified run on anything but its verification, and nothing after a seal', () => {
    const { chain, verification } = verifiedRun();
    const alert = chain.add(event('alert.raised', { severity: 'warning', error_code: 'E_EGRESS', message: 'blocked' }));
    expect(decide(chain, alert)).toMatchObject({ kind: 'none' });
    const seal = chain.add({ type: 'run.sealed', actor: 'grader', causation: null, fields: { final_state: 'SEALED', evidence_digest: alert.hash } });
    expect(decide(chain, verification)).toEqual({ kind: 'none', reason: 'sealed already' });
    expect(decide(chain, seal)).toEqual({ kind: 'none', reason: 'sealed already' });
  });

  it('seals a run that passed its time cap ROLLBACK with E_TIMEOUT', () => {
    const planned = plannedRun(RUN, timedOutRun());
    const chain = new LocalChain(RUN).addAll(planned.events);
    const failed = chain.receipts.at(-1)!;
    expect(failed).toMatchObject({ type: 'run.failed', error_code: 'E_TIMEOUT' });
    expect(decide(chain, failed)).toEqual({ kind: 'seal', fields: { final_state: 'ROLLBACK', evidence_digest: failed.hash, error_code: 'E_TIMEOUT' } });
  });

  it('seals each way a run ends with its state and error code', () => {
    const submitted = plannedRun(RUN, passingRun()).events[0]!;
    const cases: [PlannedEvent[], string, string | undefined][] = [
      [[event('policy.decided', { decision: 'deny', policy_version: 'c'.repeat(64), reasons: ['caps.memoryMiB 8192 > 4096'], error_code: 'E_POLICY_DENIED' }, 'policy')], 'REJECTED', 'E_POLICY_DENIED'],
      [[event('policy.decided', { decision: 'deny', policy_version: 'c'.repeat(64), reasons: ['job budget spent'], error_code: 'E_BUDGET' }, 'policy')], 'REJECTED', 'E_BUDGET'],
      [[event('run.cancelled', { cancelled_by: 'key:k1' }, 'intake')], 'CANCELLED', undefined],
      [
        [
          event('policy.decided', { decision: 'hold', policy_version: 'c'.repeat(64), reasons: ['image needs approval'], caps: { wall_seconds: 60, memory_mib: 256, pids: 64, disk_mib: 256, cpus: 1 }, image: 'cairn/sandbox-debian:1' }, 'policy'),
          event('approval.rejected', { approval_id: 'image', rejected_by: 'key:admin', cause: 'rejected' }, 'key:admin'),
        ],
        'CANCELLED',
        'E_NO_APPROVAL',
      ],
      [[event('run.failed', { error_code: 'E_WORKER_LOST', message: 'worker w-1 lost' }, 'scheduler')], 'FAILED', 'E_WORKER_LOST'],
    ];
    for (const [events, state, code] of cases) {
      const chain = new LocalChain(RUN).addAll([submitted, ...events]);
      const last = chain.receipts.at(-1)!;
      expect(decide(chain, last), `${last.type} → ${state}`).toEqual({
        kind: 'seal',
        fields: { final_state: state, evidence_digest: last.hash, ...(code === undefined ? {} : { error_code: code }) },
      });
    }
  });

  it('does not seal a run that is still going', () => {
    const planned = plannedRun(RUN, passingRun());
    const chain = new LocalChain(RUN).addAll(planned.events.slice(0, 2));
    expect(decide(chain, chain.receipts.at(-1)!)).toEqual({ kind: 'none', reason: 'the run is SUBMITTED' });
    const executed = new LocalChain(RUN).addAll(planned.events);
    const alert = executed.add(event('alert.raised', { severity: 'critical', error_code: 'E_CHAIN_BROKEN', message: 'x' }, 'verifier'));
    expect(decide(executed, alert)).toEqual({ kind: 'none', reason: 'the run is EXECUTED' });
  });

  it('waits for the teardown of a sandbox a cancel left open, then seals without it once the grace has passed', () => {
    const planned = plannedRun(RUN, passingRun());
    const chain = new LocalChain(RUN).addAll(planned.events.slice(0, 5)); // sandbox up, step 0 started
    const cancelled = chain.add(event('run.cancelled', { cancelled_by: 'key:k1', reason: 'no longer needed' }, 'intake'));
    const at = Date.parse(cancelled.ts);
    expect(decide(chain, cancelled, at + 100)).toMatchObject({ kind: 'wait', reason: expect.stringContaining(`cairn-${RUN}`) as string });
    expect(decide(chain, cancelled, at + GRACE)).toEqual({ kind: 'seal', fields: { final_state: 'CANCELLED', evidence_digest: cancelled.hash } });
    const destroyed = chain.add(event('sandbox.destroyed', { container_name: `cairn-${RUN}`, verified_gone: true, reason: 'cancelled' }));
    expect(decide(chain, cancelled, at + 100)).toEqual({ kind: 'seal', fields: { final_state: 'CANCELLED', evidence_digest: destroyed.hash } });
  });

  it('given a run retried once, when its second attempt is cancelled and torn down, then it seals at once: the lost sandbox is owed to the reaper (ADR 0035)', () => {
    const planned = withLostAttempt(RUN, plannedRun(RUN, passingRun()));
    const placed = planned.events.findIndex((e) => e.type === 'run.scheduled' && e.fields['attempt'] === 2);
    const chain = new LocalChain(RUN).addAll(planned.events.slice(0, placed + 3)); // attempt 2: sandbox up, step 0 started
    const cancelled = chain.add(event('run.cancelled', { cancelled_by: 'key:k1', reason: 'no longer needed' }, 'intake'));
    const at = Date.parse(cancelled.ts);
    expect(decide(chain, cancelled, at + 100)).toMatchObject({ kind: 'wait', reason: `cairn-${RUN} not torn down on the record yet (100 ms of ${GRACE})` });
    const destroyed = chain.add(event('sandbox.destroyed', { container_name: `cairn-${RUN}`, verified_gone: true, reason: 'cancelled' }));
    expect(decide(chain, cancelled, at + 100)).toEqual({ kind: 'seal', fields: { final_state: 'CANCELLED', evidence_digest: destroyed.hash } });
  });

  it('given a run retried once, when graded, then its rubric is scored on the second attempt\'s outputs only', () => {
    const scenario = passingRun(unitTestSpec({ checks: [{ id: 'built', source: 'steps[0].stdout', op: 'contains', value: 'built 3 targets', weight: 1 }] }));
    const once = verifiedRun(scenario);
    const planned = withLostAttempt(RUN, plannedRun(RUN, scenario), { stdout: 'attempt 1 output: nothing built\n' });
    const chain = new LocalChain(RUN).addAll(planned.events);
    const facts = runFacts(recordedRunOf(chain.receipts), loadedFrom(planned.blobs));
    chain.add({ type: 'kernel.facts', actor: 'kernel', causation: `${RUN}:${chain.receipts.length}`, fields: { facts, operations: ['file_digest'] } });
    expect(gradeRun(chain.receipts, loadedFrom(planned.blobs))).toEqual(gradeRun(once.chain.receipts, once.loaded));
    expect(gradeRun(chain.receipts, loadedFrom(planned.blobs))).toMatchObject({ score: 8, max_score: 8 });
  });

  it('seals a chain with a receipt that breaks its contract FAILED with E_UNKNOWN_STATE', () => {
    const planned = plannedRun(RUN, passingRun());
    const chain = new LocalChain(RUN).addAll(planned.events.slice(0, 3));
    const { hash: _h, ...bogusBody } = chain.receipts[2]!;
    const raw: unknown[] = [...chain.receipts.slice(0, 2), { ...bogusBody, hash: chain.receipts[2]!.hash, worker_id: 'NOT A TOKEN' }];
    const read = readRunChain(raw)!;
    expect(read.invalidSeqs).toEqual([3]);
    expect(read.view).toMatchObject({ state: 'FAILED', errorCode: 'E_UNKNOWN_STATE' });
    const failed = chain.add(event('run.failed', { error_code: 'E_UNKNOWN_STATE', message: 'scheduler could not handle it' }, 'scheduler'));
    expect(decideSeal(readRunChain([...raw, failed])!, failed, Date.parse(failed.ts), GRACE)).toMatchObject({
      kind: 'seal',
      fields: { final_state: 'FAILED', error_code: 'E_UNKNOWN_STATE' },
    });
  });
});
