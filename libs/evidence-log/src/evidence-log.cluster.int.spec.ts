import { verifyChain } from '@cairn/evidence';
import { startNatsServers, uniqueName } from '@cairn/testing';
import type { NatsServers } from '@cairn/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AppendInput } from './append-body.builder.js';
import { EvidenceLog } from './evidence-log.adapter.js';

// Three nats-server processes of the test's own on loopback; the stream at R3. Appends (one at a time
// and atomic batches) keep going on several chains while the stream's leader is killed -9.
let cluster: NatsServers;
let log: EvidenceLog;
const stream = uniqueName('EVCLUSTER');

beforeAll(async () => {
  cluster = await startNatsServers({ label: uniqueName('evcluster').toLowerCase() });
  log = await EvidenceLog.connect({ servers: cluster.urls, stream, subjectPrefix: uniqueName('evcluster').toLowerCase(), replicas: 3 });
}, 60_000);

afterAll(async () => {
  await log?.close();
  await cluster?.stop();
});

function event(key: string, type: AppendInput['type'] = 'step.completed'): AppendInput {
  return { type, actor: 'runtime', tenant: 'default', causation: null, key, fields: { tag: key } };
}

async function collect<T>(items: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of items) out.push(item);
  return out;
}

describe('appends across the stream leader killed -9', () => {
  it('every append and batch lands once, in order, and the killed node catches up', async () => {
    const chains = Array.from({ length: 4 }, (_, i) => uniqueName(`run_c${i}`).toLowerCase());
    let killed = false;
    let afterKill = 0;
    const errors: unknown[] = [];
    // Each chain alternates a single append with a batch of three, until 30 receipts land after the kill.
    const writer = async (chainId: string): Promise<number> => {
      let written = 0;
      for (let round = 0; !killed || afterKill < 30 * chains.length; round += 1) {
        try {
          if (round % 2 === 0) {
            await log.append(chainId, event(`${chainId}:${round}`, 'step.started'));
            written += 1;
            if (killed) afterKill += 1;
          } else {
            await log.appendBatch(chainId, [0, 1, 2].map((j) => event(`${chainId}:${round}:${j}`)));
            written += 3;
            if (killed) afterKill += 3;
          }
        } catch (error) {
          errors.push(error);
          return written;
        }
        if (round > 2000) throw new Error('the writers never saw the kill');
      }
      return written;
    };
    const writers = chains.map((chainId) => writer(chainId));
    await new Promise((resolve) => setTimeout(resolve, 1000));

    const before = await cluster.streamPlacement(stream);
    expect(before?.leader).toBeTruthy();
    const victim = cluster.node(before!.leader!);
    await victim.kill('SIGKILL');
    killed = true;
    const written = await Promise.all(writers);
    expect(errors).toEqual([]);

    const after = await cluster.streamPlacement(stream);
    expect(after?.leader).toBeTruthy();
    expect(after?.leader).not.toBe(victim.name);

    for (const [i, chainId] of chains.entries()) {
      const chain = (await collect(log.readChain(chainId))).map((stored) => stored.receipt);
      expect(verifyChain(chain, { chainId, requireNonEmpty: true })).toMatchObject({ ok: true, count: written[i] });
      // Nothing doubled: each key (one per append) once, batches whole and in order.
      const keys = chain.map((r) => (r as unknown as { tag: string }).tag);
      expect(new Set(keys).size).toBe(keys.length);
    }

    await victim.start();
    const deadline = Date.now() + 60_000;
    for (;;) {
      const placement = await cluster.streamPlacement(stream);
      const replica = placement?.replicas.find((r) => r.name === victim.name);
      if (replica?.current === true && replica.lag === 0 && !replica.offline) break;
      if (Date.now() > deadline) throw new Error(`${victim.name} did not catch up on ${stream}: ${JSON.stringify(placement)}\n${await cluster.logTail(victim.name)}`);
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }, 120_000);
});
