import { isCairnError } from '@cairn/contracts';
import { verifyChain } from '@cairn/evidence';
import { testNatsUrl, uniqueName } from '@cairn/testing';
import { jetstreamManager, JetStreamApiError } from '@nats-io/jetstream';
import type { JetStreamManager } from '@nats-io/jetstream';
import { connect, nanos } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AppendInput } from './append-body.builder.js';
import { EvidenceLog } from './evidence-log.adapter.js';
import type { AppendResult, RawStoredMessage, StoredReceipt } from './evidence-log.adapter.js';
import type { EvidenceLogOptions } from './evidence-log.options.js';
import { isHeadMoved } from './head-guard.js';

// Real nats-server (the pinned current one). Every test names its own stream and subject prefix; afterAll
// deletes the streams (deleting a whole stream still works under deny_delete) and closes all.
let admin: NatsConnection;
let jsm: JetStreamManager;
const streams: string[] = [];
const logs: EvidenceLog[] = [];

beforeAll(async () => {
  admin = await connect({ servers: testNatsUrl() });
  jsm = await jetstreamManager(admin);
});

afterAll(async () => {
  await Promise.allSettled(logs.map((log) => log.close()));
  for (const stream of streams) await jsm.streams.delete(stream).catch(() => false);
  await admin.close();
});

function logOptions(overrides: Partial<EvidenceLogOptions> = {}): EvidenceLogOptions {
  const stream = uniqueName('EVLOG');
  streams.push(stream);
  return { servers: testNatsUrl(), stream, subjectPrefix: uniqueName('evlog'), ...overrides };
}

async function open(options: EvidenceLogOptions): Promise<EvidenceLog> {
  const log = await EvidenceLog.connect(options);
  logs.push(log);
  return log;
}

function event(overrides: Partial<AppendInput> = {}): AppendInput {
  return { type: 'step.completed', actor: 'runtime', tenant: 'default', causation: null, fields: { exit_code: 0 }, ...overrides };
}

async function collect<T>(items: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of items) out.push(item);
  return out;
}

/** Messages stored under `filter` (a chain's `<prefix>.<chain>.>`, say), over all its subjects. */
async function subjectCount(stream: string, filter: string): Promise<number> {
  const info = await jsm.streams.info(stream, { subjects_filter: filter });
  return Object.values(info.state.subjects ?? {}).reduce((sum, n) => sum + n, 0);
}

/** The stream as this layout creates it, for tests that make one by hand. */
const CURRENT_LAYOUT = { allow_atomic: true, metadata: { 'cairn.subject_layout': '2' } };

async function errorOf(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected a rejection');
}

