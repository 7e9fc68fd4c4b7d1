import type { EvidenceReceipt } from '@cairn/contracts';
import { describe, expect, it } from 'vitest';
import { summariseUsage } from './budget-usage.js';
import { evolveUsageEntry, UsageLedger, usageEntryExpired } from './usage-ledger.js';

const NOW = Date.parse('2026-12-02T12:00:00.000Z');
const at = (msAgo: number) => new Date(NOW - msAgo).toISOString();
const MIN = 60_000;
const HOUR = 60 * MIN;
const CAPS = { cpus: 2, memory_mib: 512, disk_mib: 64, pids: 128, wall_seconds: 600 };

/** A receipt with just what the ledger reads (the fold never sees an unchecked one in service). */
function receipt(type: string, chain: string, seq: number, ts: string, fields: Record<string, unknown> = {}, tenant = 'acme'): EvidenceReceipt {
  return { type, run_id: chain, seq, ts, tenant, actor: 'test', causation: null, prev_hash: 'x', hash: 'y', ...fields } as unknown as EvidenceReceipt;
}

const submitted = (chain: string, ts: string, job?: string, tenant = 'acme') =>
  receipt('run.submitted', chain, 1, ts, { spec: { name: chain, steps: [{ argv: ['true'] }], ...(job === undefined ? {} : { job }) } }, tenant);
const requested = (chain: string, ts: string, tenant = 'acme') => receipt('sandbox.requested', chain, 1, ts, { spec: { ttlSeconds: 600 } }, tenant);
const decided = (chain: string, seq: number, ts: string, decision: 'allow' | 'hold' | 'deny') =>
  receipt('policy.decided', chain, seq, ts, decision === 'deny' ? { decision, error_code: 'E_BUDGET', reasons: ['no'] } : { decision, caps: CAPS, reasons: [] });

/** Folds `receipts` at consecutive stream seqs from 1. */
function ledgerOf(receipts: readonly EvidenceReceipt[]): UsageLedger {
  const ledger = new UsageLedger();
  receipts.forEach((r, i) => ledger.fold(r, i + 1));
  return ledger;
}

