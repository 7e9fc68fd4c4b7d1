import { parseEvidenceReceipt } from '@cairn/contracts';
import type { EvidenceReceipt } from '@cairn/contracts';
import { EvidenceLog, isHeadMoved } from '@cairn/evidence-log';
import { testNatsUrl, uniqueName } from '@cairn/testing';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ReactionContext } from './reaction-context.js';

let nc: NatsConnection;
let log: EvidenceLog;
let stream: string;

beforeAll(async () => {
  nc = await connect({ servers: testNatsUrl() });
  stream = uniqueName('REACTCTX').toUpperCase();
  log = await EvidenceLog.fromConnection(nc, { servers: testNatsUrl(), stream, subjectPrefix: uniqueName('reactctx').toLowerCase() });
});

afterAll(async () => {
  await log.close();
  await (await jetstreamManager(nc)).streams.delete(stream).catch(() => false);
  await nc.close();
});

const SHA = 'a'.repeat(64);

/** A submitted run, and the reaction context of its `run.submitted` (as policy gets it). */
async function submittedRun(): Promise<ReactionContext> {
  const runId = `run_${uniqueName('ctx').toLowerCase()}`;
  const spec = { name: 'ctx', steps: [{ argv: ['true'] }] };
  const { receipt } = await log.append(runId, {
    type: 'run.submitted',
    actor: 'intake',
    tenant: 'acme',
    causation: null,
    fields: { spec, spec_sha256: SHA, submitted_by: 'key:k1', idempotency_key_sha256: SHA },
  });
  const parsed = parseEvidenceReceipt(receipt);
  if (!parsed.ok) throw new Error(parsed.message);
  return new ReactionContext(parsed.receipt, 'policy', log, () => undefined);
}

async function cancel(runId: string): Promise<void> {
  await log.append(runId, { type: 'run.cancelled', actor: 'intake', tenant: 'acme', causation: null, key: 'cancel', fields: { cancelled_by: 'key:k1' } });
}

async function types(runId: string): Promise<string[]> {
  const out: string[] = [];
  for await (const stored of log.readChain(runId)) out.push(stored.receipt.type);
  return out;
}

const allow = { decision: 'allow', policy_version: SHA, reasons: [] };

function parsed(raw: readonly unknown[]): EvidenceReceipt[] {
  return raw.map((r) => {
    const p = parseEvidenceReceipt(r);
    if (!p.ok) throw new Error(p.message);
    return p.receipt;
  });
}

describe('ReactionContext: guarded appends', () => {
  it('appendAt stores onto the head it names, caused by the receipt, and refuses one that moved (nothing stored)', async () => {
    const ctx = await submittedRun();
    const { receipt } = await ctx.appendAt(1, 'policy.decided', allow);
    expect(receipt).toMatchObject({ seq: 2, actor: 'policy', causation: `${ctx.chainId}:1`, type: 'policy.decided' });
    const error = await ctx.appendAt(1, 'approval.requested', { approval_id: 'a', scope: 'run', step_index: null, reason: 'r', expires_at: '2030-01-01T00:00:00.000Z' }).catch((e: unknown) => e);
    expect(isHeadMoved(error)).toBe(true);
    expect(await types(ctx.chainId)).toEqual(['run.submitted', 'policy.decided']);
  });

  it('still checks the fields against the contract first', async () => {
    const ctx = await submittedRun();
    await expect(ctx.appendAt(1, 'policy.decided', { decision: 'maybe' })).rejects.toMatchObject({ code: 'E_INTERNAL' });
    expect(await types(ctx.chainId)).toEqual(['run.submitted']);
  });

  it('refuses text no projection could store — a NUL in a message, in a fact, in a fact’s name — and stores nothing (the projector never sees it)', async () => {
    const ctx = await submittedRun();
    await expect(ctx.append('run.failed', { error_code: 'E_INTERNAL', message: 'disk\u0000full' })).rejects.toMatchObject({
      code: 'E_INTERNAL',
      message: expect.stringContaining('message: text may not contain NUL (U+0000)') as string,
    });
    await expect(ctx.appendAt(1, 'kernel.facts', { facts: { tap: { bail_reason: 'disk\u0000full' } }, operations: ['tap_summary'] })).rejects.toMatchObject({
      code: 'E_INTERNAL',
      message: expect.stringContaining('facts.tap.bail_reason: text may not contain NUL (U+0000)') as string,
    });
    await expect(ctx.appendAt(1, 'kernel.facts', { facts: { artifacts: { '/out/a\u0000b': { bytes: 1 } } }, operations: ['file_digest'] })).rejects.toMatchObject({ code: 'E_INTERNAL' });
    expect(await types(ctx.chainId)).toEqual(['run.submitted']);
  });
});

describe('ReactionContext.causedBy', () => {
  it('appends caused by another receipt of the chain, and refuses one of another chain', async () => {
    const ctx = await submittedRun();
    const { receipt } = await log.append(ctx.chainId, { type: 'run.cancel_requested', actor: 'intake', tenant: 'acme', causation: null, fields: { requested_by: 'key:k1' } });
    const request = parsed([receipt])[0]!;
    const answer = await ctx.causedBy(request).appendAt(2, 'run.cancelled', { cancelled_by: 'key:k1' }, 'answer');
    expect(answer.receipt).toMatchObject({ seq: 3, actor: 'policy', causation: `${ctx.chainId}:2` });
    const other = await submittedRun();
    expect(() => other.causedBy(request)).toThrow(/cannot answer/);
  });
});

