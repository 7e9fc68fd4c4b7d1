import { testNatsUrl, uniqueName } from '@cairn/testing';
import { jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bucketStreamName } from './kv-bucket.js';
import { WorkerDrains, withDrains } from './worker-drains.adapter.js';
import type { RegisteredWorker } from './worker-record.schema.js';

let nc: NatsConnection;
const bucket = uniqueName('drains');

function worker(workerId: string, draining = false): RegisteredWorker {
  return { workerId, capacity: { slots: 2, memoryMiB: 1024, cpus: 1, diskMiB: 1024 }, isolation: ['docker'], draining, healthy: true, lastHeartbeatAt: 1, inFlight: [], images: {} };
}

beforeAll(async () => {
  nc = await connect({ servers: testNatsUrl() });
});

afterAll(async () => {
  await (await jetstreamManager(nc)).streams.delete(bucketStreamName(bucket)).catch(() => false);
  await nc.close();
});

describe('WorkerDrains on the real KV', () => {
  it('keeps a drain with no TTL until it is lifted, seen by a second process; the first drain of a worker stays', async () => {
    const gateway = await WorkerDrains.open(nc, { bucket });
    const status = await new Kvm(nc).open(bucket).then((kv) => kv.status());
    expect(status.ttl).toBe(0);
    expect(await gateway.drain({ workerId: 'w-a', drainedAt: 1000, by: 'key:one' })).toEqual({ workerId: 'w-a', drainedAt: 1000, by: 'key:one' });
    // Drained again: the first mark stays.
    expect(await gateway.drain({ workerId: 'w-a', drainedAt: 2000, by: 'key:two' })).toMatchObject({ drainedAt: 1000, by: 'key:one' });

    // Another process (the scheduler) opening the same bucket sees it, by mirror or by keys.
    const scheduler = await WorkerDrains.open(nc, { bucket });
    expect([...(await scheduler.list()).keys()]).toEqual(['w-a']);
    const workers = withDrains([worker('w-a'), worker('w-b'), worker('w-c', true)], await scheduler.list());
    expect(workers.map((w) => [w.workerId, w.draining])).toEqual([
      ['w-a', true],
      ['w-b', false],
      ['w-c', true],
    ]);

    expect(await gateway.undrain('w-a')).toBe(true);
    expect(await gateway.undrain('w-a')).toBe(false);
    expect(await scheduler.get('w-a')).toBeNull();
    // Drained again after it was lifted: a new drain, with its own time and actor.
    expect(await gateway.drain({ workerId: 'w-a', drainedAt: 3000, by: 'key:three' })).toMatchObject({ drainedAt: 3000, by: 'key:three' });
    expect(await gateway.undrain('w-a')).toBe(true);
    // Bad ids are no drains, and a bad drain is refused.
    expect(await scheduler.get('../x')).toBeNull();
    await expect(gateway.drain({ workerId: 'bad id', drainedAt: 1, by: 'key:x' })).rejects.toMatchObject({ code: 'E_INPUT' });

    // A burst of drains of one worker from two processes at once: one is set, every answer is that one.
    const answers = await Promise.all(Array.from({ length: 8 }, (_, i) => (i % 2 === 0 ? gateway : scheduler).drain({ workerId: 'w-burst', drainedAt: 5000 + i, by: `key:k${i}` })));
    const kept = await scheduler.get('w-burst');
    expect(kept).not.toBeNull();
    for (const answer of answers) expect(answer).toEqual(kept);
    gateway.close();
    scheduler.close();
  });
});