describe('evolveUsageEntry: a run', () => {
  it('given a run allowed, started, torn down and executed, then it leaves the runs in flight with its CPUs, memory and sandbox interval', () => {
    let entry = evolveUsageEntry(undefined, submitted('run_a', at(HOUR), 'nightly'), 7);
    expect(entry).toMatchObject({ runId: 'run_a', kind: 'run', tenant: 'acme', job: 'nightly', state: 'SUBMITTED', firstStreamSeq: 7, cpus: null });
    entry = evolveUsageEntry(entry, decided('run_a', 2, at(59 * MIN), 'allow'), 8);
    expect(entry).toMatchObject({ state: 'SUBMITTED', cpus: 2, memoryMiB: 576 });
    entry = evolveUsageEntry(entry, receipt('sandbox.created', 'run_a', 3, at(50 * MIN), { caps: CAPS }), 9);
    expect(entry).toMatchObject({ state: 'RUNNING', startedAt: at(50 * MIN), endedAt: null });
    entry = evolveUsageEntry(entry, receipt('sandbox.destroyed', 'run_a', 4, at(40 * MIN)), 10);
    entry = evolveUsageEntry(entry, receipt('run.executed', 'run_a', 5, at(40 * MIN)), 11);
    expect(entry).toMatchObject({ state: 'EXECUTED', startedAt: at(50 * MIN), endedAt: at(40 * MIN), updatedAt: at(40 * MIN), firstStreamSeq: 7 });
  });

  it('given a deny, a hold, a rejected approval, a cancel and a failure for its budget, then each lands in the state the runs projection would show for usage', () => {
    expect(evolveUsageEntry(evolveUsageEntry(undefined, submitted('run_d', at(0)), 1), decided('run_d', 2, at(0), 'deny'), 2)).toMatchObject({ state: 'REJECTED', cpus: null });
    const held = evolveUsageEntry(evolveUsageEntry(undefined, submitted('run_h', at(0)), 1), decided('run_h', 2, at(0), 'hold'), 2);
    expect(held).toMatchObject({ state: 'AWAITING_APPROVAL', cpus: 2, memoryMiB: 576 });
    expect(evolveUsageEntry(held, receipt('approval.rejected', 'run_h', 3, at(0)), 3)).toMatchObject({ state: 'CANCELLED' });
    expect(evolveUsageEntry(held, receipt('run.cancelled', 'run_h', 3, at(0)), 3)).toMatchObject({ state: 'CANCELLED' });
    expect(evolveUsageEntry(held, receipt('run.failed', 'run_h', 3, at(0), { error_code: 'E_BUDGET' }), 3)).toMatchObject({ state: 'REJECTED' });
    expect(evolveUsageEntry(held, receipt('run.failed', 'run_h', 3, at(0), { error_code: 'E_WORKER_LOST' }), 3)).toMatchObject({ state: 'FAILED' });
  });

  it('given a run whose attempt 1 was lost and retried, then it is one run back in the queue with its time kept, and attempt 2 adds to that time', () => {
    let entry = evolveUsageEntry(undefined, submitted('run_r', at(HOUR), 'nightly'), 1);
    entry = evolveUsageEntry(entry, decided('run_r', 2, at(HOUR), 'allow'), 2);
    entry = evolveUsageEntry(entry, receipt('sandbox.created', 'run_r', 4, at(50 * MIN), { caps: CAPS }), 3);
    entry = evolveUsageEntry(entry, receipt('run.retried', 'run_r', 7, at(40 * MIN), { attempt: 1, error_code: 'E_WORKER_LOST' }), 4);
    expect(entry).toMatchObject({ state: 'SUBMITTED', cpus: 2, memoryMiB: 576, startedAt: at(50 * MIN), endedAt: null });
    // In the queue: one run in flight, its 10 minutes counted and not growing while it waits.
    const queued = summariseUsage([entry!], 'nightly', NOW);
    expect(queued.tenant).toMatchObject({ concurrentRuns: 1, memoryMiB: 576, cpuSecondsToday: 2 * 600 });
    expect(queued.jobRuns).toEqual([{ runId: 'run_r', seconds: 600 }]);
    entry = evolveUsageEntry(entry, receipt('sandbox.created', 'run_r', 9, at(30 * MIN), { caps: CAPS }), 5);
    entry = evolveUsageEntry(entry, receipt('sandbox.destroyed', 'run_r', 11, at(20 * MIN)), 6);
    entry = evolveUsageEntry(entry, receipt('run.executed', 'run_r', 12, at(20 * MIN)), 7);
    expect(entry).toMatchObject({ state: 'EXECUTED', startedAt: at(50 * MIN), endedAt: at(20 * MIN) });
    // Every attempt's time and the wait between (the lost sandbox may run on until reaped): 30 minutes, never less than the 20 the two sandboxes ran.
    expect(summariseUsage([entry!], 'nightly', NOW).jobRuns).toEqual([{ runId: 'run_r', seconds: 1800 }]);
    expect(summariseUsage([entry!], undefined, NOW).tenant.concurrentRuns).toBe(0);
  });

  it('given a receipt of a chain it never saw start, or of another tenant, then it makes or changes nothing (fail closed: no guessed entry)', () => {
    expect(evolveUsageEntry(undefined, decided('run_x', 2, at(0), 'allow'), 5)).toBeUndefined();
    expect(evolveUsageEntry(undefined, receipt('run.submitted', 'sbx_x', 1, at(0), { spec: { name: 'x', steps: [] } }), 5)).toBeUndefined();
    const entry = evolveUsageEntry(undefined, submitted('run_t', at(0)), 1);
    expect(evolveUsageEntry(entry, receipt('run.cancelled', 'run_t', 2, at(0), {}, 'globex'), 2)).toBe(entry);
  });

  it('given an ended run, then a late receipt changes only its last time, never its state', () => {
    const ended = evolveUsageEntry(evolveUsageEntry(undefined, submitted('run_e', at(HOUR)), 1), receipt('run.cancelled', 'run_e', 2, at(HOUR)), 2);
    const sealed = evolveUsageEntry(ended, receipt('run.sealed', 'run_e', 3, at(30 * MIN), { final_state: 'CANCELLED' }), 3);
    expect(sealed).toMatchObject({ state: 'CANCELLED', updatedAt: at(30 * MIN) });
    expect(evolveUsageEntry(sealed, decided('run_e', 4, at(0), 'allow'), 4)).toMatchObject({ state: 'CANCELLED', cpus: null });
  });
});

