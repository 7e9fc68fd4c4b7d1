import 'reflect-metadata';
import { canonicalJson, sealReceipt } from '@cairn/evidence';
import { GENESIS_HASH } from '@cairn/contracts';
import { createTestDatabase } from '@cairn/testing';
import type { TestDatabase } from '@cairn/testing';
import type { DataSource } from 'typeorm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDataSource, runMigrations } from './data-source.js';
import type { RawEvidenceMessage } from './projection-fold.js';
import { rebuildProjections } from './projection-rebuild.js';
import type { ProjectionSource } from './projection-rebuild.js';
import { memorySource as memoryStream } from './testing/memory-source.js';
import { ProjectionWriter } from './projection-writer.js';
import { checkSchemaMatchesEntities } from './schema-check.js';
import { encodeReceipt, FixtureChain, runLifecycleEvents, sandboxSessionEvents, typedSubject } from './testing/evidence.fixture.js';

const STREAM = 'REBUILD_TEST';
const PREFIX = 'cairn.rebuild';
const memorySource = (messages: readonly RawEvidenceMessage[]): ProjectionSource => memoryStream(messages, STREAM, PREFIX);
const encoder = new TextEncoder();

let live: TestDatabase;
let rebuilt: TestDatabase;
let liveSource: DataSource;
let rebuiltSource: DataSource;

beforeAll(async () => {
  [live, rebuilt] = await Promise.all([createTestDatabase('cairn_rebuild_live'), createTestDatabase('cairn_rebuild_copy')]);
  liveSource = createDataSource(live.url, { poolSize: 2 });
  rebuiltSource = createDataSource(rebuilt.url, { poolSize: 2 });
  await Promise.all([liveSource.initialize(), rebuiltSource.initialize()]);
  await Promise.all([runMigrations(liveSource), runMigrations(rebuiltSource)]);
});

afterAll(async () => {
  await Promise.all([liveSource?.destroy(), rebuiltSource?.destroy()]);
  await Promise.all([live?.drop(), rebuilt?.drop()]);
});

const RUN_TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const OTHER_TRACE_ID = '0af7651916cd43dd8448eb211c80319c';
const SANDBOX_TRACE_ID = 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa';
const traceparent = (traceId: string) => `00-${traceId}-00f067aa0ba902b7-01`;

/**
 * Receipts that exercise every column and the receipt text: chains of both kinds, text that COPY
 * would escape (tab, newline, backslash, non-ASCII), a UTF-8 byte order mark, years far from
 * 2000, and poison of several kinds in between.
 */
function awkwardStream(): RawEvidenceMessage[] {
  const bodies: [string, Uint8Array][] = [];
  const run = new FixtureChain('run_k1', 'acme', Date.UTC(1999, 11, 31, 23, 59, 58));
  const sandbox = new FixtureChain('sbx_k1', 'beta');
  const runEvents = runLifecycleEvents('run_k1', 2);
  const sandboxEvents = sandboxSessionEvents('sbx_k1');
  for (let i = 0; i < Math.max(runEvents.length, sandboxEvents.length); i++) {
    const r = runEvents[i];
    const s = sandboxEvents[i];
    if (r !== undefined) bodies.push(['run_k1', encodeReceipt(run.next(r))]);
    if (s !== undefined) bodies.push(['sbx_k1', encodeReceipt(sandbox.next(s))]);
    if (i === 2) {
      bodies.push(['run_k1', encoder.encode('{"not":"a receipt"')]);
      bodies.push(bodies[0]!); // the chain's first receipt again: duplicate_seq
    }
  }
  // Free text that COPY's text format would escape, and characters beyond ASCII.
  const alert = new FixtureChain('sbx_k3');
  const message = 'tab\there, new\nline, cr\r, back\\slash, "quoted", é ü 日本 🙂';
  bodies.push(['sbx_k3', encodeReceipt(alert.next({ type: 'alert.raised', actor: 'runtime', fields: { severity: 'warning', error_code: 'E_SECRET_SEEN', message } }))]);
  // A receipt stored with a byte order mark, and one from year 0001: both valid receipts.
  const far = sealReceipt(GENESIS_HASH, { v: 1, seq: 1, run_id: 'sbx_k2', tenant: 'acme', type: 'sandbox.expired', actor: 'runtime', ts: '0001-01-01T00:00:00.000Z', causation: null, ttl_seconds: 1, expires_at: '9999-12-31T23:59:59.999Z' });
  bodies.push(['sbx_k2', new Uint8Array([0xef, 0xbb, 0xbf, ...encoder.encode(canonicalJson(far))])]);
  // Headers travel beside the bodies: the run's first message names its trace, later ones another, sandboxes a third.
  let runMessages = 0;
  const traceparentOf = (chain: string) => (chain === 'run_k1' ? traceparent(runMessages++ === 0 ? RUN_TRACE_ID : OTHER_TRACE_ID) : traceparent(SANDBOX_TRACE_ID));
  return bodies.map(([chain, data], i) => ({ streamSeq: i + 1, subject: typedSubject(`${PREFIX}.${chain}`, data), data, traceparent: traceparentOf(chain) }));
}

