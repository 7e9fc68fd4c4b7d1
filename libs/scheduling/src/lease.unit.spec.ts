import { isCairnError, LeaseIdSchema, RunScheduledSchema } from '@cairn/contracts';
import { describe, expect, it } from 'vitest';
import { grantLease, isExpired, leaseId, renewLease } from './lease.js';

const NOW = Date.parse('2026-11-30T12:00:00.000Z');
const TTL = 30_000;

describe('grantLease', () => {
  it('given a run and a worker, when a lease is granted, then it expires after the TTL and is attempt 1', () => {
    const lease = grantLease('run_abc', 'w-1', NOW, TTL);
    expect(lease).toEqual({
      lease_id: leaseId('run_abc', 1),
      run_id: 'run_abc',
      worker_id: 'w-1',
      attempt: 1,
      granted_at: '2026-11-30T12:00:00.000Z',
      expires_at: '2026-11-30T12:00:30.000Z',
    });
  });

  it('given the same run and attempt, when granted twice (a retried grant), then the lease id is the same; another attempt differs', () => {
    expect(grantLease('run_abc', 'w-1', NOW, TTL).lease_id).toBe(grantLease('run_abc', 'w-2', NOW + 5, TTL).lease_id);
    expect(leaseId('run_abc', 1)).not.toBe(leaseId('run_abc', 2));
    expect(leaseId('run_abc', 1)).not.toBe(leaseId('run_abd', 1));
  });

  it('given the longest run id allowed, when a lease is granted, then its id still fits the run.scheduled receipt', () => {
    const runId = `run_${'a'.repeat(96)}`;
    const lease = grantLease(runId, 'w-1', NOW, TTL, 123_456);
    expect(LeaseIdSchema.safeParse(lease.lease_id).success).toBe(true);
    const receipt = {
      v: 1,
      seq: 3,
      run_id: runId,
      tenant: 'default',
      type: 'run.scheduled',
      actor: 'scheduler',
      ts: lease.granted_at,
      causation: `${runId}:2`,
      worker_id: lease.worker_id,
      lease_id: lease.lease_id,
      lease_expires_at: lease.expires_at,
      attempt: lease.attempt,
    };
    expect(RunScheduledSchema.safeParse(receipt).error?.issues ?? []).toEqual([]);
  });

  it.each([
    ['a bad run id', () => grantLease('RUN abc', 'w', NOW, TTL)],
    ['attempt 0', () => grantLease('run_abc', 'w', NOW, TTL, 0)],
    ['a zero TTL', () => grantLease('run_abc', 'w', NOW, 0)],
    ['a time that is not one', () => grantLease('run_abc', 'w', Number.NaN, TTL)],
  ])('given %s, when a lease is granted, then it throws E_INTERNAL', (_what, grant) => {
    let thrown: unknown;
    try {
      grant();
    } catch (error) {
      thrown = error;
    }
    expect(isCairnError(thrown) && thrown.code).toBe('E_INTERNAL');
  });
});

describe('isExpired and renewLease', () => {
  const lease = grantLease('run_abc', 'w-1', NOW, TTL);

  it('given a lease, when checked a millisecond before and at its expiry, then it is live and then expired', () => {
    expect(isExpired(lease, NOW + TTL - 1)).toBe(false);
    expect(isExpired(lease, NOW + TTL)).toBe(true);
  });

  it('given a lease with an unreadable expiry, when checked, then it is expired (fail closed)', () => {
    expect(isExpired({ ...lease, expires_at: 'soon' }, NOW)).toBe(true);
  });

  it('given a live lease, when its worker renews it, then it expires a TTL from now', () => {
    expect(renewLease(lease, 'w-1', NOW + 20_000, TTL)).toEqual({ ok: true, lease: { ...lease, expires_at: '2026-11-30T12:00:50.000Z' } });
  });

  it('given a live lease, when renewed with a shorter TTL, then it never moves its expiry back', () => {
    const renewed = renewLease(lease, 'w-1', NOW + 1000, 1000);
    expect(renewed.ok && renewed.lease.expires_at).toBe(lease.expires_at);
  });

  it('given an expired lease, when its worker tries to renew it, then it is refused: a lost lease is never revived', () => {
    expect(renewLease(lease, 'w-1', NOW + TTL, TTL)).toEqual({ ok: false, reason: 'expired' });
  });

  it('given a lease, when another worker tries to renew it, then it is refused', () => {
    expect(renewLease(lease, 'w-2', NOW, TTL)).toEqual({ ok: false, reason: 'not_holder' });
  });
});
