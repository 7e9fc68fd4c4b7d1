import { isCairnError } from '@cairn/contracts';
import { GENESIS_HASH } from '@cairn/contracts';
import { sealReceipt, verifyChain } from '@cairn/evidence';
import { testNatsUrl, uniqueName } from '@cairn/testing';
import { AckPolicy, jetstreamManager } from '@nats-io/jetstream';
import type { JetStreamManager } from '@nats-io/jetstream';
import { connect, headers, nanos } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appendMsgId } from './append-body.builder.js';
import { EvidenceLog } from './evidence-log.adapter.js';
import type { StoredReceipt } from './evidence-log.adapter.js';
import { backupStreamName, migrateEvidenceLog } from './log-migration.js';

// A log of the earlier layout written here as the earlier adapter wrote it (one subject per chain,
// message ids, chain seq headers), then migrated; every stream made is deleted afterwards.
let nc: NatsConnection;
let jsm: JetStreamManager;
const streams: string[] = [];

beforeAll(async () => {
  nc = await connect({ servers: testNatsUrl() });
  jsm = await jetstreamManager(nc);
});

afterAll(async () => {
  for (const stream of streams) await jsm.streams.delete(stream).catch(() => false);
  await nc.close();
});

const encoder = new TextEncoder();

/** An earlier-layout stream with `chains` chains of `length` receipts, interleaved; returns the options to open it. */
async function earlierLog(chains: number, length: number, corrupt?: { chain: number; seq: number }) {
  const stream = uniqueName('EVMIG');
  const subjectPrefix = uniqueName('evmig');
  streams.push(stream, backupStreamName(stream));
  await jsm.streams.add({
    name: stream,
    subjects: [`${subjectPrefix}.>`],
    storage: 'file',
    deny_delete: true,
    deny_purge: true,
    allow_direct: true,
    duplicate_window: nanos(600_000),
  });
  const ids = Array.from({ length: chains }, () => uniqueName('run'));
  const heads = new Map(ids.map((id) => [id, GENESIS_HASH]));
  const js = jsm.jetstream();
  for (let seq = 1; seq <= length; seq++) {
    for (const [c, chainId] of ids.entries()) {
      const type = seq === 1 ? 'run.submitted' : seq === length ? 'run.sealed' : 'step.completed';
      const causation = seq === 1 ? null : `${chainId}:${seq - 1}`;
      const body = { v: 1, seq, run_id: chainId, tenant: 'default', type, actor: 'test', ts: new Date().toISOString(), causation, n: seq };
      let receipt: Record<string, unknown> = sealReceipt(heads.get(chainId)!, body);
      heads.set(chainId, receipt.hash as string);
      if (corrupt?.chain === c && corrupt.seq === seq) receipt = { ...receipt, n: -1 };
      const hdrs = headers();
      hdrs.set('Nats-Msg-Id', appendMsgId(chainId, { causation, type }));
      hdrs.set('Cairn-Chain-Seq', String(seq));
      await js.publish(`${subjectPrefix}.${chainId}`, encoder.encode(JSON.stringify(receipt)), { headers: hdrs });
    }
  }
  return { options: { servers: testNatsUrl(), stream, subjectPrefix }, ids };
}

async function collect(items: AsyncIterable<StoredReceipt>): Promise<StoredReceipt[]> {
  const out: StoredReceipt[] = [];
  for await (const item of items) out.push(item);
  return out;
}

