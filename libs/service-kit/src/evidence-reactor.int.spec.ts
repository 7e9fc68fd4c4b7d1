import { EvidenceLog } from '@cairn/evidence-log';
import { testNatsUrl, uniqueName } from '@cairn/testing';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { EvidenceReactor } from './evidence-reactor.js';
import type { ReactorHandler } from './evidence-reactor.js';
import { JsonLogger } from './json-logger.js';
import type { ReactionContext } from './reaction-context.js';

let nc: NatsConnection;
let log: EvidenceLog;
const streams: string[] = [];
const lines: string[] = [];
const logger = new JsonLogger('test', 'debug', (line) => lines.push(line));

beforeAll(async () => {
  nc = await connect({ servers: testNatsUrl() });
});

// Each test gets a stream of its own: a new durable delivers everything already in its stream.
beforeEach(async () => {
  const stream = uniqueName('REACTOR').toUpperCase();
  streams.push(stream);
  log = await EvidenceLog.fromConnection(nc, { servers: testNatsUrl(), stream, subjectPrefix: uniqueName('reactor').toLowerCase() });
});

afterAll(async () => {
  const jsm = await jetstreamManager(nc);
  for (const stream of streams) await jsm.streams.delete(stream);
  await nc.close();
});

async function cancel(chainId: string) {
  return log.append(chainId, { type: 'run.cancelled', actor: 'intake', tenant: 'default', causation: null, fields: { cancelled_by: 'intake' } });
}

async function receipts(chainId: string): Promise<Record<string, unknown>[]> {
  const out: Record<string, unknown>[] = [];
  for await (const stored of log.readChain(chainId)) out.push(stored.receipt);
  return out;
}

async function until(check: () => Promise<boolean>, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error('condition not met in time');
}

/** Seals a cancelled run: the smallest real reaction (a grader's). */
class Sealer implements ReactorHandler {
  readonly types = new Set(['run.cancelled']);
  calls = 0;
  async handle(ctx: ReactionContext): Promise<void> {
    this.calls += 1;
    await ctx.append('run.sealed', { final_state: 'CANCELLED', evidence_digest: ctx.receipt.hash });
  }
}

