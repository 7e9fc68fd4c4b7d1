import { isCairnError } from '@cairn/contracts';
import { verifyChain } from '@cairn/evidence';
import { testNatsUrl, uniqueName } from '@cairn/testing';
import { jetstreamManager } from '@nats-io/jetstream';
import type { JetStreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AppendInput } from './append-body.builder.js';
import { EvidenceLog } from './evidence-log.adapter.js';
import type { StoredReceipt } from './evidence-log.adapter.js';
import type { EvidenceLogOptions } from './evidence-log.options.js';
import { isHeadMoved } from './head-guard.js';

// Guarded appends (`expectedHeadSeq`) on the real nats-server. One stream per file, a chain per test.
let admin: NatsConnection;
let jsm: JetStreamManager;
let options: EvidenceLogOptions;
const logs: EvidenceLog[] = [];

beforeAll(async () => {
  admin = await connect({ servers: testNatsUrl() });
  jsm = await jetstreamManager(admin);
  options = { servers: testNatsUrl(), stream: uniqueName('EVGUARD'), subjectPrefix: uniqueName('evguard') };
});

afterAll(async () => {
  await Promise.allSettled(logs.map((log) => log.close()));
  await jsm.streams.delete(options.stream).catch(() => false);
  await admin.close();
});

async function open(): Promise<EvidenceLog> {
  const log = await EvidenceLog.connect(options);
  logs.push(log);
  return log;
}

function event(type: string, overrides: Partial<AppendInput> = {}): AppendInput {
  return { type, actor: 'test', tenant: 'default', causation: null, fields: { n: 1 }, ...overrides };
}

async function chainOf(log: EvidenceLog, chainId: string): Promise<StoredReceipt[]> {
  const out: StoredReceipt[] = [];
  for await (const stored of log.readChain(chainId)) out.push(stored);
  return out;
}

async function stored(chainId: string): Promise<number> {
  const info = await jsm.streams.info(options.stream, { subjects_filter: `${options.subjectPrefix}.${chainId}.>` });
  return Object.values(info.state.subjects ?? {}).reduce((sum, n) => sum + n, 0);
}

async function errorOf(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected a rejection');
}

