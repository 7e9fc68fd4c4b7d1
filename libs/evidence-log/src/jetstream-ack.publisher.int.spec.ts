import { testNatsUrl, uniqueName } from '@cairn/testing';
import { jetstreamManager } from '@nats-io/jetstream';
import type { JetStreamManager } from '@nats-io/jetstream';
import { connect, headers } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JetStreamAckPublisher } from './jetstream-ack.publisher.js';

let nc: NatsConnection;
let jsm: JetStreamManager;
const stream = uniqueName('ACKPUB');
const prefix = uniqueName('ackpub');
const data = new TextEncoder().encode('{"x":1}');

beforeAll(async () => {
  nc = await connect({ servers: testNatsUrl() });
  jsm = await jetstreamManager(nc);
  await jsm.streams.add({ name: stream, subjects: [`${prefix}.>`], storage: 'memory', allow_direct: true });
});

afterAll(async () => {
  await jsm.streams.delete(stream).catch(() => false);
  await nc.close();
});

describe('JetStreamAckPublisher on JetStream', () => {
  it('stores, deduplicates by message id, and reports a failed expectation', async () => {
    const publisher = new JetStreamAckPublisher(nc, 5_000);
    const h = () => {
      const hdrs = headers();
      hdrs.set('Nats-Msg-Id', 'one');
      hdrs.set('Nats-Expected-Last-Subject-Sequence', '0');
      return hdrs;
    };
    const first = await publisher.publish(`${prefix}.a`, data, h());
    expect(first).toEqual({ kind: 'stored', stream, seq: 1, duplicate: false });
    // A current single server (2.15) checks the expectation before the duplicate window: a retry that still
    // expects the old head is refused, one that expects the head as it is now is found a duplicate.
    expect(await publisher.publish(`${prefix}.a`, data, h())).toMatchObject({ kind: 'rejected', errCode: 10071 });
    const current = headers();
    current.set('Nats-Msg-Id', 'one');
    current.set('Nats-Expected-Last-Subject-Sequence', '1');
    expect(await publisher.publish(`${prefix}.a`, data, current)).toEqual({ kind: 'stored', stream, seq: 1, duplicate: true });
    // A duplicate probe (an expected last message id nothing has) answers from the window and stores nothing.
    const probe = (id: string) => {
      const hdrs = headers();
      hdrs.set('Nats-Msg-Id', id);
      hdrs.set('Nats-Expected-Last-Msg-Id', 'cairn-duplicate-probe');
      return hdrs;
    };
    expect(await publisher.publish(`${prefix}.a`, data, probe('one'))).toEqual({ kind: 'stored', stream, seq: 1, duplicate: true });
    expect(await publisher.publish(`${prefix}.a`, data, probe('never-stored'))).toMatchObject({ kind: 'rejected', errCode: 10070 });
    expect((await jsm.streams.info(stream)).state.messages).toBe(1);
    const stale = headers();
    stale.set('Nats-Expected-Last-Subject-Sequence', '0');
    expect(await publisher.publish(`${prefix}.a`, data, stale)).toMatchObject({ kind: 'rejected', errCode: 10071 });
    // Many in flight at once each get their own ack.
    const many = await Promise.all(Array.from({ length: 200 }, (_, i) => publisher.publish(`${prefix}.b${i % 7}`, data, headers())));
    expect(new Set(many.map((o) => (o.kind === 'stored' ? o.seq : -1))).size).toBe(200);
    expect(publisher.inFlight).toBe(0);
    publisher.close();
  });

  it('reports no responders when no stream captures the subject', async () => {
    const publisher = new JetStreamAckPublisher(nc, 5_000);
    expect(await publisher.publish(uniqueName('nostream'), data, headers())).toEqual({ kind: 'no_responders' });
    publisher.close();
  });

  it('times out an ack that never comes, and settles what is in flight on close', async () => {
    const silent = uniqueName('silent');
    const listener = nc.subscribe(silent); // hears the publish, never answers
    const publisher = new JetStreamAckPublisher(nc, 200);
    const started = Date.now();
    expect(await publisher.publish(silent, data, headers())).toEqual({ kind: 'timeout' });
    expect(Date.now() - started).toBeGreaterThanOrEqual(190);
    const slow = new JetStreamAckPublisher(nc, 60_000);
    const pending = slow.publish(silent, data, headers());
    slow.close();
    expect(await pending).toMatchObject({ kind: 'closed' });
    expect(await slow.publish(silent, data, headers())).toMatchObject({ kind: 'closed' });
    publisher.close();
    listener.unsubscribe();
  });
});