describe('evolveUsageEntry: a sandbox session', () => {
  it('given a session asked for, allowed, created and destroyed, then it counts in flight until it is destroyed, with the caps it was created with', () => {
    let entry = evolveUsageEntry(undefined, requested('sbx_a', at(HOUR)), 3);
    expect(entry).toMatchObject({ kind: 'sandbox', state: 'SCHEDULED', job: null });
    entry = evolveUsageEntry(entry, decided('sbx_a', 2, at(HOUR), 'allow'), 4);
    entry = evolveUsageEntry(entry, receipt('sandbox.created', 'sbx_a', 3, at(50 * MIN), { caps: { ...CAPS, cpus: 1 } }), 5);
    expect(entry).toMatchObject({ state: 'RUNNING', cpus: 1, memoryMiB: 576, startedAt: at(50 * MIN) });
    entry = evolveUsageEntry(entry, receipt('sandbox.destroyed', 'sbx_a', 4, at(10 * MIN)), 6);
    expect(entry).toMatchObject({ state: 'SEALED', endedAt: null, updatedAt: at(10 * MIN) });
  });

  it('given a session that failed or was deleted before it started, then it no longer counts in flight', () => {
    const asked = evolveUsageEntry(undefined, requested('sbx_b', at(0)), 1);
    expect(evolveUsageEntry(asked, receipt('run.failed', 'sbx_b', 2, at(0), { error_code: 'E_SANDBOX_START' }), 2)).toMatchObject({ state: 'FAILED' });
    expect(evolveUsageEntry(asked, receipt('run.cancelled', 'sbx_b', 2, at(0)), 2)).toMatchObject({ state: 'SEALED' });
    expect(evolveUsageEntry(asked, decided('sbx_b', 2, at(0), 'deny'), 2)).toMatchObject({ state: 'REJECTED' });
  });
});

