import { GENESIS_HASH } from '@cairn/contracts';
import { canonicalJson, sealReceipt } from '@cairn/evidence';
import { describe, expect, it } from 'vitest';
import { POISON_RAW_LIMIT } from './poison-reason.constants.js';
import { MAX_JSON_DEPTH } from './receipt-check.js';
import { ProjectionFold, submissionTraceId } from './projection-fold.js';
import type { FoldOutcome, RawEvidenceMessage } from './projection-fold.js';
import { SANDBOX_COLUMNS, sandboxRowFromDb, sandboxValues } from './sandbox-row.mapper.js';
import type { SandboxDbRow } from './sandbox-row.mapper.js';
import { encodeReceipt, FixtureChain, runLifecycleEvents, sandboxSessionEvents, typedSubject } from './testing/evidence.fixture.js';

const PREFIX = 'cairn.evidence';
const encoder = new TextEncoder();
const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const OTHER_TRACE_ID = '0af7651916cd43dd8448eb211c80319c';
const traceparent = (traceId: string) => `00-${traceId}-00f067aa0ba902b7-01`;

/** Feeds messages in stream order; a chain's subject (`<prefix>.<chain id>`) gets the type the log would add, unless `raw`. */
function feeder(fold: ProjectionFold, raw = false) {
  let streamSeq = 0;
  return (subject: string, data: Uint8Array | string, traceparent: string | null = null): FoldOutcome => {
    streamSeq += 1;
    const chainSubject = !raw && subject.startsWith(`${PREFIX}.`) && !subject.slice(PREFIX.length + 1).includes('.');
    const message: RawEvidenceMessage = { streamSeq, subject: chainSubject ? typedSubject(subject, data) : subject, data: typeof data === 'string' ? encoder.encode(data) : data, traceparent };
    return fold.apply(message);
  };
}

function poisonReason(outcome: FoldOutcome): string {
  return outcome.kind === 'poison' ? outcome.poison.reason : 'projected';
}

