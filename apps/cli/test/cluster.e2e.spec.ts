import { isolatedNames, queueBucketFor } from '@cairn/config';
import { checkStack, formatReport, INVARIANTS, scenarioClock } from '@cairn/fault-testing';
import { bucketStreamName } from '@cairn/operational';
import { startNatsServers, testDatabaseUrl } from '@cairn/testing';
import type { NatsServers } from '@cairn/testing';
import { DeliverPolicy, jetstreamManager, PubHeaders } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestStack } from './stack.harness.js';

/*
 * A stack on a three-node NATS cluster of the test's own (loopback, free ports, temp stores, the
 * pinned nats-server with the deployed sync policy), every stream and bucket at three replicas
 * (CAIRN_NATS_REPLICAS=3). Runs in flight when the evidence stream's leader is killed -9 seal, their
 * chains verify, no receipt is lost or doubled, and the killed node comes back and catches up.
 */

const RUNS = 4;
const SMALL = { wallSeconds: 30, memoryMiB: 32, pids: 32, diskMiB: 8, cpus: 0.5 };

let cluster: NatsServers;
let stack: TestStack;

beforeAll(async () => {
  cluster = await startNatsServers({ label: 'cairn-r3' });
  stack = await TestStack.create('cluster', { CAIRN_NATS_URL: cluster.urls, CAIRN_NATS_REPLICAS: '3' });
  await stack.up();
});

afterAll(async () => {
  await stack?.dispose();
  await cluster?.stop();
});

interface StoredMessage {
  /** The receipt's chain (its `run_id`): whatever the subject layout, the body names it. */
  chainId: string;
  /** The receipt's chain seq. */
  chainSeq: number;
  msgId: string;
}

/** Every message of the stream, read from its first with an ordered consumer. */
async function readStream(stream: string): Promise<StoredMessage[]> {
  const nc = await connect({ servers: cluster.urls.split(',') });
  try {
    const jsm = await jetstreamManager(nc);
    const last = (await jsm.streams.info(stream)).state.last_seq;
    const consumer = await jsm.jetstream().consumers.get(stream, { deliver_policy: DeliverPolicy.All });
    const out: StoredMessage[] = [];
    const messages = await consumer.consume();
    for await (const m of messages) {
      const body = m.json<{ run_id: string; seq: number }>();
      out.push({ chainId: body.run_id, chainSeq: body.seq, msgId: m.headers?.get(PubHeaders.MsgIdHdr) ?? '' });
      if (m.seq >= last) break;
    }
    await messages.close();
    return out;
  } finally {
    await nc.close();
  }
}

