import { isCairnError } from '@cairn/contracts';
import { testNatsUrl, uniqueName } from '@cairn/testing';
import { jetstreamManager } from '@nats-io/jetstream';
import type { JetStreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EvidenceLog } from './evidence-log.adapter.js';

// The evidence stream's replicas come from CAIRN_NATS_REPLICAS; on the machine's one-node server.
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

describe('the evidence stream and CAIRN_NATS_REPLICAS', () => {
  it('refuses a stream whose replicas differ from the setting, naming the stream and the setting', async () => {
    const options = { servers: testNatsUrl(), stream: uniqueName('EVREP'), subjectPrefix: uniqueName('evrep').toLowerCase() };
    made.push(options.stream);
    await EvidenceLog.fromConnection(nc, { ...options, replicas: 1 });
    expect((await jsm.streams.info(options.stream)).config.num_replicas).toBe(1);
    expect(await refusal(() => EvidenceLog.fromConnection(nc, { ...options, replicas: 3 }))).toBe(
      `stream ${options.stream} cannot hold evidence: num_replicas is 1, not the 3 CAIRN_NATS_REPLICAS asks for (scale it with \`nats stream edit ${options.stream} --replicas 3\`, or set CAIRN_NATS_REPLICAS=1)`,
    );
  });

  it('says a one-node server cannot hold three replicas, and creates no stream', async () => {
    const options = { servers: testNatsUrl(), stream: uniqueName('EVREP3'), subjectPrefix: uniqueName('evrep3').toLowerCase(), replicas: 3 };
    made.push(options.stream);
    expect(await refusal(() => EvidenceLog.fromConnection(nc, options))).toMatch(
      new RegExp(`^cannot create stream ${options.stream}: .*\\(CAIRN_NATS_REPLICAS is 3: the NATS server must be a JetStream cluster of at least 3 nodes, deploy/nats/cluster/\\)$`),
    );
    await expect(jsm.streams.info(options.stream)).rejects.toThrow(/stream not found/);
  });
});