describe('cairn log migrate: the earlier subject layout copied into the current one', () => {
  it('copies every receipt in order under its type, every chain verified, keeps the durables where they were, and the log takes appends again', async () => {
    const { options, ids } = await earlierLog(4, 5);
    // A service's durable half way through, and the projector's at the start.
    await jsm.consumers.add(options.stream, { durable_name: 'cairn-policy', ack_policy: AckPolicy.Explicit, filter_subject: `${options.subjectPrefix}.>` });
    const policy = await jsm.jetstream().consumers.get(options.stream, 'cairn-policy');
    for (let i = 0; i < 7; i++) (await policy.next())!.ack();
    await policy.info(); // the acks have landed once the server answers after them
    await jsm.consumers.add(options.stream, { durable_name: 'cairn-projector', ack_policy: AckPolicy.Explicit, filter_subject: `${options.subjectPrefix}.>` });
    await expect(EvidenceLog.connect(options)).rejects.toThrow(/cairn log migrate/);
    const before = await collectRaw(options.stream, 20);

    const lines: string[] = [];
    const result = await migrateEvidenceLog(nc, { ...options, leaveDurables: ['cairn-projector'], progress: (line) => lines.push(line) });
    expect(result).toMatchObject({ outcome: 'migrated', stream: options.stream, backup: backupStreamName(options.stream), receipts: 20, chains: 4, durables: { 'cairn-policy': 8 } });
    expect(lines.join('\n')).toContain('verify');

    // Message k of the new stream is message k of the old one, under <prefix>.<chain id>.<type>, with its headers.
    const after = await collectRaw(options.stream, 20);
    expect(after.map((m) => m.seq)).toEqual(before.map((m) => m.seq));
    for (const [i, m] of after.entries()) {
      const old = before[i]!;
      expect(m.data).toEqual(old.data);
      expect(m.subject).toBe(`${old.subject}.${(JSON.parse(old.data) as { type: string }).type}`);
      expect(m.msgId).toBe(old.msgId);
      expect(m.chainSeq).toBe(old.chainSeq);
    }
    const info = await jsm.streams.info(options.stream);
    expect(info.config.metadata).toMatchObject({ 'cairn.subject_layout': '2' });
    expect(info.config.metadata?.['cairn.migrating_from']).toBeUndefined();
    expect(info.config.allow_atomic).toBe(true);
    // The earlier stream is kept, whole, for the operator.
    expect((await jsm.streams.info(backupStreamName(options.stream))).state.messages).toBe(20);
    // The service's durable goes on from where it was; the projector's is the projector's to make.
    const durables = new Map<string, number>();
    for await (const c of jsm.consumers.list(options.stream)) durables.set(c.name, c.num_pending);
    expect(durables).toEqual(new Map([['cairn-policy', 13]]));

    const log = await EvidenceLog.connect(options);
    try {
      for (const chainId of ids) {
        const chain = await collect(log.readChain(chainId));
        expect(verifyChain(chain.map((s) => s.receipt), { chainId, requireNonEmpty: true })).toMatchObject({ ok: true, count: 5 });
      }
      // The compare-and-set and the duplicate window carry over: a retry of a copied event is stored once, a new one lands on the head.
      const retry = await log.append(ids[0]!, { type: 'step.completed', actor: 'test', tenant: 'default', causation: `${ids[0]}:1`, fields: { n: 2 } });
      expect(retry.duplicate).toBe(true);
      const next = await log.append(ids[0]!, { type: 'alert.raised', actor: 'test', tenant: 'default', causation: `${ids[0]}:5`, fields: { n: 6 } });
      expect(next.receipt.seq).toBe(6);
    } finally {
      await log.close();
    }
    // Run again: nothing to do.
    expect(await migrateEvidenceLog(nc, options)).toMatchObject({ outcome: 'current' });
  });

  it('refuses a log with a chain that does not verify (E_CHAIN_BROKEN naming it), changing nothing', async () => {
    const { options, ids } = await earlierLog(3, 4, { chain: 1, seq: 3 });
    const error = await migrateEvidenceLog(nc, options).catch((e: unknown) => e);
    expect(isCairnError(error) && error.code).toBe('E_CHAIN_BROKEN');
    expect((error as Error).message).toContain(ids[1]!);
    expect((error as Error).message).toContain('seq 3');
    const info = await jsm.streams.info(options.stream);
    expect(info.config.metadata?.['cairn.subject_layout']).toBeUndefined();
    expect(info.state.messages).toBe(12);
    await expect(jsm.streams.info(backupStreamName(options.stream))).rejects.toThrow();
  });

  it('finishes a migration that stopped after the backup: the marked stream is filled again from it', async () => {
    const { options } = await earlierLog(2, 3);
    await migrateEvidenceLog(nc, options);
    // As if it had stopped while copying: the stream is marked and holds part of the copy.
    const info = await jsm.streams.info(options.stream);
    await jsm.streams.delete(options.stream);
    await jsm.streams.add({ ...info.config, metadata: { ...info.config.metadata, 'cairn.migrating_from': backupStreamName(options.stream) } });
    await expect(EvidenceLog.connect(options)).rejects.toThrow(/being filled by `cairn log migrate`/);
    const again = await migrateEvidenceLog(nc, options);
    expect(again).toMatchObject({ outcome: 'migrated', receipts: 6, chains: 2 });
    const log = await EvidenceLog.connect(options);
    expect(await log.lastStreamSeq()).toBe(6);
    await log.close();
  });
});

async function collectRaw(stream: string, count: number): Promise<{ seq: number; subject: string; data: string; msgId: string; chainSeq: string }[]> {
  const out: { seq: number; subject: string; data: string; msgId: string; chainSeq: string }[] = [];
  for (let seq = 1; seq <= count; seq++) {
    const m = await jsm.direct.getMessage(stream, { seq });
    if (m === null) break;
    out.push({ seq: m.seq, subject: m.subject, data: new TextDecoder().decode(m.data), msgId: m.header.get('Nats-Msg-Id'), chainSeq: m.header.get('Cairn-Chain-Seq') });
  }
  return out;
}