describe('EvidenceLog on JetStream', () => {
  it('gives one linear chain from 50 concurrent appenders of several types on 5 connections', async () => {
    const options = logOptions();
    const instances = await Promise.all(Array.from({ length: 5 }, () => open(options)));
    const chainId = uniqueName('run');
    // Each type is a subject of its own: one compare-and-set over the chain's subjects keeps them one chain.
    const types = ['step.completed', 'step.started', 'alert.raised'];
    const results: AppendResult[] = await Promise.all(
      instances.flatMap((log, i) =>
        Array.from({ length: 10 }, (_, j) => log.append(chainId, event({ type: types[(i + j) % 3]!, key: `${i}-${j}`, fields: { appender: `${i}-${j}` } }))),
      ),
    );

    expect(results.every((r) => !r.duplicate)).toBe(true);
    const chain: StoredReceipt[] = await collect(instances[0]!.readChain(chainId));
    expect(chain.map((s) => s.receipt.seq)).toEqual(Array.from({ length: 50 }, (_, k) => k + 1));
    expect(verifyChain(chain.map((s) => s.receipt), { chainId, requireNonEmpty: true })).toMatchObject({ ok: true, count: 50 });
    expect(new Set(chain.map((s) => s.receipt.appender)).size).toBe(50);
    expect(new Set(results.map((r) => r.streamSeq)).size).toBe(50);
    expect(await subjectCount(options.stream, `${options.subjectPrefix}.${chainId}.>`)).toBe(50);
    expect(chain.every((s) => s.subject === `${options.subjectPrefix}.${chainId}.${s.receipt.type}`)).toBe(true);
    // What each appender was told is what the chain holds.
    const stored = new Map(chain.map((s) => [s.streamSeq, s.receipt]));
    for (const r of results) expect(stored.get(r.streamSeq)).toEqual(r.receipt);
    expect(await instances[4]!.head(chainId)).toEqual({ streamSeq: chain[49]!.streamSeq, seq: 50, hash: chain[49]!.receipt.hash });
    // Across processes the compare-and-set did reject someone: the retries were exercised.
    expect(results.reduce((sum, r) => sum + r.attempts, 0)).toBeGreaterThan(50);
  });

  it('stores a retried append once, also when retried from another instance', async () => {
    const options = logOptions();
    const a = await open(options);
    const chainId = uniqueName('run');
    const subject = a.chainSubjects(chainId);
    const submitted = event({ type: 'run.submitted', actor: 'intake' });

    const first = await a.append(chainId, submitted);
    const [again, concurrent] = await Promise.all([a.append(chainId, submitted), a.append(chainId, submitted)]);
    for (const r of [again, concurrent]) {
      expect(r).toMatchObject({ duplicate: true, streamSeq: first.streamSeq });
      expect(r.receipt).toEqual(first.receipt);
    }
    const b = await open(options);
    const fromB = await b.append(chainId, { ...submitted, ts: '2030-01-01T00:00:00.000Z' });
    expect(fromB).toMatchObject({ duplicate: true, streamSeq: first.streamSeq, attempts: 0 });
    expect(fromB.receipt).toEqual(first.receipt);

    // Once it is no longer the head, the stream's duplicate window recognises it.
    const next = await a.append(chainId, event({ causation: `${chainId}:1` }));
    expect(next.receipt.seq).toBe(2);
    const late = await b.append(chainId, submitted);
    expect(late).toMatchObject({ duplicate: true, streamSeq: first.streamSeq, attempts: 1 });
    expect(late.receipt).toEqual(first.receipt);
    expect(await subjectCount(options.stream, subject)).toBe(2);
  });

  it('recognises a retry of the head past the duplicate window', async () => {
    const options = logOptions({ duplicateWindowMs: 1000 });
    const a = await open(options);
    const chainId = uniqueName('run');
    const first = await a.append(chainId, event({ key: 'only' }));
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const c = await open(options);
    for (const log of [a, c]) {
      const retry = await log.append(chainId, event({ key: 'only' }));
      expect(retry).toMatchObject({ duplicate: true, attempts: 0, streamSeq: first.streamSeq });
      expect(retry.receipt).toEqual(first.receipt);
    }
    expect(await subjectCount(options.stream, a.chainSubjects(chainId))).toBe(1);
  });

  it('continues an existing chain from a new instance', async () => {
    const options = logOptions();
    const chainId = uniqueName('sbx');
    const a = await open(options);
    for (let i = 0; i < 3; i++) await a.append(chainId, event({ key: String(i) }));
    const headA = await a.head(chainId);
    await a.close();

    const b = await open(options);
    expect(await b.head(chainId)).toEqual(headA);
    const fourth = await b.append(chainId, event({ key: '3' }));
    expect(fourth).toMatchObject({ duplicate: false, attempts: 1 });
    expect(fourth.receipt).toMatchObject({ seq: 4, prev_hash: headA!.hash });
    await b.append(chainId, event({ key: '4' }));
    const chain = await collect(b.readChain(chainId));
    expect(verifyChain(chain.map((s) => s.receipt), { chainId })).toMatchObject({ ok: true, count: 5 });
  });

  it('refuses a message delete and a purge at the broker', async () => {
    const options = logOptions();
    const log = await open(options);
    const chainId = uniqueName('run');
    const { streamSeq } = await log.append(chainId, event());

    const deleted = await errorOf(jsm.streams.deleteMessage(options.stream, streamSeq));
    expect(deleted).toBeInstanceOf(JetStreamApiError);
    expect((deleted as JetStreamApiError).code).toBe(10057);
    expect((deleted as Error).message).toMatch(/message delete not permitted/);
    const purged = await errorOf(jsm.streams.purge(options.stream));
    expect((purged as JetStreamApiError).code).toBe(10110);
    expect((purged as Error).message).toMatch(/purge not permitted/);
    const purgedSubject = await errorOf(jsm.streams.purge(options.stream, { filter: log.chainSubjects(chainId) }));
    expect((purgedSubject as JetStreamApiError).code).toBe(10110);
    expect(await collect(log.readChain(chainId))).toHaveLength(1);
  });

  it.each<[string, Record<string, unknown>]>([
    ['max_msgs', { max_msgs: 1000 }],
    ['max_age', { max_age: nanos(3_600_000) }],
    ['deny_delete', { deny_delete: false }],
    ['max_msgs_per_subject', { max_msgs_per_subject: 1 }],
    ['allow_rollup_hdrs', { allow_rollup_hdrs: true, deny_purge: false }],
  ])('refuses an existing stream whose %s could lose evidence', async (field, overrides) => {
    const options = logOptions();
    await jsm.streams.add({
      name: options.stream,
      subjects: [`${options.subjectPrefix}.>`],
      storage: 'file',
      deny_delete: true,
      deny_purge: true,
      allow_direct: true,
      ...CURRENT_LAYOUT,
      ...overrides,
    });
    const error = await errorOf(EvidenceLog.connect(options));
    expect(isCairnError(error) && error.code).toBe('E_UNAVAILABLE');
    expect((error as Error).message).toContain(field);
    // Refused, not "repaired": the stream is as it was.
    const info = await jsm.streams.info(options.stream);
    expect(info.config).toMatchObject(overrides);
  });

  it('creates the stream as asked and accepts it again', async () => {
    const options = logOptions();
    await open(options);
    const { config } = await jsm.streams.info(options.stream);
    expect(config).toMatchObject({
      subjects: [`${options.subjectPrefix}.>`],
      storage: 'file',
      deny_delete: true,
      deny_purge: true,
      allow_direct: true,
      allow_rollup_hdrs: false,
      max_msgs: -1,
      max_bytes: -1,
      max_age: 0,
      max_msgs_per_subject: -1,
      max_msg_size: 1024 * 1024,
      duplicate_window: nanos(600_000),
      allow_atomic: true,
      metadata: expect.objectContaining({ 'cairn.subject_layout': '2' }) as unknown,
    });
    const again = await open(options);
    await expect(again.ensureStream()).resolves.toBeUndefined();
  });

  it('leaves a borrowed connection open on close, and appends nothing after it', async () => {
    const options = logOptions();
    const log = await EvidenceLog.fromConnection(admin, options);
    const chainId = uniqueName('run');
    await log.append(chainId, event());
    await log.close();
    expect(admin.isClosed()).toBe(false);
    const error = await errorOf(log.append(chainId, event({ key: 'after' })));
    expect(isCairnError(error) && error.code).toBe('E_UNAVAILABLE');
    expect(await subjectCount(options.stream, log.chainSubjects(chainId))).toBe(1);
    // Reads need no publisher: still fine after close on a borrowed connection.
    expect(await collect(log.readChain(chainId))).toHaveLength(1);

    const own = await EvidenceLog.connect(options);
    await own.close();
    await expect(own.lastStreamSeq()).rejects.toMatchObject({ cairnErrorCode: 'E_UNAVAILABLE' });
  });

  it('serves a chain it followed from memory, exactly as stored, asking the stream only for what follows it', async () => {
    const options = logOptions();
    const [writer, other, follower] = await Promise.all([open(options), open(options), open(options)]);
    const chainId = uniqueName('run');
    for (let i = 0; i < 3; i++) await writer.append(chainId, event({ key: `k${i}` }));
    const fresh = await collect(other.readChain(chainId));
    expect(other.chainReads).toEqual({ fromMemory: 0, fromStream: 1 });

    // The writer saw its own acknowledged appends: nothing follows them on the stream, the same receipts.
    const fromMemory = await collect(writer.readChain(chainId));
    expect(writer.chainReads).toEqual({ fromMemory: 1, fromStream: 0 });
    expect(fromMemory).toEqual(fresh);

    // A follower fed by deliveries (as a service's consumer feeds it) serves them too.
    for (const stored of fresh) follower.observe(stored.subject, stored.streamSeq, new TextEncoder().encode(JSON.stringify(stored.receipt)), null);
    expect(await collect(follower.readChain(chainId))).toEqual(fresh);
    expect(follower.chainReads.fromMemory).toBe(1);

    // Another instance appends: the writer's read fetches what follows what it holds, and nothing before.
    await other.append(chainId, event({ key: 'k3' }));
    await other.append(chainId, event({ type: 'alert.raised', key: 'k4' }));
    const moved = await collect(writer.readChain(chainId));
    expect(moved.map((r) => r.receipt.seq)).toEqual([1, 2, 3, 4, 5]);
    expect(writer.chainReads).toEqual({ fromMemory: 1, fromStream: 1 });
    expect(verifyChain(moved.map((r) => r.receipt)).ok).toBe(true);
    expect(moved.map((r) => r.subject)).toEqual(fresh.map((r) => r.subject).concat([writer.subjectFor(chainId, 'step.completed'), writer.subjectFor(chainId, 'alert.raised')]));
    // …handing out the receipts it had parsed as the same objects, and has the chain from then on.
    expect(moved[0]!.receipt).toBe(fromMemory[0]!.receipt);
    expect(Object.isFrozen(moved[4]!.receipt)).toBe(true);
    expect(await collect(writer.readChain(chainId))).toEqual(moved);
    expect(writer.chainReads.fromMemory).toBe(2);

    // A follower that saw only some of the chain (a consumer of some types) holds its prefix and reads the rest.
    const partial = await open(options);
    partial.observe(fresh[0]!.subject, fresh[0]!.streamSeq, new TextEncoder().encode(JSON.stringify(fresh[0]!.receipt)), '1');
    partial.observe(moved[3]!.subject, moved[3]!.streamSeq, new TextEncoder().encode(JSON.stringify(moved[3]!.receipt)), '4');
    expect(await collect(partial.readChain(chainId))).toEqual(moved);
  });

  it('appends after a chain read from the head that read found, and still refuses a head that moved since', async () => {
    const options = logOptions();
    const [writer, reactor] = await Promise.all([open(options), open(options)]);
    const chainId = uniqueName('run');
    for (let i = 0; i < 2; i++) await writer.append(chainId, event({ key: `w${i}` }));

    // Read, decide, append — a reaction: the append needs no second read of the head.
    const read = await collect(reactor.readChain(chainId));
    const reacted = await reactor.append(chainId, event({ key: 'r0' }), { expectedHeadSeq: read.at(-1)!.receipt.seq });
    expect(reacted.receipt).toMatchObject({ seq: 3, prev_hash: read.at(-1)!.receipt.hash });
    expect(reactor.appendHeadReads).toBe(0);

    // The head read is only a hint: another writer moves the chain, the guarded append is refused…
    const stale = await collect(reactor.readChain(chainId));
    await writer.append(chainId, event({ key: 'w2' }));
    const refused = await errorOf(reactor.append(chainId, event({ key: 'r1' }), { expectedHeadSeq: stale.at(-1)!.receipt.seq }));
    expect(isHeadMoved(refused)).toBe(true);
    // …and an unguarded one lands on the real head.
    const landed = await reactor.append(chainId, event({ key: 'r2' }));
    expect(landed.receipt.seq).toBe(5);
    const chain = await collect(writer.readChain(chainId));
    expect(chain.map((s) => s.receipt.seq)).toEqual([1, 2, 3, 4, 5]);
    expect(verifyChain(chain.map((s) => s.receipt), { chainId }).ok).toBe(true);
  });

  it('reads an unknown chain as empty', async () => {
    const log = await open(logOptions());
    const chainId = uniqueName('run');
    expect(await collect(log.readChain(chainId))).toEqual([]);
    expect(await log.head(chainId)).toBeNull();
    await log.append(uniqueName('run'), event());
    expect(await collect(log.readChain(chainId))).toEqual([]);
  });

  it('keeps chains independent, and readAll returns every message in stream order', async () => {
    const options = logOptions();
    const log = await open(options);
    const x = uniqueName('run');
    const y = uniqueName('sbx');
    const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    for (let i = 0; i < 4; i++) {
      await log.append(x, event({ key: String(i), traceparent }));
      await log.append(y, event({ key: String(i) }));
    }
    await log.append(x, event({ key: '4' }));
    const chainX = await collect(log.readChain(x));
    const chainY = await collect(log.readChain(y));
    expect(chainX.map((s) => s.receipt.seq)).toEqual([1, 2, 3, 4, 5]);
    expect(chainY.map((s) => s.receipt.seq)).toEqual([1, 2, 3, 4]);
    expect(chainX.every((s) => s.subject === log.subjectFor(x, s.receipt.type) && s.receipt.run_id === x)).toBe(true);
    expect(verifyChain(chainX.map((s) => s.receipt), { chainId: x }).ok).toBe(true);
    expect(verifyChain(chainY.map((s) => s.receipt), { chainId: y }).ok).toBe(true);

    const stored = await jsm.direct.getMessage(options.stream, { seq: chainX[0]!.streamSeq });
    expect(stored?.header.get('traceparent')).toBe(traceparent);
    expect(stored?.header.get('Cairn-Chain-Seq')).toBe('1');

    expect(await log.lastStreamSeq()).toBe(9);
    const all: RawStoredMessage[] = await collect(log.readAll());
    expect(all.map((m) => m.streamSeq)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(all.filter((m) => m.subject.startsWith(`${log.subjectPrefix}.${x}.`))).toHaveLength(5);
    expect(all.every((m) => /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/.test(m.time))).toBe(true);
    const decoded = JSON.parse(new TextDecoder().decode(all[0]!.data)) as unknown;
    expect(decoded).toEqual(chainX[0]!.receipt);
    expect((await collect(log.readAll({ fromStreamSeq: 3, toStreamSeq: 5 }))).map((m) => m.streamSeq)).toEqual([3, 4, 5]);
    expect(await collect(log.readAll({ fromStreamSeq: 10 }))).toEqual([]);
    // A read ends at the last message present when it started, even while appends go on.
    const reading = log.readAll()[Symbol.asyncIterator]();
    const firstRead = await reading.next();
    await log.append(y, event({ key: '4' }));
    let count = firstRead.done === true ? 0 : 1;
    while ((await reading.next()).done !== true) count += 1;
    expect(count).toBe(9);
  });

  it('gives up with E_CONFLICT when the chain keeps moving, then recovers', async () => {
    const options = logOptions();
    const a = await open({ ...options, maxAttempts: 1 });
    const b = await open(options);
    const chainId = uniqueName('run');
    await a.append(chainId, event({ key: 'a1' }));
    await b.append(chainId, event({ key: 'b1' }));
    const error = await errorOf(a.append(chainId, event({ key: 'a2' })));
    expect(isCairnError(error) && error.code).toBe('E_CONFLICT');
    const retried = await a.append(chainId, event({ key: 'a2' }));
    expect(retried).toMatchObject({ duplicate: false, receipt: { seq: 3 } });
    expect(verifyChain((await collect(a.readChain(chainId))).map((s) => s.receipt)).ok).toBe(true);
  });

  it('refuses invalid input (E_INPUT) and an oversized receipt (E_TOO_LARGE), publishing nothing', async () => {
    const log = await open(logOptions());
    const chainId = uniqueName('run');
    await log.append(chainId, event());
    const before = await log.lastStreamSeq();
    const cases: [string, string, AppendInput][] = [
      ['actor', chainId, event({ actor: 'Not An Actor' })],
      ['tenant', chainId, event({ tenant: 'UPPER' })],
      ['type', chainId, event({ type: 'nodot' })],
      ['envelope override', chainId, event({ fields: { seq: 99 } })],
      ['non-JSON field', chainId, event({ key: 'date', fields: { when: new Date() } })],
      ['chain id with a dot', 'run_Bad.Subject', event()],
      ['chain id with a wildcard', 'run_x.>', event()],
      ['type with a wildcard', chainId, event({ type: 'step.*' })],
      ['type with a token past the last', chainId, event({ type: 'step.done.>' })],
    ];
    for (const [what, chain, input] of cases) {
      const error = await errorOf(log.append(chain, input));
      expect(isCairnError(error) && error.code, what).toBe('E_INPUT');
    }
    const tooLarge = await errorOf(log.append(chainId, event({ key: 'big', fields: { blob: 'x'.repeat(1024 * 1024) } })));
    expect(isCairnError(tooLarge) && tooLarge.code).toBe('E_TOO_LARGE');
    expect(await log.lastStreamSeq()).toBe(before);
    expect(() => log.subjectFor('run_a.b', 'run.submitted')).toThrow(/chain id/);
    expect(() => log.subjectFor('run_a', 'Run.Submitted')).toThrow(/receipt type/);
  });
});

describe('EvidenceLog batches and subjects', () => {
  const batch = (causation: string | null, n: number, type = 'secret.redacted'): AppendInput[] =>
    Array.from({ length: n }, (_, i) => event({ type: i === n - 1 ? 'run.failed' : type, causation, key: `b${i}` }));

  it('appends receipts that belong together in one atomic batch, at consecutive seqs, and answers its retry with the same receipts', async () => {
    const options = logOptions();
    const [a, b] = await Promise.all([open(options), open(options)]);
    const chainId = uniqueName('run');
    await a.append(chainId, event({ type: 'run.submitted' }));
    const stored = await a.appendBatch(chainId, batch(`${chainId}:1`, 4), { expectedHeadSeq: 1 });
    expect(stored.map((r) => [r.receipt.seq, r.duplicate])).toEqual([[2, false], [3, false], [4, false], [5, false]]);
    expect(stored.map((r) => r.streamSeq)).toEqual([2, 3, 4, 5]);
    const chain = await collect(b.readChain(chainId));
    expect(verifyChain(chain.map((s) => s.receipt), { chainId }).ok).toBe(true);
    expect(chain.slice(1).map((s) => s.receipt)).toEqual(stored.map((r) => r.receipt));
    expect(chain.map((s) => s.subject.slice(options.subjectPrefix.length + 1))).toEqual([
      `${chainId}.run.submitted`,
      `${chainId}.secret.redacted`,
      `${chainId}.secret.redacted`,
      `${chainId}.secret.redacted`,
      `${chainId}.run.failed`,
    ]);
    // A redelivery of what caused it, from another process (its cached head is the batch's last): the same receipts, nothing stored.
    for (const log of [b, a]) {
      const again = await log.appendBatch(chainId, batch(`${chainId}:1`, 4), { expectedHeadSeq: 1 });
      expect(again.map((r) => r.duplicate)).toEqual([true, true, true, true]);
      expect(again.map((r) => r.receipt)).toEqual(stored.map((r) => r.receipt));
    }
    // Past it the chain moved on: the duplicate window still finds the whole batch.
    await b.append(chainId, event({ type: 'run.sealed', causation: `${chainId}:5` }));
    const fresh = await open(options);
    const late = await fresh.appendBatch(chainId, batch(`${chainId}:1`, 4), { expectedHeadSeq: 1 });
    expect(late.map((r) => r.receipt)).toEqual(stored.map((r) => r.receipt));
    const unguarded = await fresh.appendBatch(chainId, batch(`${chainId}:1`, 4));
    expect(unguarded.every((r) => r.duplicate)).toBe(true);
    expect(await subjectCount(options.stream, a.chainSubjects(chainId))).toBe(6);
  });

  it('stores a batch onto a head that moved under it all or nothing: guarded, refused (head_moved); unguarded, on the new head', async () => {
    const options = logOptions();
    const [a, b] = await Promise.all([open(options), open(options)]);
    const chainId = uniqueName('run');
    await a.append(chainId, event({ type: 'run.submitted' }));
    await collect(a.readChain(chainId));
    await b.append(chainId, event({ type: 'run.cancel_requested', causation: null, key: 'c' }));
    const refused = await errorOf(a.appendBatch(chainId, batch(`${chainId}:1`, 3), { expectedHeadSeq: 1 }));
    expect(isHeadMoved(refused)).toBe(true);
    expect(await subjectCount(options.stream, a.chainSubjects(chainId))).toBe(2);
    // a's cached head is stale (seq 1): the compare-and-set refuses the batch, and it goes onto seq 2.
    const landed = await a.appendBatch(chainId, batch(`${chainId}:1`, 3));
    expect(landed.map((r) => r.receipt.seq)).toEqual([3, 4, 5]);
    expect(landed[0]!.attempts).toBeGreaterThanOrEqual(1);
    const chain = await collect(b.readChain(chainId));
    expect(chain.map((s) => s.receipt.seq)).toEqual([1, 2, 3, 4, 5]);
    expect(verifyChain(chain.map((s) => s.receipt), { chainId }).ok).toBe(true);
  });

  it('keeps concurrent batches and single appends on one chain linear', async () => {
    const options = logOptions();
    const instances = await Promise.all(Array.from({ length: 3 }, () => open(options)));
    const chainId = uniqueName('run');
    await Promise.all(
      instances.flatMap((log, i) => [
        log.appendBatch(chainId, Array.from({ length: 3 }, (_, j) => event({ type: 'step.started', key: `${i}-b${j}`, fields: { batch: `${i}-b` } }))),
        log.append(chainId, event({ type: 'alert.raised', key: `${i}-one`, fields: { batch: `${i}-one` } })),
        log.appendBatch(chainId, Array.from({ length: 2 }, (_, j) => event({ type: 'step.completed', key: `${i}-c${j}`, fields: { batch: `${i}-c` } }))),
      ]),
    );
    const chain = await collect(instances[0]!.readChain(chainId));
    expect(chain.map((s) => s.receipt.seq)).toEqual(Array.from({ length: 18 }, (_, k) => k + 1));
    expect(verifyChain(chain.map((s) => s.receipt), { chainId }).ok).toBe(true);
    // Each batch's receipts sit together, in order.
    const batches = chain.map((s) => String(s.receipt.batch));
    for (const name of new Set(batches)) {
      const at = batches.indexOf(name);
      const size = batches.filter((b) => b === name).length;
      expect(batches.slice(at, at + size).every((b) => b === name), `${name} in ${batches.join(' ')}`).toBe(true);
    }
  });

  it('refuses a batch with the same event twice, or too many, publishing nothing', async () => {
    const log = await open(logOptions());
    const chainId = uniqueName('run');
    const twice = await errorOf(log.appendBatch(chainId, [event({ key: 'x' }), event({ key: 'x' })]));
    expect(isCairnError(twice) && twice.code).toBe('E_INPUT');
    const many = await errorOf(log.appendBatch(chainId, Array.from({ length: 1001 }, (_, i) => event({ key: String(i) }))));
    expect(isCairnError(many) && many.code).toBe('E_INPUT');
    expect(await log.lastStreamSeq()).toBe(0);
  });

  it('refuses a stream of the earlier layout (one subject per chain), naming the command that migrates it', async () => {
    const options = logOptions();
    // As the earlier adapter created it: no layout in its metadata, no atomic batches, a receipt on <prefix>.<chain id>.
    await jsm.streams.add({
      name: options.stream,
      subjects: [`${options.subjectPrefix}.>`],
      storage: 'file',
      deny_delete: true,
      deny_purge: true,
      allow_direct: true,
      duplicate_window: nanos(600_000),
    });
    await jetstreamManager(admin).then((m) => m.jetstream().publish(`${options.subjectPrefix}.run_old1`, '{"seq":1}'));
    const error = await errorOf(EvidenceLog.connect(options));
    expect(isCairnError(error) && error.code).toBe('E_UNAVAILABLE');
    expect((error as Error).message).toContain('earlier subject layout');
    expect((error as Error).message).toContain('cairn log migrate');
    // Refused, not changed.
    const info = await jsm.streams.info(options.stream);
    expect(info.config.metadata?.['cairn.subject_layout']).toBeUndefined();
    expect(info.state.messages).toBe(1);
  });
});

describe('a log limited to its service row (appends)', () => {
  it('refuses any other type E_FORBIDDEN, alone or in a batch, and publishes nothing of it', async () => {
    const options = logOptions({ appends: new Set(['step.started', 'step.completed']) });
    const log = await open(options);
    const chain = uniqueName('run').toLowerCase();
    await log.append(chain, event({ type: 'step.started', fields: { step_index: 0 } }));
    const refused = await log.append(chain, event({ type: 'run.sealed', actor: 'runtime', fields: {} })).catch((error: unknown) => error);
    expect(isCairnError(refused) && refused.code).toBe('E_FORBIDDEN');
    expect(String(refused)).toContain('runtime may not append run.sealed');
    const batch = await log.appendBatch(chain, [event(), event({ type: 'grade.recorded', key: 'g' })]).catch((error: unknown) => error);
    expect(isCairnError(batch) && batch.code).toBe('E_FORBIDDEN');
    expect(await subjectCount(options.stream, `${options.subjectPrefix}.${chain}.>`)).toBe(1);
  });
});

describe('a message under a chain that is not a receipt (ADR 0033)', () => {
  it('breaks reads there (not_a_receipt); only an append pastBreaks goes on, onto the last receipt before it, guarded on its stream seq', async () => {
    const options = logOptions();
    const log = await open(options);
    const first = await log.append('run_poisoned', event({ type: 'run.submitted', key: 'a' }));
    const second = await log.append('run_poisoned', event({ causation: 'run_poisoned:1', key: 'b' }));
    const poison = await admin.request(`${options.subjectPrefix}.run_poisoned.step.completed`, '{"not": json');
    expect(poison.json<{ seq: number }>().seq).toBeGreaterThan(second.streamSeq);
    const poisonSeq = poison.json<{ seq: number }>().seq;

    await expect(collect(log.readChain('run_poisoned'))).rejects.toMatchObject({ code: 'E_CHAIN_BROKEN', details: { reason: 'not_a_receipt', streamSeq: poisonSeq } });
    await expect(log.append('run_poisoned', event({ causation: 'run_poisoned:2', key: 'c' }), { expectedHeadSeq: 2 })).rejects.toMatchObject({ code: 'E_CHAIN_BROKEN', details: { reason: 'not_a_receipt' } });
    const past = await log.readChainPastBreaks('run_poisoned');
    expect(past.receipts.map((r) => r.receipt.seq)).toEqual([1, 2]);
    expect(past.breaks).toEqual([{ streamSeq: poisonSeq, subject: `${options.subjectPrefix}.run_poisoned.step.completed`, afterSeq: 2, reason: expect.stringContaining('is not JSON') as unknown }]);

    // A guard on another head is still refused; on the last receipt's, it is stored after the poison message.
    await expect(log.append('run_poisoned', event({ causation: 'run_poisoned:2', key: 'd' }), { expectedHeadSeq: 1, pastBreaks: true })).rejects.toSatisfy(isHeadMoved);
    const failed = await log.append('run_poisoned', event({ type: 'run.failed', causation: 'run_poisoned:2', key: 'chain-break', fields: { error_code: 'E_CHAIN_BROKEN', message: 'm' } }), { expectedHeadSeq: 2, pastBreaks: true });
    expect(failed.receipt).toMatchObject({ seq: 3, prev_hash: second.receipt.hash });
    expect(failed.streamSeq).toBeGreaterThan(poisonSeq);
    // The same event again is the one stored; the receipts verify as a chain, the poison message no part of it.
    expect((await log.append('run_poisoned', event({ type: 'run.failed', causation: 'run_poisoned:2', key: 'chain-break', fields: { error_code: 'E_CHAIN_BROKEN', message: 'm' } }), { expectedHeadSeq: 2, pastBreaks: true })).duplicate).toBe(true);
    const after = await log.readChainPastBreaks('run_poisoned');
    expect(verifyChain(after.receipts.map((r) => r.receipt), { chainId: 'run_poisoned' })).toMatchObject({ ok: true, count: 3 });
    expect(first.receipt.seq).toBe(1);
  });
});