describe('UsageLedger', () => {
  const log = [
    submitted('run_1', at(2 * HOUR), 'nightly'),
    decided('run_1', 2, at(2 * HOUR), 'allow'),
    receipt('sandbox.created', 'run_1', 3, at(2 * HOUR), { caps: CAPS }),
    submitted('run_2', at(HOUR)),
    receipt('step.started', 'run_1', 4, at(HOUR)),
    submitted('run_other', at(HOUR), undefined, 'globex'),
    submitted('run_3', at(0), 'nightly'),
  ];

  it('given the log, then a run counts only the tenant runs first seen before it in stream order, and the position is the last message folded', () => {
    const ledger = ledgerOf(log);
    expect(ledger.throughStreamSeq).toBe(7);
    expect(ledger.entry('run_3')?.firstStreamSeq).toBe(7);
    expect(ledger.earlier('acme', 'nightly', 7, NOW).map((r) => r.runId).sort()).toEqual(['run_1', 'run_2']);
    expect(ledger.earlier('acme', 'nightly', 4, NOW).map((r) => r.runId)).toEqual(['run_1']);
    expect(ledger.earlier('globex', undefined, 7, NOW).map((r) => r.runId)).toEqual(['run_other']);
    const usage = summariseUsage(ledger.earlier('acme', 'nightly', 7, NOW), 'nightly', NOW);
    expect(usage.jobRuns).toEqual([{ runId: 'run_1', seconds: 7200 }]);
    expect(usage.tenant).toMatchObject({ concurrentRuns: 2, memoryMiB: 576, cpuSecondsToday: 14_400 });
  });

  it('given a message delivered again, or one not taken, then the ledger is as before but for the position', () => {
    const ledger = ledgerOf(log);
    ledger.fold(receipt('run.cancelled', 'run_2', 2, at(0)), 5);
    expect(ledger.entry('run_2')?.state).toBe('SUBMITTED');
    ledger.fold(null, 8);
    expect(ledger.throughStreamSeq).toBe(8);
    expect(ledger.size).toBe(4);
  });

  it('given the same log folded twice (a rebuild at boot), then both ledgers answer alike', () => {
    const a = ledgerOf(log);
    const b = ledgerOf(log);
    for (const tenant of ['acme', 'globex']) expect(b.earlier(tenant, 'nightly', 100, NOW)).toEqual(a.earlier(tenant, 'nightly', 100, NOW));
  });

  it('given entries that can never count again, then pruning drops only those: a job run, a run in flight and runs ended within the day stay', () => {
    const ledger = ledgerOf([
      submitted('run_old', at(3 * 24 * HOUR)),
      decided('run_old', 2, at(3 * 24 * HOUR), 'allow'),
      receipt('sandbox.created', 'run_old', 3, at(3 * 24 * HOUR), { caps: CAPS }),
      receipt('sandbox.destroyed', 'run_old', 4, at(2 * 24 * HOUR)),
      receipt('run.executed', 'run_old', 5, at(2 * 24 * HOUR)),
      submitted('run_rejected', at(HOUR)),
      decided('run_rejected', 2, at(HOUR), 'deny'),
      submitted('run_job', at(3 * 24 * HOUR), 'nightly'),
      receipt('run.cancelled', 'run_job', 2, at(3 * 24 * HOUR)),
      submitted('run_live', at(3 * 24 * HOUR)),
      submitted('run_recent', at(2 * HOUR)),
      receipt('run.cancelled', 'run_recent', 2, at(HOUR)),
    ]);
    expect(ledger.prune(NOW)).toBe(1);
    expect(['run_job', 'run_live', 'run_rejected', 'run_recent'].every((id) => ledger.entry(id) !== undefined)).toBe(true);
    expect(ledger.entry('run_old')).toBeUndefined();
  });

  it('given an entry in flight, a job run and one with sandbox time in the last day, then none is expired', () => {
    const base = { runId: 'run_z', kind: 'run' as const, tenant: 'acme', job: null, cpus: 1, memoryMiB: 1, endedAt: null, firstStreamSeq: 1 };
    expect(usageEntryExpired({ ...base, state: 'RUNNING', startedAt: at(3 * 24 * HOUR), updatedAt: at(3 * 24 * HOUR) }, NOW)).toBe(false);
    expect(usageEntryExpired({ ...base, job: 'j', state: 'SEALED', startedAt: null, updatedAt: at(3 * 24 * HOUR) }, NOW)).toBe(false);
    expect(usageEntryExpired({ ...base, state: 'SEALED', startedAt: at(25 * HOUR), updatedAt: at(23 * HOUR) }, NOW)).toBe(false);
    expect(usageEntryExpired({ ...base, state: 'SEALED', startedAt: at(26 * HOUR), updatedAt: at(25 * HOUR) }, NOW)).toBe(true);
    expect(usageEntryExpired({ ...base, state: 'REJECTED', startedAt: null, updatedAt: at(HOUR) }, NOW)).toBe(false);
    expect(usageEntryExpired({ ...base, state: 'REJECTED', startedAt: null, updatedAt: at(25 * HOUR) }, NOW)).toBe(true);
  });
});
