import { verifyChain } from '@cairn/evidence';
import type { EvidenceReceiptOf } from '@cairn/contracts';
import type { RunningService } from '@cairn/service-kit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RuntimeWorker } from '../src/runtime-worker.service.js';
import { ofType, RuntimeWorld, spec } from './runtime.harness.js';

/*
 * The warm pool on the real NATS and Docker engine: a run of a profile this worker ran before
 * claims a started, hardened, unused sandbox instead of starting one; everything else as before.
 */

let world: RuntimeWorld;

beforeAll(async () => {
  world = await RuntimeWorld.create('rtpool');
});

afterAll(async () => {
  const left = await world?.leftoverContainers();
  await world?.dispose();
  // Every runtime here was stopped, which empties its pool: nothing of any worker is left.
  expect(left).toEqual([]);
});

async function until<T>(what: string, probe: () => Promise<T>, ok: (value: T) => boolean, ms = 20_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await probe();
    if (ok(value)) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(value)}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function warmOf(workerId: string) {
  return (await world.containersOf(workerId)).filter((c) => c.pool !== undefined);
}

async function runToEnd(workerId: string, caps?: Parameters<RuntimeWorld['submitRun']>[1]['caps']) {
  const { runId } = await world.submitRun(spec(), { workerId, ...(caps === undefined ? {} : { caps }) });
  const chain = await world.waitForType(runId, ['run.executed', 'run.failed']);
  expect(ofType(chain, 'run.executed')).toHaveLength(1);
  expect(verifyChain(chain).ok).toBe(true);
  const [created] = ofType(chain, 'sandbox.created');
  const [destroyed] = ofType(chain, 'sandbox.destroyed');
  expect(destroyed).toMatchObject({ container_name: created!.container_name, verified_gone: true, reason: 'completed' });
  const [step] = ofType(chain, 'step.completed');
  expect(Buffer.from(await world.artifacts.get(step!.stdout_sha256)).toString('utf8')).toBe('hello\n');
  return { runId, created: created! };
}

