import { testNatsUrl, uniqueName } from '@cairn/testing';
import { consistencyProof, inclusionProof, leafHash, rootHash, signCheckpoint, generateSigner, toHex, utf8, verifyInclusion } from '@cairn/transparency';
import { jetstreamManager } from '@nats-io/jetstream';
import type { JetStreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TransparencyLog } from './tlog.adapter.js';
import type { TlogOptions } from './tlog-stream.config.js';

let nc: NatsConnection;
let jsm: JetStreamManager;
const made: TlogOptions[] = [];

function names(label: string): TlogOptions {
  const stream = uniqueName(`TLOG_${label}`).toUpperCase();
  const options = { stream, subjectPrefix: uniqueName(`tlog_${label}`).toLowerCase(), checkpointBucket: `${stream}_CP` };
  made.push(options);
  return options;
}

beforeAll(async () => {
  nc = await connect({ servers: testNatsUrl() });
  jsm = await jetstreamManager(nc);
});

afterAll(async () => {
  for (const options of made) {
    await jsm.streams.delete(options.stream).catch(() => false);
    await jsm.streams.delete(`KV_${options.checkpointBucket}`).catch(() => false);
  }
  await nc?.close();
});

describe('the log of seal heads in JetStream', () => {
  it('appends one leaf per chain at index seq - 1, a second append of a chain being the first one', async () => {
    const log = await TransparencyLog.open(nc, names('once'), 'writer');
    expect(await log.appendLeaf('run_a', utf8('seal a\n'))).toEqual({ index: 0, duplicate: false });
    expect(await log.appendLeaf('run_b', utf8('seal b\n'))).toEqual({ index: 1, duplicate: false });
    expect(await log.appendLeaf('run_a', utf8('seal a\n'))).toEqual({ index: 0, duplicate: true });
    await expect(log.appendLeaf('run_a', utf8('another seal a\n'))).rejects.toMatchObject({ code: 'E_CONFLICT' });
    expect(await log.leafOf('run_b')).toMatchObject({ index: 1 });
    expect(await log.leafOf('run_none')).toBeNull();
    const tree = await log.currentTree();
    expect(tree.size).toBe(2);
    expect(toHex(await tree.root())).toBe(toHex(await rootHash([await leafHash(utf8('seal a\n')), await leafHash(utf8('seal b\n'))])));
    log.close();
  });

  it('does not fork under two appenders racing: every leaf once, indices 0..n-1, both trees alike', async () => {
    const options = names('race');
    const [one, two] = await Promise.all([TransparencyLog.open(nc, options, 'writer'), TransparencyLog.open(nc, options, 'writer')]);
    const chains = Array.from({ length: 40 }, (_, i) => `run_${String(i).padStart(3, '0')}`);
    // Each chain appended by both (a redelivery on another grader), in opposite orders.
    const results = await Promise.all([
      ...chains.map((c) => one.appendLeaf(c, utf8(`seal ${c}\n`))),
      ...[...chains].reverse().map((c) => two.appendLeaf(c, utf8(`seal ${c}\n`))),
    ]);
    const stored = results.filter((r) => !r.duplicate).map((r) => r.index);
    expect(stored.sort((a, b) => a - b)).toEqual(chains.map((_, i) => i));
    const info = await jsm.streams.info(options.stream);
    expect(info.state.messages).toBe(40);
    const [a, b] = [await one.currentTree(), await two.currentTree()];
    expect(toHex(await a.root())).toBe(toHex(await b.root()));
    // The tree the adapter keeps proves what the from-the-leaves functions prove.
    const leaves = Array.from({ length: 40 }, (_, i) => a.leaf(i));
    expect((await a.inclusionProof(17)).map(toHex)).toEqual((await inclusionProof(leaves, 17)).map(toHex));
    expect((await a.consistencyProof(13)).map(toHex)).toEqual((await consistencyProof(leaves, 13)).map(toHex));
    expect(await verifyInclusion(17, 40, a.leaf(17), await a.inclusionProof(17), await a.root())).toBe(true);
    one.close();
    two.close();
  });

  it('refuses a stream that could lose leaves, and a reader says when there is no log', async () => {
    const options = names('loose');
    await jsm.streams.add({ name: options.stream, subjects: [`${options.subjectPrefix}.leaf.>`], max_age: 60_000_000_000 });
    await expect(TransparencyLog.open(nc, options, 'writer')).rejects.toMatchObject({ code: 'E_UNAVAILABLE', message: expect.stringContaining('deny_delete is off') as string });
    const missing = await TransparencyLog.open(nc, names('missing'), 'reader');
    await expect(missing.currentTree()).rejects.toMatchObject({ code: 'E_UNAVAILABLE', message: expect.stringContaining('not there') as string });
    await expect(missing.latestCheckpoint()).rejects.toMatchObject({ code: 'E_UNAVAILABLE' });
    missing.close();
  });

  it('keeps the latest checkpoint, never a smaller one; reads a stream made anew from scratch', async () => {
    const options = names('cp');
    const log = await TransparencyLog.open(nc, options, 'writer');
    const reader = await TransparencyLog.open(nc, options, 'reader');
    const { signer } = await generateSigner('cairn/tlog-test');
    for (const c of ['run_1', 'run_2', 'run_3']) await log.appendLeaf(c, utf8(`seal ${c}\n`));
    const tree = await log.currentTree();
    expect(await reader.latestCheckpoint()).toBeNull();
    const three = await signCheckpoint(3, await tree.root(3), signer);
    const two = await signCheckpoint(2, await tree.root(2), signer);
    expect((await log.storeCheckpoint(three)).checkpoint.size).toBe(3);
    expect((await log.storeCheckpoint(two)).note).toBe(three);
    expect((await reader.latestCheckpoint())?.checkpoint.size).toBe(3);
    expect((await reader.currentTree()).size).toBe(3);

    // Deleted and made again with other leaves: the reader loads the new stream, not its cache.
    await jsm.streams.delete(options.stream);
    const again = await TransparencyLog.open(nc, options, 'writer');
    await again.appendLeaf('run_x', utf8('seal x\n'));
    const reloaded = await reader.currentTree();
    expect(reloaded.size).toBe(1);
    expect(toHex(reloaded.leaf(0))).toBe(toHex(await leafHash(utf8('seal x\n'))));
    for (const l of [log, reader, again]) l.close();
  });

  it('answers a checkpoint request through whoever serves them, and says when nobody does', async () => {
    const options = names('req');
    const log = await TransparencyLog.open(nc, options, 'writer');
    await expect(log.requestCheckpoint()).rejects.toMatchObject({ code: 'E_UNAVAILABLE' });
    const { signer } = await generateSigner('cairn/tlog-test');
    await log.appendLeaf('run_1', utf8('seal 1\n'));
    const sub = log.serveCheckpointRequests(async () => {
      const tree = await log.currentTree();
      return (await log.storeCheckpoint(await signCheckpoint(tree.size, await tree.root(), signer))).note;
    });
    await nc.flush();
    const answered = await log.requestCheckpoint();
    expect(answered.checkpoint.size).toBe(1);
    expect((await log.latestCheckpoint())?.note).toBe(answered.note);
    sub.unsubscribe();
    log.close();
  });
});