describe('EvidenceLog guarded appends (expectedHeadSeq)', () => {
  it('stores onto the expected head, and refuses with E_CONFLICT head_moved once another writer moved it, storing nothing', async () => {
    const log = await open();
    const chainId = uniqueName('run');
    const first = await log.append(chainId, event('run.submitted'), { expectedHeadSeq: 0 });
    expect(first).toMatchObject({ duplicate: false, receipt: { seq: 1 } });
    // A service read seq 1 and decided; a cancel lands before its append.
    await log.append(chainId, event('run.cancelled', { key: 'cancel' }));
    const error = await errorOf(log.append(chainId, event('policy.decided', { causation: `${chainId}:1` }), { expectedHeadSeq: 1 }));
    expect(isHeadMoved(error)).toBe(true);
    expect(isCairnError(error) && error.details).toMatchObject({ chainId, reason: 'head_moved', expectedHeadSeq: 1, headSeq: 2 });
    expect(await stored(chainId)).toBe(2);
    expect((await chainOf(log, chainId)).map((s) => s.receipt.type)).toEqual(['run.submitted', 'run.cancelled']);
    // Decided again from the head it now sees: stored.
    const again = await log.append(chainId, event('alert.raised', { causation: `${chainId}:2` }), { expectedHeadSeq: 2 });
    expect(again).toMatchObject({ duplicate: false, receipt: { seq: 3 } });
  });

  it('refuses a guard on an empty chain that expects receipts, and a guard of 0 on a chain that has one', async () => {
    const log = await open();
    const chainId = uniqueName('run');
    expect(isHeadMoved(await errorOf(log.append(chainId, event('run.submitted'), { expectedHeadSeq: 3 })))).toBe(true);
    expect(await stored(chainId)).toBe(0);
    await log.append(chainId, event('run.submitted'));
    expect(isHeadMoved(await errorOf(log.append(chainId, event('run.submitted', { key: 'other' }), { expectedHeadSeq: 0 })))).toBe(true);
    expect(await stored(chainId)).toBe(1);
  });

  it('returns the stored event to a guarded retry: as the head, and after the chain moved on (from a cold instance too)', async () => {
    const a = await open();
    const chainId = uniqueName('run');
    await a.append(chainId, event('run.submitted'));
    const decided = event('policy.decided', { causation: `${chainId}:1` });
    const first = await a.append(chainId, decided, { expectedHeadSeq: 1 });
    // Still the head: the head read recognises it, nothing is published.
    const asHead = await a.append(chainId, decided, { expectedHeadSeq: 1 });
    expect(asHead).toMatchObject({ duplicate: true, streamSeq: first.streamSeq, attempts: 0 });
    expect(asHead.receipt).toEqual(first.receipt);
    // The chain moved on; a retry (a redelivery after a crash) from another process: the duplicate window answers.
    await a.append(chainId, event('run.scheduled', { causation: `${chainId}:2` }));
    const b = await open();
    const late = await b.append(chainId, decided, { expectedHeadSeq: 1 });
    expect(late).toMatchObject({ duplicate: true, streamSeq: first.streamSeq });
    expect(late.receipt).toEqual(first.receipt);
    expect(await stored(chainId)).toBe(3);
  });

  it('lets exactly one of many racing guarded appends onto the same head land; the chain stays linear', async () => {
    const instances = await Promise.all(Array.from({ length: 4 }, () => open()));
    const chainId = uniqueName('run');
    await instances[0]!.append(chainId, event('run.submitted'));
    const outcomes = await Promise.allSettled(
      instances.flatMap((log, i) =>
        Array.from({ length: 3 }, (_, j) => log.append(chainId, event('alert.raised', { key: `${i}-${j}`, causation: `${chainId}:1` }), { expectedHeadSeq: 1 })),
      ),
    );
    const landed = outcomes.filter((o) => o.status === 'fulfilled');
    const refused = outcomes.filter((o): o is PromiseRejectedResult => o.status === 'rejected');
    expect(landed).toHaveLength(1);
    expect(refused).toHaveLength(11);
    expect(refused.every((o) => isHeadMoved(o.reason))).toBe(true);
    const chain = await chainOf(instances[0]!, chainId);
    expect(chain.map((s) => s.receipt.seq)).toEqual([1, 2]);
    expect(verifyChain(chain.map((s) => s.receipt), { chainId, requireNonEmpty: true }).ok).toBe(true);
  });

  it('does not trust a cached head: a writer on another connection moved it, and the guard still holds', async () => {
    const a = await open();
    const b = await open();
    const chainId = uniqueName('run');
    await a.append(chainId, event('run.submitted'));
    await a.append(chainId, event('policy.decided', { causation: `${chainId}:1` }));
    await b.append(chainId, event('run.cancelled', { key: 'cancel' }));
    // a's cache says seq 2; the stream's head is seq 3.
    expect(isHeadMoved(await errorOf(a.append(chainId, event('run.scheduled', { causation: `${chainId}:2` }), { expectedHeadSeq: 2 })))).toBe(true);
    expect(await stored(chainId)).toBe(3);
    // Expecting the head it has not cached: read, then stored.
    expect(await a.append(chainId, event('run.sealed', { causation: `${chainId}:3` }), { expectedHeadSeq: 3 })).toMatchObject({ receipt: { seq: 4 }, duplicate: false });
  });

  it('refuses an expectedHeadSeq that is not a chain seq (E_INPUT), publishing nothing', async () => {
    const log = await open();
    const chainId = uniqueName('run');
    for (const bad of [-1, 0.5]) {
      expect(await errorOf(log.append(chainId, event('run.submitted'), { expectedHeadSeq: bad }))).toMatchObject({ code: 'E_INPUT' });
    }
    expect(await stored(chainId)).toBe(0);
  });
});
