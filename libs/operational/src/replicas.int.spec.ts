import { isCairnError } from '@cairn/contracts';
import { testNatsUrl, uniqueName } from '@cairn/testing';
import { jetstreamManager } from '@nats-io/jetstream';
import type { JetStreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CommandBus } from './command-bus.adapter.js';
import { bucketStreamName } from './kv-bucket.js';
import { LeaseStore } from './lease-store.adapter.js';
import { WorkerRegistry } from './worker-registry.adapter.js';

// CAIRN_NATS_REPLICAS on the machine's one-node server: what exists with other replicas is refused,
// naming the setting; what cannot be placed says the server must be a cluster. Nothing is made.
let nc: NatsConnection;
let jsm: JetStreamManager;
const made: string[] = [];

beforeAll(async () => {
  nc = await connect({ servers: testNatsUrl() });
  jsm = await jetstreamManager(nc);
});

afterAll(async () => {
  for (const stream of made) await jsm.streams.delete(stream).catch(() => false);
  await nc.close();
});

async function refusal(open: () => Promise<unknown>): Promise<string> {
  try {
    await open();
  } catch (error) {
    if (isCairnError(error) && error.code === 'E_UNAVAILABLE') return error.message;
    throw error;
  }
  throw new Error('opened');
}

async function exists(stream: string): Promise<boolean> {
  return jsm.streams.info(stream).then(
    () => true,
    () => false,
  );
}

describe('replicas of the operational streams and buckets', () => {
  it('creates buckets and the command stream with the replicas asked for, and refuses them opened with others', async () => {
    const workers = uniqueName('workers_r');
    const leases = uniqueName('leases_r');
    const commands = uniqueName('CMD_R');
    made.push(bucketStreamName(workers), bucketStreamName(leases), commands);
    await WorkerRegistry.open(nc, { bucket: workers, replicas: 1 });
    await LeaseStore.open(nc, { bucket: leases, replicas: 1 });
    await CommandBus.open(nc, { stream: commands, subjectPrefix: uniqueName('cmdr').toLowerCase(), replicas: 1 });
    expect((await jsm.streams.info(bucketStreamName(workers))).config.num_replicas).toBe(1);

    expect(await refusal(() => WorkerRegistry.open(nc, { bucket: workers, replicas: 3 }))).toBe(
      `KV bucket ${workers}: num_replicas is 1, not the 3 CAIRN_NATS_REPLICAS asks for (scale it with \`nats stream edit KV_${workers} --replicas 3\`, or set CAIRN_NATS_REPLICAS=1)`,
    );
    expect(await refusal(() => LeaseStore.open(nc, { bucket: leases, replicas: 3 }))).toContain('CAIRN_NATS_REPLICAS');
    const onCommands = await refusal(() => CommandBus.open(nc, { stream: commands, replicas: 3 }));
    expect(onCommands).toContain(`stream ${commands} cannot carry commands: `);
    expect(onCommands).toContain('num_replicas is 1, not the 3 CAIRN_NATS_REPLICAS asks for');
  });

  it('says a one-node server cannot hold three replicas, and creates nothing', async () => {
    const bucket = uniqueName('workers_r3');
    const stream = uniqueName('CMD_R3');
    made.push(bucketStreamName(bucket), stream);
    expect(await refusal(() => WorkerRegistry.open(nc, { bucket, replicas: 3 }))).toMatch(
      new RegExp(`^cannot create the KV bucket ${bucket}: .*\\(CAIRN_NATS_REPLICAS is 3: the NATS server must be a JetStream cluster of at least 3 nodes, deploy/nats/cluster/\\)$`),
    );
    expect(await refusal(() => CommandBus.open(nc, { stream, subjectPrefix: uniqueName('cmdr3').toLowerCase(), replicas: 3 }))).toContain(
      '(CAIRN_NATS_REPLICAS is 3: the NATS server must be a JetStream cluster of at least 3 nodes',
    );
    expect(await exists(bucketStreamName(bucket))).toBe(false);
    expect(await exists(stream)).toBe(false);
  });
});