async function dump(dataSource: DataSource): Promise<Record<string, unknown[]>> {
  const rows = async (sql: string) => (await dataSource.query<{ row: unknown }[]>(sql)).map((r) => r.row);
  return {
    evidence_events: await rows(`SELECT to_jsonb(t) - 'receipt' || jsonb_build_object('receipt', receipt::text) AS row FROM evidence_events t ORDER BY stream_seq`),
    runs: await rows('SELECT to_jsonb(t) AS row FROM runs t ORDER BY run_id'),
    poison_events: await rows(`SELECT to_jsonb(t) - 'recorded_at' AS row FROM poison_events t ORDER BY stream_seq`),
    projection_positions: await rows(`SELECT to_jsonb(t) - 'updated_at' AS row FROM projection_positions t ORDER BY name`),
  };
}

describe('rebuildProjections', () => {
  const messages = awkwardStream();

  it('writes what the live writer writes, receipt text byte for byte', async () => {
    const writer = new ProjectionWriter(liveSource, { stream: STREAM, subjectPrefix: PREFIX });
    const applied = await writer.applyBatch(messages);
    expect(applied.poison).toBe(2);
    const result = await rebuildProjections({ dataSource: rebuiltSource, log: memorySource(messages) });
    expect(result).toMatchObject({ events: applied.projected, poison: 2, runs: 1, lastStreamSeq: messages.length });

    const expected = await dump(liveSource);
    expect(await dump(rebuiltSource)).toEqual(expected);
    // The run's trace id is its first message's header: no receipt holds it, and the rebuild read it again.
    expect(await rebuiltSource.query<unknown[]>('SELECT run_id, trace_id FROM runs')).toEqual([{ run_id: 'run_k1', trace_id: RUN_TRACE_ID }]);
    // json keeps the stream's text: the BOM-less bytes of every projected message.
    const texts = await rebuiltSource.query<{ stream_seq: string; receipt: string }[]>('SELECT stream_seq, receipt::text AS receipt FROM evidence_events ORDER BY stream_seq');
    const decoder = new TextDecoder();
    for (const row of texts) expect(row.receipt).toBe(decoder.decode(messages[Number(row.stream_seq) - 1]!.data));
    const far = await rebuiltSource.query<{ ts: string }[]>(`SELECT ts::text AS ts FROM evidence_events WHERE chain_id = 'sbx_k2'`);
    expect(far).toEqual([{ ts: '0001-01-01 00:00:00+00' }]);
  });

  it('puts back every index and constraint it dropped for the load, and they hold', async () => {
    const indexes = `SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'evidence_events' ORDER BY indexname`;
    const before = await liveSource.query<unknown[]>(indexes);
    await rebuildProjections({ dataSource: rebuiltSource, log: memorySource(messages) });
    expect(await rebuiltSource.query<unknown[]>(indexes)).toEqual(before);
    expect((await checkSchemaMatchesEntities(rebuiltSource)).differences).toEqual([]);
    await expect(
      rebuiltSource.query(`INSERT INTO evidence_events SELECT stream_seq + 1000, chain_id, seq, type, tenant, actor, ts, causation, prev_hash, hash, receipt FROM evidence_events LIMIT 1`),
    ).rejects.toThrow(/uq_evidence_events_chain_seq/);
  });

  it('rolls back whole when the stream read fails midway, leaving the previous projections', async () => {
    const before = await dump(rebuiltSource);
    const failing: ProjectionSource = {
      ...memorySource(messages),
      async *readAll() {
        yield* memorySource(messages.slice(0, 5)).readAll();
        throw new Error('the stream went away');
      },
    };
    await expect(rebuildProjections({ dataSource: rebuiltSource, log: failing })).rejects.toThrow(/went away/);
    expect(await dump(rebuiltSource)).toEqual(before);
  });

  it('rebuilds an empty stream into empty projections', async () => {
    const result = await rebuildProjections({ dataSource: rebuiltSource, log: memorySource([]) });
    expect(result).toMatchObject({ events: 0, poison: 0, runs: 0, lastStreamSeq: 0 });
    expect((await dump(rebuiltSource)).evidence_events).toEqual([]);
  });
});
