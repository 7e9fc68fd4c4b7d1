import { testNatsUrl, uniqueName } from '@cairn/testing';
import { grantLease } from '@cairn/scheduling';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bucketStreamName } from './kv-bucket.js';
import { LeaseStore } from './lease-store.adapter.js';
import type { LeaseRecord } from './lease-store.adapter.js';

let nc: NatsConnection;
let leases: LeaseStore;
const bucket = uniqueName('leases');

function lease(runId: string, workerId: string, now: number, ttlMs = 15_000): LeaseRecord {
  return { ...grantLease(runId, workerId, now, ttlMs), reservation: { runId, memoryMiB: 512, cpus: 1, diskMiB: 256 } };
}

beforeAll(async () => {
  nc = await connect({ servers: testNatsUrl() });
  leases = await LeaseStore.open(nc, { bucket });
});

afterAll(async () => {
  await (await jetstreamManager(nc)).streams.delete(bucketStreamName(bucket));
  await nc.close();
});

describe('LeaseStore on the real KV', () => {
  it('lists while leases are written and deleted concurrently, without stalling and without leaving consumers', async () => {
    const now = Date.now();
    const runs = Array.from({ length: 20 }, (_, i) => `run_list${i}`);
    const churn = runs.map(async (runId, i) => {
      await leases.put(lease(runId, 'w-list', now));
      if (i % 2 === 0) await leases.delete(runId);
    });
    const listings = Array.from({ length: 30 }, () => leases.list());
    await Promise.all([...churn, ...listings]);
    const listed = (await leases.list()).map((l) => l.run_id).filter((id) => id.startsWith('run_list'));
    expect(listed.sort()).toEqual(runs.filter((_, i) => i % 2 === 1).sort());
    // No consumer per listing: at most the one watch that keeps the store's mirror (bucket-mirror.ts).
    const info = await (await jetstreamManager(nc)).streams.info(bucketStreamName(bucket));
    expect(info.state.consumer_count).toBeLessThanOrEqual(1);
    for (const runId of runs) await leases.delete(runId);
  });

  it('creates a lease once: a second grant for the run gets the lease it already holds', async () => {
    const now = Date.now();
    const first = await leases.create(lease('run_one', 'w-1', now));
    const second = await leases.create(lease('run_one', 'w-2', now + 5));
    expect(first.created).toBe(true);
    expect(second).toEqual({ lease: first.lease, created: false });
    expect(await leases.get('run_one')).toEqual(first.lease);
  });

  it('renews only for the holder and never shortens; expiry is not judged on the renewer\'s clock (ADR 0033); a settled lease is gone', async () => {
    const now = Date.now();
    const held = (await leases.create(lease('run_renew', 'w-1', now, 10_000))).lease;
    const renewed = await leases.renew('run_renew', 'w-1', now + 30_000, now + 1000);
    expect(renewed.expires_at).toBe(new Date(now + 30_000).toISOString());
    expect((await leases.renew('run_renew', 'w-1', now + 20_000, now + 2000)).expires_at).toBe(renewed.expires_at);
    expect(await leases.get('run_renew')).toEqual({ ...held, expires_at: renewed.expires_at });
    await expect(leases.renew('run_renew', 'w-2', now + 60_000, now + 2000)).rejects.toMatchObject({ code: 'E_CONFLICT', details: { reason: 'not_holder' } });
    // Past the written expires_at by this caller's clock (a renewer 30 s ahead of the granter): renewed, the scheduler judges.
    expect((await leases.renew('run_renew', 'w-1', now + 90_000, now + 31_000)).expires_at).toBe(new Date(now + 90_000).toISOString());
    const settled = (await leases.create(lease('run_settled', 'w-1', now, 10_000))).lease;
    expect(await leases.delete('run_settled', settled.lease_id)).toBe(true);
    await expect(leases.renew('run_settled', 'w-1', now + 120_000)).rejects.toMatchObject({ code: 'E_NOT_FOUND' });
    await expect(leases.renew('run_nolease', 'w-1', now + 90_000)).rejects.toMatchObject({ code: 'E_NOT_FOUND' });
  });

  it('as an observer (observeTtlMs), judges a lease a TTL from when it first saw its current revision, whatever expires_at its writer wrote (ADR 0033)', async () => {
    const observer = await LeaseStore.open(nc, { bucket, observeTtlMs: 2000 });
    // Written by a worker a minute ahead: its expires_at says a minute more.
    await leases.put(lease('run_observed', 'w-ahead', Date.now() + 60_000, 4000));
    const first = Date.parse((await observer.get('run_observed'))!.expires_at);
    expect(first).toBeLessThanOrEqual(Date.now() + 2000);
    expect(first).toBeGreaterThan(Date.now() + 1000);
    await new Promise((resolve) => setTimeout(resolve, 300));
    // The same revision again: the same expiry (first seen then), not a fresh TTL.
    expect(Math.abs(Date.parse((await observer.get('run_observed'))!.expires_at) - first)).toBeLessThan(50);
    expect((await observer.list()).find((l) => l.run_id === 'run_observed')).toBeDefined();
    // A renewal is a new revision: seen now, a TTL from now.
    await leases.renew('run_observed', 'w-ahead', Date.now() + 120_000);
    expect(Date.parse((await observer.get('run_observed'))!.expires_at) - first).toBeGreaterThanOrEqual(250);
    // The writer's own store is not an observer: it reads what was written.
    expect(Date.parse((await leases.get('run_observed'))!.expires_at)).toBeGreaterThan(Date.now() + 100_000);
    await leases.delete('run_observed');
  });

  it('renews under compare-and-set: concurrent renewals all land on the latest revision', async () => {
    const now = Date.now();
    await leases.create(lease('run_cas', 'w-1', now, 10_000));
    const untils = [20_000, 50_000, 30_000, 40_000].map((d) => now + d);
    await Promise.all(untils.map((until) => leases.renew('run_cas', 'w-1', until, now)));
    expect((await leases.get('run_cas'))?.expires_at).toBe(new Date(now + 50_000).toISOString());
  });

  it('renews from the watched copy of a lease, and reads the bucket when that copy is behind another writer', async () => {
    // Another process's store: its own connection, closed with its watch at the end.
    const runtimeNc = await connect({ servers: testNatsUrl() });
    const runtime = await LeaseStore.open(runtimeNc, { bucket });
    try {
      const now = Date.now();
      await leases.create(lease('run_mirrored', 'w-1', now, 10_000));
      // The runtime's store follows the bucket once it has listed it.
      await expect.poll(async () => (await runtime.list()).some((l) => l.run_id === 'run_mirrored'), { timeout: 5000 }).toBe(true);
      const renewed = await runtime.renew('run_mirrored', 'w-1', now + 20_000, now);
      expect(renewed.expires_at).toBe(new Date(now + 20_000).toISOString());
      expect(runtime.renewedFromMirror).toBe(1);
      expect((await leases.get('run_mirrored'))?.expires_at).toBe(renewed.expires_at);

      // Another writer moves the lease on and the runtime renews at once, before its watch may have
      // delivered that write: the compare-and-set refuses the stale copy, and the renewal is judged
      // on the lease as stored — here no longer the runtime's.
      await leases.put(lease('run_mirrored', 'w-2', now, 60_000));
      await expect(runtime.renew('run_mirrored', 'w-1', now + 90_000, now)).rejects.toMatchObject({ code: 'E_CONFLICT', details: { reason: 'not_holder' } });
      expect((await leases.get('run_mirrored'))?.worker_id).toBe('w-2');
      // Held again by w-1 and renewed by a writer the runtime has not heard from: never shortened.
      await leases.put(lease('run_mirrored', 'w-1', now, 40_000));
      await leases.renew('run_mirrored', 'w-1', now + 70_000, now);
      expect((await runtime.renew('run_mirrored', 'w-1', now + 50_000, now)).expires_at).toBe(new Date(now + 70_000).toISOString());
    } finally {
      await runtimeNc.close();
    }
  });

  it('lists, replaces and deletes leases; a guarded delete spares another lease', async () => {
    const now = Date.now();
    await leases.put(lease('run_list', 'w-1', now));
    expect((await leases.list()).map((l) => l.run_id)).toEqual(expect.arrayContaining(['run_list', 'run_one', 'run_renew']));
    const replaced = await leases.put({ ...lease('run_list', 'w-3', now), attempt: 2, lease_id: 'lease_other_2' });
    expect((await leases.get('run_list'))?.worker_id).toBe('w-3');
    expect(await leases.delete('run_list', 'lease_not_this_one')).toBe(false);
    expect(await leases.delete('run_list', replaced.lease_id)).toBe(true);
    expect(await leases.get('run_list')).toBeNull();
    expect(await leases.delete('run_list')).toBe(false);
    expect((await leases.list()).map((l) => l.run_id)).not.toContain('run_list');
  });

  it('refuses a lease whose reservation is for another run', async () => {
    await expect(leases.put({ ...lease('run_a', 'w-1', Date.now()), reservation: { runId: 'run_b', memoryMiB: 1, cpus: 1, diskMiB: 1 } })).rejects.toMatchObject({
      code: 'E_INPUT',
    });
  });
});