describe('ReactionContext.reactOnChain: read, decide, append — without the race', () => {
  it('given a cancel landing between the read and the append, when the reaction decides again, then it skips: nothing follows run.cancelled', async () => {
    const ctx = await submittedRun();
    const seen: number[] = [];
    const outcome = await ctx.reactOnChain(async (chain) => {
      seen.push(chain.headSeq);
      if (parsed(chain.receipts).some((r) => r.type === 'run.cancelled')) return 'skipped';
      if (seen.length === 1) await cancel(ctx.chainId); // the race, made to happen
      await ctx.appendAt(chain.headSeq, 'policy.decided', allow);
      return 'decided';
    });
    expect(outcome).toBe('skipped');
    expect(seen).toEqual([1, 2]);
    expect(await types(ctx.chainId)).toEqual(['run.submitted', 'run.cancelled']);
  });

  it('given a head that keeps moving, then it gives up after maxReads with the conflict (the reactor retries later)', async () => {
    const ctx = await submittedRun();
    let calls = 0;
    const error = await ctx
      .reactOnChain(async (chain) => {
        calls += 1;
        await log.append(ctx.chainId, { type: 'alert.raised', actor: 'test', tenant: 'acme', causation: null, key: `mover-${calls}`, fields: { severity: 'warning', error_code: 'E_INTERNAL', message: 'moving' } });
        await ctx.appendAt(chain.headSeq, 'policy.decided', allow);
      }, 3)
      .catch((e: unknown) => e);
    expect(isHeadMoved(error)).toBe(true);
    expect(calls).toBe(3);
    expect((await types(ctx.chainId)).filter((t) => t === 'policy.decided')).toEqual([]);
  });

  it('rethrows any other failure at once', async () => {
    const ctx = await submittedRun();
    let calls = 0;
    await expect(
      ctx.reactOnChain(() => {
        calls += 1;
        return Promise.reject(new Error('decide blew up'));
      }),
    ).rejects.toThrow('decide blew up');
    expect(calls).toBe(1);
  });
});

describe('ReactionContext.deliveredSnapshot: the chain as delivered, when nothing was stored after it', () => {
  /** Another process's log on the same stream, fed the chain as its consumer would feed it, and the context of its last receipt. */
  async function deliveredTo(runId: string, latest: boolean): Promise<{ ctx: ReactionContext; reactorLog: EvidenceLog }> {
    const reactorLog = await EvidenceLog.fromConnection(nc, { servers: testNatsUrl(), stream, subjectPrefix: log.subjectPrefix });
    const chain: { streamSeq: number; subject: string; receipt: unknown }[] = [];
    for await (const stored of log.readChain(runId)) chain.push(stored);
    for (const stored of chain) reactorLog.observe(stored.subject, stored.streamSeq, new TextEncoder().encode(JSON.stringify(stored.receipt)), null);
    const last = chain.at(-1)!;
    const receipt = parsed([last.receipt])[0]!;
    const msgId = (await (await jetstreamManager(nc)).direct.getMessage(stream, { seq: last.streamSeq }))!.header.get('Nats-Msg-Id');
    return { ctx: new ReactionContext(receipt, 'policy', reactorLog, () => undefined, { streamSeq: last.streamSeq, msgId, latest }), reactorLog };
  }

  it('serves the chain up to the delivered receipt without reading the stream, and a reaction on it that the chain moved past decides again on the chain as stored', async () => {
    const submitted = await submittedRun();
    const { ctx, reactorLog } = await deliveredTo(submitted.chainId, true);
    // Stored after the delivery: a read of the stream sees it, the chain as delivered does not.
    await cancel(submitted.chainId);
    const seen: number[] = [];
    const outcome = await ctx.reactOnChain(async (chain) => {
      seen.push(chain.headSeq);
      if (parsed(chain.receipts).some((r) => r.type === 'run.cancelled')) return 'skipped';
      await ctx.appendAt(chain.headSeq, 'policy.decided', allow);
      return 'decided';
    });
    // First look: the chain as delivered (head 1); its append refused; the second look reads the stream.
    expect(seen).toEqual([1, 2]);
    expect(outcome).toBe('skipped');
    expect(await types(submitted.chainId)).toEqual(['run.submitted', 'run.cancelled']);
    expect(reactorLog.chainReads.fromStream + reactorLog.chainReads.fromMemory).toBe(2);
    await reactorLog.close();
  });

  it('appends onto the delivered head without reading it first', async () => {
    const submitted = await submittedRun();
    const { ctx, reactorLog } = await deliveredTo(submitted.chainId, true);
    await ctx.reactOnChain(async (chain) => ctx.appendAt(chain.headSeq, 'policy.decided', allow));
    expect(reactorLog.appendHeadReads).toBe(0);
    expect(await types(submitted.chainId)).toEqual(['run.submitted', 'policy.decided']);
    await reactorLog.close();
  });

  it('reads the chain as stored when more was pending at the delivery, or once the context has looked or appended', async () => {
    const submitted = await submittedRun();
    const pending = await deliveredTo(submitted.chainId, false);
    await cancel(submitted.chainId);
    expect((await pending.ctx.deliveredSnapshot()).headSeq).toBe(2);
    await pending.reactorLog.close();

    const other = await submittedRun();
    const looked = await deliveredTo(other.chainId, true);
    await looked.ctx.appendAt(1, 'policy.decided', allow);
    await cancel(other.chainId);
    expect((await looked.ctx.deliveredSnapshot()).headSeq).toBe(3);
    await looked.reactorLog.close();
  });
});
