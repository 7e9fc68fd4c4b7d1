import { testNatsUrl, uniqueName } from '@cairn/testing';
import { jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import type { KV } from '@nats-io/kv';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BucketMirror } from './bucket-mirror.js';
import { bucketStreamName } from './kv-bucket.js';
import { LeaseStore } from './lease-store.adapter.js';

let nc: NatsConnection;
const buckets: string[] = [];

async function bucket(ttlMs = 60_000): Promise<KV> {
  const name = uniqueName('mirror');
  buckets.push(name);
  return new Kvm(nc).create(name, { history: 1, ttl: ttlMs });
}

const text = (entry: { string(): string }): string => entry.string();

/** Waits until `check` holds (the watch delivers asynchronously), or fails after `ms`. */
async function eventually(check: () => boolean, ms = 3_000): Promise<void> {
  const until = Date.now() + ms;
  while (!check()) {
    if (Date.now() > until) throw new Error('condition not met in time');
    await sleep(10);
  }
}

beforeAll(async () => {
  nc = await connect({ servers: testNatsUrl() });
});

afterAll(async () => {
  const jsm = await jetstreamManager(nc);
  for (const name of buckets) await jsm.streams.delete(bucketStreamName(name)).catch(() => false);
  await nc.close();
});

describe('BucketMirror on the real KV', () => {
  it('holds the bucket as it was, then follows other writers: puts, overwrites and deletes', async () => {
    const kv = await bucket();
    await kv.put('a', 'one');
    await kv.put('b', 'two');
    await kv.put('gone', 'x');
    await kv.delete('gone');
    const mirror = await BucketMirror.follow(kv, text);
    try {
      expect(mirror.live).toBe(true);
      expect(mirror.values()).toEqual(['one', 'two']);
      await kv.put('c', 'three');
      await kv.put('a', 'ONE');
      await kv.delete('b');
      await eventually(() => JSON.stringify(mirror.values()) === JSON.stringify(['ONE', 'three']));
    } finally {
      mirror.close();
    }
    expect(mirror.live).toBe(false);
    expect(mirror.values()).toBeNull();
  });

  it('starts on an empty bucket, and a late delivery never undoes a newer write of its owner', async () => {
    const kv = await bucket();
    const mirror = await BucketMirror.follow(kv, text);
    try {
      expect(mirror.values()).toEqual([]);
      const first = await kv.put('k', 'old');
      const second = await kv.put('k', 'new');
      mirror.apply('k', second, 'new');
      mirror.apply('k', first, 'old');
      expect(mirror.values()).toEqual(['new']);
      mirror.deleted('k');
      expect(mirror.values()).toEqual([]);
      // The delivery of the value just deleted arrives after the delete: still deleted.
      await sleep(100);
      expect(mirror.values()).toEqual([]);
    } finally {
      mirror.close();
    }
  });

  it('leaves out entries older than the bucket’s TTL, as the broker drops them without notice', async () => {
    const kv = await bucket(1_000);
    await kv.put('short', 'lived');
    const mirror = await BucketMirror.follow(kv, text);
    try {
      expect(mirror.values()).toEqual(['lived']);
      expect(mirror.values(Date.now() + 1_500)).toEqual([]);
    } finally {
      mirror.close();
    }
  });

  it('serves a store’s lists: another writer’s lease soon after, the store’s own writes and deletes at once', async () => {
    const name = uniqueName('mirror-leases');
    buckets.push(name);
    const store = await LeaseStore.open(nc, { bucket: name });
    const other = await LeaseStore.open(nc, { bucket: name });
    const record = (runId: string) => ({
      lease_id: `lease-${runId}`,
      run_id: runId,
      worker_id: 'w-mirror',
      attempt: 1,
      granted_at: new Date().toISOString(),
      expires_at: new Date(Date.now() + 60_000).toISOString(),
      reservation: { runId, memoryMiB: 64, cpus: 1, diskMiB: 8 },
    });
    expect(await store.list()).toEqual([]);
    // The mirror starts behind the first list; once it serves, another writer's lease shows up…
    await other.put(record('run_mirror_a'));
    let listed: string[] = [];
    const until = Date.now() + 3_000;
    while (Date.now() < until && !listed.includes('run_mirror_a')) {
      listed = (await store.list()).map((l) => l.run_id);
      await sleep(20);
    }
    expect(listed).toEqual(['run_mirror_a']);
    // …and its own write is listed at once.
    await store.put(record('run_mirror_b'));
    expect((await store.list()).map((l) => l.run_id)).toEqual(['run_mirror_a', 'run_mirror_b']);
    expect(await store.delete('run_mirror_b')).toBe(true);
    expect((await store.list()).map((l) => l.run_id)).toEqual(['run_mirror_a']);
  });
});