describe('the warm pool', () => {
  let workerId: string;
  let runtime: RunningService;
  let first: EvidenceReceiptOf<'sandbox.created'>;

  it('a second run of a profile claims a warm sandbox: recorded, hardened alike, gone afterwards, and the pool refills', async () => {
    workerId = world.newWorkerId('pool');
    // The pool only holds what placement leaves (ADR 0015): room for two profiles of two beside a run.
    runtime = await world.startRuntime(workerId, { CAIRN_WARM_POOL_SIZE: '2', CAIRN_WORKER_SLOTS: '5' });
    // Nothing is warmed before this worker has run anything.
    expect(await warmOf(workerId)).toEqual([]);

    const one = await runToEnd(workerId);
    first = one.created;
    expect(first.container_name).toBe(`cairn-${one.runId}-1`);
    const warm = await until('two warm sandboxes', () => warmOf(workerId), (w) => w.length === 2 && w.every((c) => c.running));
    for (const c of warm) {
      expect(c.name).toMatch(/^cairn-pool-[0-9a-f]{24}-[0-9a-f]{12}$/);
      // No chain until claimed: a stray pool container is never mistaken for a run's.
      expect(c.chain).toBeUndefined();
    }
    expect(new Set(warm.map((c) => c.pool)).size).toBe(1);

    const two = await runToEnd(workerId);
    // Claimed and renamed to the run's own name (labels cannot change; the name says whose it is).
    expect(two.created.container_name).toBe(`cairn-${two.runId}-1`);
    const left = (await world.containersOf(workerId)).map((c) => c.id);
    expect(warm.filter((c) => !left.includes(c.id))).toHaveLength(1);
    // The same sandbox a create would have started, as the engine reports it.
    expect(two.created.hardening).toEqual(first.hardening);
    expect(two.created).toMatchObject({ caps: first.caps, image_digest: first.image_digest, network: 'none', worker_id: workerId });

    const refilled = await until('the pool refilled', () => warmOf(workerId), (w) => w.length === 2 && w.every((c) => c.running));
    expect(refilled.map((c) => c.name)).not.toContain(two.created.container_name);
    expect((await world.containersOf(workerId)).map((c) => c.name)).not.toContain(two.created.container_name);
  });

  it('a run of another profile starts its own sandbox, and its profile is warmed too', async () => {
    const other = await runToEnd(workerId, { wall_seconds: 30, memory_mib: 48, pids: 32, disk_mib: 8, cpus: 0.5 });
    expect(other.created.container_name).toBe(`cairn-${other.runId}-1`);
    expect(other.created.hardening?.memory_bytes).not.toBe(first.hardening?.memory_bytes);
    const warm = await until('two profiles warm', () => warmOf(workerId), (w) => w.length === 4 && w.every((c) => c.running));
    expect(new Set(warm.map((c) => c.pool)).size).toBe(2);
  });

  it('a restart reaps the warm sandboxes of the process before it', async () => {
    const before = (await warmOf(workerId)).map((c) => c.name).sort();
    expect(before).toHaveLength(4);
    const restarted = await world.startRuntime(workerId, { CAIRN_WARM_POOL_SIZE: '2', CAIRN_WORKER_SLOTS: '5' });
    try {
      expect([...restarted.app.get(RuntimeWorker).reconcileReport.reaped].sort()).toEqual(before);
      expect(await world.containersOf(workerId)).toEqual([]);
    } finally {
      await restarted.stop();
      await runtime.stop();
    }
    expect(await world.containersOf(workerId)).toEqual([]);
  });

  it('the pool stays within what placement leaves: idle sandboxes and placed work together never exceed the slots, a claim is not counted twice, and it refills when work ends', async () => {
    const id = world.newWorkerId('poolroom');
    const service = await world.startRuntime(id, { CAIRN_WARM_POOL_SIZE: '2', CAIRN_WORKER_SLOTS: '2' });
    try {
      await runToEnd(id);
      // Both slots free once the run ended: the pool fills to its size.
      const warm = await until('two warm sandboxes', () => warmOf(id), (w) => w.length === 2 && w.every((c) => c.running));
      // A run claiming one takes one slot and leaves the other to the pool: nothing else is given back.
      const claimed = await runToEnd(id);
      expect(claimed.created.container_name).toBe(`cairn-${claimed.runId}-1`);
      const left = (await world.containersOf(id)).map((c) => c.id);
      expect(warm.filter((c) => !left.includes(c.id))).toHaveLength(1);
      await until('the pool refilled', () => warmOf(id), (w) => w.length === 2 && w.every((c) => c.running));
      // A run of another profile starts its own sandbox: the pool gives a slot back for it.
      const { runId } = await world.submitRun(spec({ steps: [{ argv: ['sleep', '2'] }] }), { workerId: id, caps: { wall_seconds: 30, memory_mib: 48, pids: 32, disk_mib: 8, cpus: 0.5 } });
      await world.waitForType(runId, ['step.started']);
      const during = await until('one slot given back', () => world.containersOf(id), (cs) => cs.length <= 2);
      expect(during.filter((c) => c.pool === undefined)).toHaveLength(1);
      const chain = await world.waitForType(runId, ['run.executed', 'run.failed']);
      expect(ofType(chain, 'run.executed')).toHaveLength(1);
      // Its slot back: the pool fills both again (now with the profile most recently run first).
      await until('two warm again', () => warmOf(id), (w) => w.length === 2 && w.every((c) => c.running));
    } finally {
      await service.stop();
    }
    expect(await world.containersOf(id)).toEqual([]);
  });

  it('a stopped runtime leaves no warm sandbox behind', async () => {
    const id = world.newWorkerId('poolstop');
    const service = await world.startRuntime(id, { CAIRN_WARM_POOL_SIZE: '1' });
    try {
      await runToEnd(id);
      await until('one warm sandbox', () => warmOf(id), (w) => w.length === 1);
    } finally {
      await service.stop();
    }
    expect(await world.containersOf(id)).toEqual([]);
  });

  it('CAIRN_WARM_POOL_SIZE=0: every run starts its own sandbox and nothing is warmed', async () => {
    const id = world.newWorkerId('nopool');
    const service = await world.startRuntime(id, { CAIRN_WARM_POOL_SIZE: '0' });
    try {
      for (let i = 0; i < 2; i++) {
        const run = await runToEnd(id);
        expect(run.created.container_name).toBe(`cairn-${run.runId}-1`);
      }
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(await world.containersOf(id)).toEqual([]);
    } finally {
      await service.stop();
    }
  });
});
