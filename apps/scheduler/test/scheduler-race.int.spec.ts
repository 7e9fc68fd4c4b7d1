import 'reflect-metadata';
import { parseEvidenceReceipt } from '@cairn/contracts';
import type { EvidenceReceipt } from '@cairn/contracts';
import type { EvidenceLog } from '@cairn/evidence-log';
import { CANCEL_ANSWER_KEY, foldRun } from '@cairn/lifecycle';
import { leaseId } from '@cairn/scheduling';
import { JsonLogger, ReactionContext } from '@cairn/service-kit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LeaseExpiryScanner } from '../src/lease-expiry.scanner.js';
import { SchedulingHandler } from '../src/scheduling.handler.js';
import { CAPS, createSchedulerWorld, fakeWorker } from './scheduler.harness.js';
import type { SchedulerWorld } from './scheduler.harness.js';

/*
 * A cancel racing the scheduler, on the real JetStream and KV: the handler and the lease scanner
 * are driven directly, and the racing receipt is appended between their read and their append.
 */

let world: SchedulerWorld;
const logger = new JsonLogger('scheduler', 'error');

beforeAll(async () => {
  world = await createSchedulerWorld('schrace');
  await world.registry.register(fakeWorker('w-race'));
});

afterAll(async () => {
  await world?.dispose();
});

function parse(raw: unknown): EvidenceReceipt {
  const parsed = parseEvidenceReceipt(raw);
  if (!parsed.ok) throw new Error(parsed.message);
  return parsed.receipt;
}

async function receipts(runId: string): Promise<EvidenceReceipt[]> {
  return (await world.chain(runId)).map(parse);
}

/** The world's log, with `race` appended once, right after the first read of a chain. */
function racingAfterRead(race: (chainId: string) => Promise<unknown>): EvidenceLog {
  let done = false;
  return new Proxy(world.log, {
    get(target, prop, receiver) {
      if (prop !== 'readChain') return Reflect.get(target, prop, receiver) as unknown;
      return async function* (chainId: string) {
        yield* target.readChain(chainId);
        if (!done) {
          done = true;
          await race(chainId);
        }
      };
    },
  });
}

const cancel = (runId: string) =>
  world.log.append(runId, { type: 'run.cancelled', actor: 'intake', tenant: 'acme', causation: null, key: 'cancel', fields: { cancelled_by: 'key:k1' } });

function handler(ttlMs = 60_000): SchedulingHandler {
  return world.scheduler({ CAIRN_LEASE_TTL_MS: String(ttlMs) }).handler;
}

function scanner(log: EvidenceLog = world.log): LeaseExpiryScanner {
  return new LeaseExpiryScanner(world.leases, log, 'scheduler', world.config(), logger);
}

/** A run placed on `w-race` with a lease that has already run out, and sandbox.created by its runtime. */
async function runningWithExpiredLease(): Promise<{ runId: string; scheduledSeq: number }> {
  const runId = await world.decidedRun();
  const [, decided] = await receipts(runId);
  await handler(500).handle(new ReactionContext(decided!, 'scheduler', world.log, () => undefined));
  const scheduled = (await receipts(runId)).find((r) => r.type === 'run.scheduled')!;
  await world.log.append(runId, {
    type: 'sandbox.created',
    actor: 'runtime',
    tenant: 'acme',
    causation: `${runId}:${scheduled.seq}`,
    fields: { container_name: `cairn-${runId}-1`, worker_id: 'w-race', driver: 'docker', image: 'cairn/sandbox-busybox:1', image_digest: null, caps: CAPS, network: 'none' },
  });
  return { runId, scheduledSeq: scheduled.seq };
}

describe('the scheduler racing a cancel', () => {
  it('given a cancel landing between its read and run.scheduled, then it reads again, announces nothing and gives the lease back', async () => {
    const runId = await world.decidedRun();
    const [, decided] = await receipts(runId);
    await handler().handle(new ReactionContext(decided!, 'scheduler', racingAfterRead(cancel), () => undefined));
    const chain = await receipts(runId);
    expect(chain.map((r) => r.type)).toEqual(['run.submitted', 'policy.decided', 'run.cancelled']);
    expect(foldRun(chain)).toMatchObject({ state: 'CANCELLED' });
    expect(await world.leases.get(runId)).toBeNull();
  });

  it('without a race, places the run (the control)', async () => {
    const runId = await world.decidedRun();
    const [, decided] = await receipts(runId);
    await handler().handle(new ReactionContext(decided!, 'scheduler', world.log, () => undefined));
    expect((await receipts(runId)).map((r) => r.type)).toEqual(['run.submitted', 'policy.decided', 'run.scheduled']);
    expect(await world.leases.get(runId)).toMatchObject({ worker_id: 'w-race', lease_id: leaseId(runId, 1) });
  });
});

describe('the lease scan', () => {
  it('given a lost worker with a cancel pending, then it answers the request: run.cancelled E_WORKER_LOST, the same event a runtime would append', async () => {
    const { runId } = await runningWithExpiredLease();
    const request = await world.log.append(runId, { type: 'run.cancel_requested', actor: 'intake', tenant: 'acme', causation: null, key: 'cancel', fields: { requested_by: 'key:k1', reason: 'stop' } });
    const verdicts = await scanner().scan(Date.now() + 5000);
    expect(verdicts.get(runId)).toBe('cancelled');
    const chain = await receipts(runId);
    expect(chain.map((r) => r.type).slice(-2)).toEqual(['run.cancel_requested', 'run.cancelled']);
    expect(chain.at(-1)).toMatchObject({ actor: 'scheduler', causation: `${runId}:${request.receipt.seq}`, cancelled_by: 'key:k1', reason: 'stop', error_code: 'E_WORKER_LOST' });
    expect(foldRun(chain)).toMatchObject({ state: 'CANCELLED', errorCode: 'E_WORKER_LOST' });
    expect(await world.leases.get(runId)).toBeNull();
    // The runtime coming back answers the same request: one logical event, stored once.
    const late = await world.log.append(runId, {
      type: 'run.cancelled',
      actor: 'runtime',
      tenant: 'acme',
      causation: `${runId}:${request.receipt.seq}`,
      key: CANCEL_ANSWER_KEY,
      fields: { cancelled_by: 'key:k1' },
    });
    expect(late.duplicate).toBe(true);
    expect(await receipts(runId)).toHaveLength(chain.length);
  });

  it('given the runtime writing between its read and its append, then it appends nothing and decides again on the next scan', async () => {
    const { runId, scheduledSeq } = await runningWithExpiredLease();
    const stepStarted = (chainId: string) =>
      world.log.append(chainId, {
        type: 'step.started',
        actor: 'runtime',
        tenant: 'acme',
        causation: `${chainId}:${scheduledSeq}`,
        key: 'step-0',
        fields: { step_index: 0, stage: 'step', tool: 'true', argv: ['true'], workdir: '/work', env_names: [] },
      });
    expect((await scanner(racingAfterRead(stepStarted)).scan(Date.now() + 5000)).get(runId)).toBe('kept');
    expect((await receipts(runId)).map((r) => r.type).slice(-2)).toEqual(['sandbox.created', 'step.started']);
    expect(await world.leases.get(runId)).not.toBeNull();
    // Still no renewal: the next scan fails the run, onto the head it now reads.
    expect((await scanner().scan(Date.now() + 5000)).get(runId)).toBe('failed');
    expect((await receipts(runId)).at(-1)).toMatchObject({ type: 'run.failed', error_code: 'E_WORKER_LOST', actor: 'scheduler' });
  });
});