describe('ProjectionFold', () => {
  it('projects a whole run chain and folds it into a sealed run', () => {
    const fold = new ProjectionFold(PREFIX);
    const feed = feeder(fold);
    const chain = new FixtureChain('run_a1');
    const outcomes = runLifecycleEvents('run_a1').map((e) => feed(`${PREFIX}.run_a1`, encodeReceipt(chain.next(e))));
    expect(outcomes.map(poisonReason)).toEqual(outcomes.map(() => 'projected'));
    const last = outcomes.at(-1);
    expect(last?.kind === 'event' ? last.run : null).toMatchObject({
      view: { runId: 'run_a1', state: 'SEALED', sealed: true, verdict: 'SUPPORTS', score: 3, maxScore: 5, eventCount: outcomes.length },
      lastStreamSeq: outcomes.length,
    });
    const first = outcomes[0];
    expect(first?.kind === 'event' ? first.event : null).toMatchObject({ streamSeq: 1, chainId: 'run_a1', seq: 1, type: 'run.submitted', prevHash: GENESIS_HASH });
  });

  it('projects sandbox chains as receipts and a sandbox view, without a run', () => {
    const fold = new ProjectionFold(PREFIX);
    const feed = feeder(fold);
    const chain = new FixtureChain('sbx_s1');
    const outcomes = sandboxSessionEvents('sbx_s1').map((e) => feed(`${PREFIX}.sbx_s1`, encodeReceipt(chain.next(e))));
    expect(outcomes.every((o) => o.kind === 'event' && o.run === null && o.sandbox?.view.id === 'sbx_s1')).toBe(true);
    expect(fold.runCount).toBe(0);
    expect(fold.sandboxCount).toBe(1);
    const last = outcomes.at(-1);
    expect(last?.kind === 'event' ? last.sandbox : null).toMatchObject({
      view: { id: 'sbx_s1', tenant: 'acme', state: 'DESTROYED', destroyReason: 'deleted', operations: 3, headSeq: outcomes.length, sealed: false },
      lastStreamSeq: outcomes.length,
    });
  });

  it('stores an admin chain (adm_<tenant>) as receipts only: no run, no sandbox, nothing poisoned', () => {
    const fold = new ProjectionFold(PREFIX);
    const feed = feeder(fold);
    const chain = new FixtureChain('adm_acme');
    const key = { key_id: 'k1', prefix: 'abcdefgh', scopes: ['runs:read'], expires_at: null, created_by: 'key:op' };
    const events = [
      { type: 'admin.tenant_created', actor: 'intake', fields: { created_by: 'key:op' } },
      { type: 'admin.key_created', actor: 'intake', fields: key },
      { type: 'admin.key_rotated', actor: 'intake', fields: { key_id: 'k1', rotation: 1, grace_until: null, rotated_by: 'key:op' } },
      { type: 'admin.key_revoked', actor: 'intake', fields: { key_id: 'k1', revoked_by: 'key:op' } },
    ];
    const outcomes = events.map((e) => feed(`${PREFIX}.adm_acme`, encodeReceipt(chain.next(e))));
    expect(outcomes.map(poisonReason)).toEqual(events.map(() => 'projected'));
    expect(outcomes.every((o) => o.kind === 'event' && o.run === null && o.sandbox === null)).toBe(true);
    expect(fold.runCount).toBe(0);
    expect(fold.sandboxCount).toBe(0);
    // A run's receipt on an admin chain breaks its contract: recorded, never folded into anything.
    expect(poisonReason(feed(`${PREFIX}.adm_acme`, encodeReceipt(chain.next(runLifecycleEvents('adm_acme')[0]!))))).toBe('invalid_fields');
  });

  it('folds a sandbox chain seeded from its stored row exactly as from scratch', () => {
    const events = sandboxSessionEvents('sbx_s2');
    const chain = new FixtureChain('sbx_s2');
    const receipts = events.map((e) => encodeReceipt(chain.next(e)));
    const whole = new ProjectionFold(PREFIX);
    const feedWhole = feeder(whole);
    const all = receipts.map((r) => feedWhole(`${PREFIX}.sbx_s2`, r));
    const half = all[3];
    if (half?.kind !== 'event' || half.sandbox === null) throw new Error('the fourth receipt was not projected');
    const resumed = new ProjectionFold(PREFIX);
    resumed.seedHead('sbx_s2', { seq: half.event.seq, hash: half.event.hash, tenant: 'acme' });
    // Through the row mapper, as the live writer seeds it from the table.
    const values = sandboxValues(half.sandbox);
    const row = Object.fromEntries(SANDBOX_COLUMNS.map((column, i) => [column, values[i]])) as Record<string, unknown>;
    const parsed: unknown[] = [JSON.parse(String(row.caps)), JSON.parse(String(row.network))];
    resumed.seedSandbox(sandboxRowFromDb({ ...row, caps: parsed[0], network: parsed[1] } as unknown as SandboxDbRow));
    let streamSeq = 4;
    const rest = receipts.slice(4).map((data) => resumed.apply({ streamSeq: ++streamSeq, subject: typedSubject(`${PREFIX}.sbx_s2`, data), data, traceparent: null }));
    const [a, b] = [all.at(-1), rest.at(-1)];
    expect(a?.kind === 'event' && b?.kind === 'event' ? b.sandbox : 'poison').toEqual(a?.kind === 'event' ? a.sandbox : null);
  });

  it('keeps the receipt text exactly as stored', () => {
    const fold = new ProjectionFold(PREFIX);
    const receipt = new FixtureChain('run_t1').next(runLifecycleEvents('run_t1')[0]!);
    const text = canonicalJson(receipt);
    const outcome = feeder(fold)(`${PREFIX}.run_t1`, text);
    expect(outcome.kind === 'event' ? outcome.event.receiptJson : null).toBe(text);
  });

  it.each([
    ['a subject outside the prefix', 'other.run_a1', 'invalid_subject'],
    ['a subject whose type is no type', `${PREFIX}.run_a1.x`, 'invalid_subject'],
    ['a subject that is not a chain id', `${PREFIX}.job_1.run.submitted`, 'invalid_subject'],
    ['a subject of the earlier layout (no type)', `${PREFIX}.run_a1`, 'invalid_subject'],
    ['a subject naming another type than the receipt', `${PREFIX}.run_a1.run.sealed`, 'invalid_subject'],
  ])('records %s as invalid_subject', (_what, subject, reason) => {
    const receipt = new FixtureChain('run_a1').next(runLifecycleEvents('run_a1')[0]!);
    expect(poisonReason(feeder(new ProjectionFold(PREFIX), true)(subject, encodeReceipt(receipt)))).toBe(reason);
  });

  it.each([
    ['garbage', encoder.encode('not json {')],
    ['invalid UTF-8', new Uint8Array([0x7b, 0xff, 0xfe, 0x7d])],
    ['a JSON array', encoder.encode('[1,2]')],
    ['JSON null', encoder.encode('null')],
  ])('records %s as not_json', (_what, data) => {
    expect(poisonReason(feeder(new ProjectionFold(PREFIX))(`${PREFIX}.run_a1`, data))).toBe('not_json');
  });

  it('records strings jsonb cannot hold as unstorable_json', () => {
    const chain = new FixtureChain('run_u1');
    const body = runLifecycleEvents('run_u1')[0]!;
    const nul = chain.next({ ...body, fields: { ...body.fields, spec: { name: 'a\u0000b', steps: [{ argv: ['x'] }] } } });
    const feed = feeder(new ProjectionFold(PREFIX));
    expect(poisonReason(feed(`${PREFIX}.run_u1`, JSON.stringify(nul)))).toBe('unstorable_json');
    const lone = JSON.stringify({ ...nul, spec: { name: 'ok', steps: [{ argv: ['x'] }] } }).replace('"ok"', '"\\ud800"');
    expect(poisonReason(feed(`${PREFIX}.run_u1`, lone))).toBe('unstorable_json');
  });

  it('records JSON jsonb cannot take (nesting past MAX_JSON_DEPTH, huge exponents) as unstorable_json, before any validator recurses into it', () => {
    const feed = feeder(new ProjectionFold(PREFIX));
    const facts = (depth: number) => ({ type: 'kernel.facts', actor: 'kernel', fields: { facts: { deep: JSON.parse('['.repeat(depth) + ']'.repeat(depth)) as unknown }, operations: [] } });
    const shallow = new FixtureChain('run_d1').next(facts(MAX_JSON_DEPTH - 10));
    expect(poisonReason(feed(`${PREFIX}.run_d1`, encodeReceipt(shallow)))).toBe('projected');
    // 20 000 levels: zod would throw a RangeError and jsonb would refuse it; neither is reached.
    const placeholder = new FixtureChain('run_d2').next({ type: 'kernel.facts', actor: 'kernel', fields: { facts: { deep: 'X' }, operations: [] } });
    const deep = JSON.stringify(placeholder).replace('"X"', '['.repeat(20_000) + ']'.repeat(20_000));
    expect(poisonReason(feed(`${PREFIX}.run_d2`, deep))).toBe('unstorable_json');
    // A number jsonb's numeric overflows on (JSON.parse reads it as 0).
    const tiny = JSON.stringify(placeholder).replace('"X"', '1e-20000');
    expect(poisonReason(feed(`${PREFIX}.run_d2`, tiny))).toBe('unstorable_json');
  });

  it('tells an invalid envelope, an unknown type and invalid fields apart', () => {
    const feed = feeder(new ProjectionFold(PREFIX));
    const submitted = runLifecycleEvents('run_v1')[0]!;
    const noSeq = { ...new FixtureChain('run_v1').next(submitted), seq: undefined };
    expect(poisonReason(feed(`${PREFIX}.run_v1`, JSON.stringify(noSeq)))).toBe('invalid_envelope');
    const badDate = new FixtureChain('run_v1').next(submitted);
    expect(poisonReason(feed(`${PREFIX}.run_v1`, JSON.stringify({ ...badDate, ts: '2026-02-30T00:00:00.000Z' })))).toBe('invalid_envelope');
    const unknown = new FixtureChain('run_v1').next({ type: 'run.teleported', actor: 'intake', fields: {} });
    expect(poisonReason(feed(`${PREFIX}.run_v1`, encodeReceipt(unknown)))).toBe('unknown_type');
    const invalid = new FixtureChain('run_v1').next({ ...submitted, fields: { ...submitted.fields, spec_sha256: 'nope' } });
    expect(poisonReason(feed(`${PREFIX}.run_v1`, encodeReceipt(invalid)))).toBe('invalid_fields');
  });

  it('checks each receipt continues its chain, and poison never moves the chain', () => {
    const fold = new ProjectionFold(PREFIX);
    const feed = feeder(fold);
    const subject = `${PREFIX}.run_c1`;
    const events = runLifecycleEvents('run_c1');
    const chain = new FixtureChain('run_c1');
    const r1 = chain.next(events[0]!);
    const r2 = chain.next(events[1]!);
    const r3 = chain.next(events[2]!);
    expect(poisonReason(feed(subject, encodeReceipt(r1)))).toBe('projected');
    expect(poisonReason(feed(`${PREFIX}.run_other`, encodeReceipt(r2)))).toBe('chain_id_mismatch');
    expect(poisonReason(feed(subject, encodeReceipt(r3)))).toBe('seq_gap');
    expect(poisonReason(feed(subject, encodeReceipt(r1)))).toBe('duplicate_seq');
    const { prev_hash: _p, hash: _h, ...body2 } = r2;
    const forked = sealReceipt(GENESIS_HASH, body2);
    expect(poisonReason(feed(subject, encodeReceipt(forked)))).toBe('prev_hash_mismatch');
    const otherTenant = sealReceipt(r1.hash, { ...body2, tenant: 'globex' });
    expect(poisonReason(feed(subject, encodeReceipt(otherTenant)))).toBe('tenant_mismatch');
    // After all that poison the chain still stands at seq 1: the real seq 2 and 3 continue it.
    expect(poisonReason(feed(subject, encodeReceipt(r2)))).toBe('projected');
    expect(poisonReason(feed(subject, encodeReceipt(r3)))).toBe('projected');
  });

  it('continues from a seeded head and run, as the live writer seeds it', () => {
    const chain = new FixtureChain('run_s1');
    const events = runLifecycleEvents('run_s1');
    const whole = new ProjectionFold(PREFIX);
    const feedWhole = feeder(whole);
    const outcomes = events.slice(0, 3).map((e) => feedWhole(`${PREFIX}.run_s1`, encodeReceipt(chain.next(e))));
    const last = outcomes[2]!;
    if (last.kind !== 'event' || last.run === null) throw new Error('expected a projected run receipt');

    const resumed = new ProjectionFold(PREFIX);
    resumed.seedHead('run_s1', { seq: last.event.seq, hash: last.event.hash, tenant: last.event.tenant });
    resumed.seedRun(last.run);
    const data = encodeReceipt(chain.next(events[3]!));
    const next = resumed.apply({ streamSeq: 10, subject: typedSubject(`${PREFIX}.run_s1`, data), data, traceparent: null });
    expect(next.kind === 'event' ? next.run?.view : null).toMatchObject({ state: 'RUNNING', lastSeq: 4, eventCount: 4 });
  });

  it("takes the run's trace id from its run.submitted's traceparent, and keeps it whatever later messages carry", () => {
    const fold = new ProjectionFold(PREFIX);
    const feed = feeder(fold);
    const chain = new FixtureChain('run_tr1');
    const outcomes = runLifecycleEvents('run_tr1').map((e, i) =>
      // Later receipts carry spans of the same trace, another trace, or nothing at all.
      feed(`${PREFIX}.run_tr1`, encodeReceipt(chain.next(e)), i === 0 ? traceparent(TRACE_ID) : i % 3 === 1 ? traceparent(OTHER_TRACE_ID) : i % 3 === 2 ? null : 'abc'),
    );
    expect(outcomes.map((o) => (o.kind === 'event' ? o.run?.traceId : 'poison'))).toEqual(outcomes.map(() => TRACE_ID));
    expect([...fold.allRuns()].map((r) => r.traceId)).toEqual([TRACE_ID]);
  });

  it('gives a run submitted without a traceparent, or with a malformed one, no trace id, and a later traceparent none either', () => {
    const fold = new ProjectionFold(PREFIX);
    const feed = feeder(fold);
    for (const [id, header] of [['run_tr2', null], ['run_tr3', 'abc'], ['run_tr4', `00-${'0'.repeat(32)}-00f067aa0ba902b7-01`]] as const) {
      const chain = new FixtureChain(id);
      const outcomes = runLifecycleEvents(id).map((e, i) => feed(`${PREFIX}.${id}`, encodeReceipt(chain.next(e)), i === 0 ? header : traceparent(TRACE_ID)));
      expect(outcomes.map((o) => (o.kind === 'event' ? o.run?.traceId : 'poison'))).toEqual(outcomes.map(() => null));
    }
  });

  it('keeps a seeded run\'s trace id, as the live writer seeds it from its row', () => {
    const chain = new FixtureChain('run_tr5');
    const events = runLifecycleEvents('run_tr5');
    const first = feeder(new ProjectionFold(PREFIX))(`${PREFIX}.run_tr5`, encodeReceipt(chain.next(events[0]!)), traceparent(TRACE_ID));
    if (first.kind !== 'event' || first.run === null) throw new Error('expected a projected run receipt');
    const resumed = new ProjectionFold(PREFIX);
    resumed.seedHead('run_tr5', { seq: first.event.seq, hash: first.event.hash, tenant: first.event.tenant });
    resumed.seedRun(first.run);
    const data = encodeReceipt(chain.next(events[1]!));
    const next = resumed.apply({ streamSeq: 2, subject: typedSubject(`${PREFIX}.run_tr5`, data), data, traceparent: traceparent(OTHER_TRACE_ID) });
    expect(next.kind === 'event' ? next.run?.traceId : 'poison').toBe(TRACE_ID);
  });

  it('reads a traceparent only for a run.submitted', () => {
    let reads = 0;
    const message = {
      get traceparent() {
        reads += 1;
        return traceparent(TRACE_ID);
      },
    };
    expect(submissionTraceId('policy.decided', message)).toBeNull();
    expect(reads).toBe(0);
    expect(submissionTraceId('run.submitted', message)).toBe(TRACE_ID);
    expect(reads).toBe(1);
  });

  it('keeps at most POISON_RAW_LIMIT bytes of a poison message, and its full length', () => {
    const big = new Uint8Array(POISON_RAW_LIMIT + 10).fill(0x61);
    const outcome = feeder(new ProjectionFold(PREFIX))(`${PREFIX}.run_a1`, big);
    expect(outcome.kind === 'poison' ? [outcome.poison.raw.byteLength, outcome.poison.rawLength] : null).toEqual([POISON_RAW_LIMIT, POISON_RAW_LIMIT + 10]);
  });
});