describe('EvidenceReactor on the real JetStream', () => {
  it('reacts once to each matching receipt, on the same chain, caused by it', async () => {
    const handler = new Sealer();
    const reactor = new EvidenceReactor({ service: 'grader', durable: uniqueName('d'), nc, log, handler, logger });
    const a = 'run_' + uniqueName('a').toLowerCase();
    const b = 'run_' + uniqueName('b').toLowerCase();
    await cancel(a);
    await reactor.start();
    await cancel(b);
    await until(async () => (await receipts(a)).length === 2 && (await receipts(b)).length === 2);
    await reactor.stop();
    const [first, seal] = await receipts(a);
    expect(seal).toMatchObject({ type: 'run.sealed', actor: 'grader', causation: `${a}:1`, seq: 2, evidence_digest: first!.hash });
    expect(handler.calls).toBe(2);
  });

  it('handles one chain one receipt at a time even across types (subjects name the type), other chains alongside', async () => {
    const active = new Map<string, number>();
    const overlaps: string[] = [];
    const seen: string[] = [];
    const handler: ReactorHandler = {
      types: new Set(['run.cancelled', 'run.failed']),
      async handle(ctx: ReactionContext) {
        const chain = ctx.chainId;
        if ((active.get(chain) ?? 0) > 0) overlaps.push(`${chain}:${ctx.receipt.type}`);
        active.set(chain, (active.get(chain) ?? 0) + 1);
        await new Promise((resolve) => setTimeout(resolve, 150));
        active.set(chain, active.get(chain)! - 1);
        seen.push(`${chain}:${ctx.receipt.type}`);
      },
    };
    const a = 'run_' + uniqueName('order').toLowerCase();
    const b = 'run_' + uniqueName('other').toLowerCase();
    for (const chain of [a, b]) {
      await cancel(chain);
      await log.append(chain, { type: 'run.failed', actor: 'runtime', tenant: 'default', causation: null, fields: { error_code: 'E_INTERNAL', message: 'second type' } });
    }
    const reactor = new EvidenceReactor({ service: 'grader', durable: uniqueName('d'), nc, log, handler, logger, concurrency: 8 });
    await reactor.start();
    await until(() => Promise.resolve(seen.length === 4));
    await reactor.stop();
    expect(overlaps).toEqual([]);
    // In chain order within each chain.
    expect(seen.filter((s) => s.startsWith(a))).toEqual([`${a}:run.cancelled`, `${a}:run.failed`]);
    expect(seen.filter((s) => s.startsWith(b))).toEqual([`${b}:run.cancelled`, `${b}:run.failed`]);
  });

  it('stores a reaction once when the same receipt is handled again by a fresh consumer', async () => {
    const chain = 'run_' + uniqueName('again').toLowerCase();
    await cancel(chain);
    for (const durable of [uniqueName('d1'), uniqueName('d2')]) {
      const reactor = new EvidenceReactor({ service: 'grader', durable, nc, log, handler: new Sealer(), logger });
      await reactor.start();
      await until(async () => reactor.handledCount > 0 && (await receipts(chain)).length >= 2);
      await reactor.stop();
    }
    const all = await receipts(chain);
    expect(all.map((r) => r.type)).toEqual(['run.cancelled', 'run.sealed']);
  });

  it('gives up on a chain after repeated failures and fails the run with E_UNKNOWN_STATE', async () => {
    const chain = 'run_' + uniqueName('broken').toLowerCase();
    let calls = 0;
    const handler: ReactorHandler = {
      types: new Set(['run.cancelled']),
      handle: () => {
        calls += 1;
        return Promise.reject(new Error('decide blew up'));
      },
    };
    const reactor = new EvidenceReactor({ service: 'grader', durable: uniqueName('d'), nc, log, handler, logger, maxDeliver: 2 });
    await cancel(chain);
    await reactor.start();
    await until(async () => (await receipts(chain)).length === 2);
    await reactor.stop();
    expect(calls).toBe(2);
    expect((await receipts(chain))[1]).toMatchObject({ type: 'run.failed', error_code: 'E_UNKNOWN_STATE', actor: 'grader' });
    expect(lines.some((l) => l.includes('giving up'))).toBe(true);
  });

  it('redelivers a receipt whose handler hangs past the handler timeout, and stops cleanly', async () => {
    const chain = 'run_' + uniqueName('stuck').toLowerCase();
    let calls = 0;
    const handler: ReactorHandler = {
      types: new Set(['run.cancelled']),
      handle: async (ctx) => {
        calls += 1;
        if (calls === 1) return new Promise<void>(() => undefined); // never settles
        await ctx.append('run.sealed', { final_state: 'CANCELLED', evidence_digest: ctx.receipt.hash });
      },
    };
    const reactor = new EvidenceReactor({ service: 'grader', durable: uniqueName('d'), nc, log, handler, logger, handlerTimeoutMs: 300 });
    await cancel(chain);
    await reactor.start();
    await until(async () => (await receipts(chain)).length === 2);
    const started = Date.now();
    await reactor.stop();
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(calls).toBe(2);
    expect((await receipts(chain))[1]).toMatchObject({ type: 'run.sealed' });
  });

  it('refuses to append an event that breaks its contract', async () => {
    const chain = 'run_' + uniqueName('bad').toLowerCase();
    const seen: unknown[] = [];
    const handler: ReactorHandler = {
      types: new Set(['run.cancelled']),
      handle: async (ctx) => {
        try {
          await ctx.append('run.sealed', { final_state: 'NOT_A_STATE', evidence_digest: 'x' });
        } catch (error) {
          seen.push(error);
        }
      },
    };
    const reactor = new EvidenceReactor({ service: 'grader', durable: uniqueName('d'), nc, log, handler, logger });
    await cancel(chain);
    await reactor.start();
    await until(() => Promise.resolve(seen.length === 1));
    await reactor.stop();
    expect(seen[0]).toMatchObject({ code: 'E_INTERNAL' });
    expect(await receipts(chain)).toHaveLength(1);
  });
});
