import { testNatsUrl, uniqueName } from '@cairn/testing';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bucketStreamName } from './kv-bucket.js';
import type { RegisteredWorker } from './worker-record.schema.js';
import { WorkerRegistry } from './worker-registry.adapter.js';

let nc: NatsConnection;
let registry: WorkerRegistry;
const bucket = uniqueName('workers');
const DIGEST = `sha256:${'a'.repeat(64)}`;

function worker(workerId: string, at: number, overrides: Partial<RegisteredWorker> = {}): RegisteredWorker {
  return {
    workerId,
    capacity: { slots: 4, memoryMiB: 8192, cpus: 4, diskMiB: 16384 },
    isolation: ['docker'],
    draining: false,
    healthy: true,
    lastHeartbeatAt: at,
    inFlight: [],
    images: { 'cairn/sandbox-busybox:1': DIGEST },
    ...overrides,
  };
}

beforeAll(async () => {
  nc = await connect({ servers: testNatsUrl() });
  registry = await WorkerRegistry.open(nc, { bucket, ttlMs: 60_000 });
});

afterAll(async () => {
  await (await jetstreamManager(nc)).streams.delete(bucketStreamName(bucket));
  await nc.close();
});

describe('WorkerRegistry on the real KV', () => {
  it('keeps the bucket bounded (TTL, one value per key)', async () => {
    const info = await (await jetstreamManager(nc)).streams.info(bucketStreamName(bucket));
    expect(info.config.max_age).toBe(60_000 * 1_000_000);
    expect(info.config.max_msgs_per_subject).toBe(1);
    expect(info.config.max_bytes).toBeGreaterThan(0);
  });

  it('registers, lists and gets workers', async () => {
    await registry.register(worker('w-b', 1000));
    await registry.register(worker('w-a', 1000));
    expect((await registry.list()).map((w) => w.workerId)).toEqual(['w-a', 'w-b']);
    expect(await registry.get('w-a')).toEqual(worker('w-a', 1000));
    expect(await registry.get('w-nobody')).toBeNull();
    expect(await registry.get('NOT A TOKEN')).toBeNull();
  });

  it('takes heartbeats, keeps an operator drain, ignores a late heartbeat and refuses a capacity change', async () => {
    await registry.register(worker('w-hb', 1000));
    await registry.markDraining('w-hb');
    const beat = await registry.heartbeat(worker('w-hb', 2000, { inFlight: [{ runId: 'run_x', memoryMiB: 512, cpus: 1, diskMiB: 256 }] }));
    expect(beat).toMatchObject({ lastHeartbeatAt: 2000, draining: true, inFlight: [{ runId: 'run_x' }] });
    expect(await registry.heartbeat(worker('w-hb', 1500))).toMatchObject({ lastHeartbeatAt: 2000 });
    await expect(registry.heartbeat(worker('w-hb', 3000, { capacity: { slots: 64, memoryMiB: 8192, cpus: 4, diskMiB: 16384 } }))).rejects.toMatchObject({
      code: 'E_CONFLICT',
    });
    expect((await registry.get('w-hb'))?.capacity.slots).toBe(4);
  });

  it('re-registers a worker from its heartbeat once its key is gone, and forgets it on deregister', async () => {
    await registry.heartbeat(worker('w-new', 5000));
    expect(await registry.get('w-new')).toMatchObject({ lastHeartbeatAt: 5000 });
    expect(await registry.deregister('w-new')).toBe(true);
    expect(await registry.get('w-new')).toBeNull();
    expect(await registry.deregister('w-new')).toBe(false);
    await registry.heartbeat(worker('w-new', 6000));
    expect(await registry.get('w-new')).toMatchObject({ lastHeartbeatAt: 6000 });
  });

  it('refuses invalid records and unknown workers', async () => {
    await expect(registry.register(worker('w-bad', 1, { images: { 'x@sha256:00': 'nope' } }))).rejects.toMatchObject({ code: 'E_INPUT' });
    await expect(registry.markDraining('w-ghost')).rejects.toMatchObject({ code: 'E_NOT_FOUND' });
  });

  it('serialises concurrent heartbeats with compare-and-set', async () => {
    await registry.register(worker('w-race', 0));
    await Promise.all(Array.from({ length: 6 }, (_, i) => registry.heartbeat(worker('w-race', 100 + i))));
    expect((await registry.get('w-race'))?.lastHeartbeatAt).toBe(105);
  });
});