describe('a stack on a three-node NATS cluster', () => {
  it('keeps every stream and bucket at three replicas', async () => {
    const nc = await connect({ servers: cluster.urls.split(',') });
    try {
      const jsm = await jetstreamManager(nc);
      const names = stack.names;
      for (const stream of [names.evidenceStream, names.commandStream, bucketStreamName(names.workersBucket), bucketStreamName(names.leasesBucket)]) {
        const info = await jsm.streams.info(stream);
        expect(info.config.num_replicas, stream).toBe(3);
        expect(info.cluster?.replicas, stream).toHaveLength(2);
      }
    } finally {
      await nc.close();
    }
  });

  it('runs in flight survive kill -9 of the evidence stream leader: they seal, verify, lose and double nothing; the node catches up', async () => {
    const spec = (i: number) => ({
      name: `cluster run ${i}`,
      image: 'cairn/sandbox-busybox:1',
      network: 'none',
      caps: SMALL,
      // The first step is long enough that, on a loaded machine, the last run starts its step before
      // the first has finished them all (3 s was not: CI saw a run executed before another started).
      steps: [{ argv: ['sleep', '8'] }, { argv: ['echo', `one ${i}`] }, { argv: ['sleep', '3'] }, { argv: ['echo', `two ${i}`] }],
      checks: [{ id: 'says-two', source: 'steps[3].stdout', op: 'contains', value: `two ${i}`, weight: 1 }],
    });
    const clock = scenarioClock();
    // Submitted together, so all four are in their steps at once.
    const runIds = await Promise.all(
      Array.from({ length: RUNS }, async (_, i) => {
        const response = await stack.api('/v1/runs', {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'idempotency-key': `cluster-${i}-${Date.now()}` },
          body: JSON.stringify(spec(i)),
        });
        expect(response.status).toBe(202);
        return ((await response.json()) as { runId: string }).runId;
      }),
    );
    // In flight: every run has started a step, and none has failed. On a loaded machine (CI runs
    // two e2e files at once) the runs start seconds apart, and the first may have finished its
    // steps by the time the last starts: at least two still in their steps is what the kill needs.
    const deadline = Date.now() + 60_000;
    let inFlight = 0;
    for (;;) {
      const types = await Promise.all(runIds.map((id) => stack.types(id)));
      expect(types.some((t) => t.includes('run.failed'))).toBe(false);
      inFlight = types.filter((t) => t.includes('step.started') && !t.includes('run.executed')).length;
      if (types.every((t) => t.includes('step.started'))) break;
      if (Date.now() > deadline) throw new Error(`the runs did not all start a step:\n${await stack.logs()}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(inFlight).toBeGreaterThanOrEqual(2);

    const stream = stack.names.evidenceStream;
    const before = await cluster.streamPlacement(stream);
    expect(before?.leader).toBeTruthy();
    const victim = cluster.node(before!.leader!);
    await victim.kill('SIGKILL');

    for (const runId of runIds) {
      const sealed = await stack.waitForRun(runId, (run) => run.sealed, 90_000);
      expect(sealed, runId).toMatchObject({ state: 'SEALED', errorCode: null, score: 1, maxScore: 1 });
    }
    // Another node leads the stream now.
    const after = await cluster.streamPlacement(stream);
    expect(after?.leader).toBeTruthy();
    expect(after?.leader).not.toBe(victim.name);

    await victim.start();
    const caughtUp = Date.now() + 60_000;
    for (;;) {
      const placement = await cluster.streamPlacement(stream);
      const replica = placement?.replicas.find((r) => r.name === victim.name);
      if (replica?.current === true && replica.lag === 0 && !replica.offline) break;
      if (Date.now() > caughtUp) throw new Error(`${victim.name} did not catch up on ${stream}: ${JSON.stringify(placement)}\n${await cluster.logTail(victim.name)}`);
      await new Promise((resolve) => setTimeout(resolve, 250));
    }

    // Nothing lost or doubled: each chain is seqs 1..n exactly once, each message id once, and the
    // projection counted the same receipts; the chain exports and verifies offline.
    const messages = await readStream(stream);
    expect(new Set(messages.map((m) => m.msgId)).size).toBe(messages.length);
    for (const runId of runIds) {
      const chain = messages.filter((m) => m.chainId === runId);
      expect(chain.map((m) => m.chainSeq), runId).toEqual(Array.from({ length: chain.length }, (_, i) => i + 1));
      const types = await stack.types(runId);
      expect(types.length, runId).toBe(chain.length);
      expect(types.filter((t) => t === 'run.sealed')).toHaveLength(1);
      expect((await stack.getRun(runId)).eventCount).toBe(chain.length);
      await stack.expectCleanAndVerifiable(runId);
    }

    // The fault suite's checker over everything the stack holds (docs/testing.md, the fault matrix).
    const nc = await connect({ servers: cluster.urls.split(',') });
    try {
      const names = stack.names;
      const report = await checkStack(
        {
          nc,
          natsUrl: cluster.urls,
          replicas: 3,
          evidenceStream: stream,
          subjectPrefix: isolatedNames(stack.stackId).CAIRN_EVIDENCE_SUBJECT_PREFIX,
          workerIds: [names.workerId],
          warmPoolLive: true,
          leasesBucket: names.leasesBucket,
          queueBucket: queueBucketFor(names.leasesBucket),
          databaseUrl: stack.database.url,
          databaseServerUrl: testDatabaseUrl(),
        },
        { acknowledged: runIds, mustEnd: runIds },
        clock,
      );
      console.log(formatReport(report));
      for (const invariant of INVARIANTS) expect(report.invariants[invariant], formatReport(report)).toMatchObject({ checked: true, ok: true });
    } finally {
      await nc.close();
    }
  });
});
