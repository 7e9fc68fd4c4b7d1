import { verifyChain } from '@cairn/evidence';
import { foldRun } from '@cairn/lifecycle';
import { BUSYBOX_IMAGE_TAG, DockerSandboxDriver } from '@cairn/sandbox-docker';
import { ReactionContext } from '@cairn/service-kit';
import { uniqueName } from '@cairn/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RuntimeHandler } from '../src/runtime.handler.js';
import { RuntimeWorker } from '../src/runtime-worker.service.js';
import { DEFAULT_CAPS, ofType, RuntimeWorld, spec } from './runtime.harness.js';
import type { SubmittedRun } from './runtime.harness.js';

/*
 * What a runtime finds when it comes back: sandboxes left by a crash, runs it was running, and
 * placements delivered again. It never runs a step twice: such runs fail E_WORKER_LOST.
 */

let world: RuntimeWorld;

beforeAll(async () => {
  world = await RuntimeWorld.create('rtrec');
});

afterAll(async () => {
  const left = await world?.leftoverContainers();
  await world?.dispose();
  expect(left).toEqual([]);
});

const driver = () => new DockerSandboxDriver({ docker: world.docker });

/** What a runtime that crashed right after creating the sandbox leaves: the receipt, and the container. */
async function crashedAfterCreate(run: SubmittedRun, workerId: string, withContainer: boolean): Promise<string> {
  const name = `cairn-${run.runId}-1`;
  if (withContainer) {
    await driver().create({
      image: BUSYBOX_IMAGE_TAG,
      caps: { wallSeconds: 30, memoryMiB: 32, pids: 32, diskMiB: 8, cpus: 0.5 },
      labels: { workerId, chainId: run.runId },
      lifetimeSeconds: 120,
    });
  }
  const ctx = new ReactionContext(run.scheduled, 'runtime', world.log, () => undefined);
  await ctx.append('sandbox.created', {
    container_name: name,
    worker_id: workerId,
    driver: 'docker',
    image: BUSYBOX_IMAGE_TAG,
    image_digest: world.busyboxId,
    caps: DEFAULT_CAPS,
    network: 'none',
  });
  return name;
}

describe('reconcile at start', () => {
  it("reaps this worker's orphans, fails the run it lost E_WORKER_LOST, and leaves another worker's container alone", async () => {
    const workerId = world.newWorkerId('rec');
    const otherWorker = world.newWorkerId('other');
    // An orphan whose chain this worker knows nothing about, and another worker's live sandbox.
    const orphanChain = `run_${uniqueName('orphan').toLowerCase()}`;
    const orphan = await driver().create({ image: BUSYBOX_IMAGE_TAG, caps: { wallSeconds: 30, memoryMiB: 32, pids: 32, diskMiB: 8, cpus: 0.5 }, labels: { workerId, chainId: orphanChain } });
    const foreign = await driver().create({
      image: BUSYBOX_IMAGE_TAG,
      caps: { wallSeconds: 30, memoryMiB: 32, pids: 32, diskMiB: 8, cpus: 0.5 },
      labels: { workerId: otherWorker, chainId: `run_${uniqueName('foreign').toLowerCase()}` },
    });
    // A run this worker held (its lease), whose sandbox was created before the crash.
    const lost = await world.submitRun(spec(), { workerId });
    const lostName = await crashedAfterCreate(lost, workerId, true);

    const runtime = await world.startRuntime(workerId);
    try {
      const report = runtime.app.get(RuntimeWorker).reconcileReport;
      expect([...report.reaped].sort()).toEqual([orphan.name, lostName].sort());
      expect(report.lost).toEqual([lost.runId]);
      expect(await world.containersOf(workerId)).toEqual([]);
      expect((await world.containersOf(otherWorker)).map((c) => c.name)).toEqual([foreign.name]);

      const chain = await world.receipts(lost.runId);
      expect(chain.map((r) => r.type)).toEqual(['run.submitted', 'policy.decided', 'run.scheduled', 'sandbox.created', 'sandbox.destroyed', 'run.failed']);
      expect(ofType(chain, 'sandbox.destroyed')[0]).toMatchObject({ container_name: lostName, verified_gone: true, reason: 'reaped', causation: `${lost.runId}:3` });
      expect(ofType(chain, 'run.failed')[0]).toMatchObject({ error_code: 'E_WORKER_LOST', actor: 'runtime' });
      expect(foldRun(chain)).toMatchObject({ state: 'FAILED', errorCode: 'E_WORKER_LOST' });
      expect(verifyChain(chain).ok).toBe(true);
      expect(await world.leases.get(lost.runId)).toBeNull();
      // The placement is delivered to the new consumer too: the run has ended, nothing more is stored.
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(await world.receipts(lost.runId)).toHaveLength(chain.length);
    } finally {
      await runtime.stop();
      await driver().destroy(foreign);
    }
  });
});

describe('reconcile at start, a run with retries (ADR 0035)', () => {
  it('gives a run with a retry left back with run.retried keyed retried-1; the lease scan finding the same loss stores nothing more', async () => {
    const workerId = world.newWorkerId('retry');
    const lost = await world.submitRun(spec({ retries: 1 }), { workerId });
    const lostName = await crashedAfterCreate(lost, workerId, true);

    const runtime = await world.startRuntime(workerId);
    try {
      expect(runtime.app.get(RuntimeWorker).reconcileReport.lost).toEqual([lost.runId]);
      const chain = await world.receipts(lost.runId);
      expect(chain.map((r) => r.type)).toEqual(['run.submitted', 'policy.decided', 'run.scheduled', 'sandbox.created', 'sandbox.destroyed', 'run.retried']);
      expect(ofType(chain, 'sandbox.destroyed')[0]).toMatchObject({ container_name: lostName, reason: 'reaped' });
      expect(ofType(chain, 'run.retried')[0]).toMatchObject({
        actor: 'runtime',
        causation: `${lost.runId}:3`,
        attempt: 1,
        error_code: 'E_WORKER_LOST',
        worker_id: workerId,
        lease_id: lost.scheduled.lease_id,
        retries_left: 0,
      });
      expect(foldRun(chain)).toMatchObject({ state: 'SUBMITTED', placed: false });
      expect(verifyChain(chain).ok).toBe(true);
      expect(await world.leases.get(lost.runId)).toBeNull();
      // The scheduler's lease scan, finding the same loss, appends the same logical event: it is the one stored.
      const again = await world.log.append(lost.runId, {
        type: 'run.retried',
        actor: 'scheduler',
        tenant: lost.scheduled.tenant,
        causation: `${lost.runId}:3`,
        key: 'retried-1',
        fields: { attempt: 1, error_code: 'E_WORKER_LOST', worker_id: workerId, lease_id: lost.scheduled.lease_id, message: 'lease expired', retries_left: 0 },
      });
      expect(again.duplicate).toBe(true);
      expect(again.receipt.seq).toBe(ofType(chain, 'run.retried')[0]!.seq);
      expect(await world.receipts(lost.runId)).toHaveLength(chain.length);
    } finally {
      await runtime.stop();
    }
  });
});

describe('a placement delivered again after its sandbox was created', () => {
  it('fails the run E_WORKER_LOST through the reactor, never running a step', async () => {
    const workerId = world.newWorkerId('redeliver');
    // Built before this worker's runtime starts, with no lease and no container for reconcile to find.
    const run = await world.submitRun(spec({ steps: [{ argv: ['sh', '-c', 'echo must-not-run'] }] }), { workerId, lease: false });
    await crashedAfterCreate(run, workerId, false);

    const runtime = await world.startRuntime(workerId);
    try {
      expect(runtime.app.get(RuntimeWorker).reconcileReport.lost).toEqual([]);
      const chain = await world.waitForType(run.runId, ['run.failed'], 15_000);
      expect(chain.map((r) => r.type).slice(3)).toEqual(['sandbox.created', 'sandbox.destroyed', 'run.failed']);
      expect(ofType(chain, 'run.failed')[0]).toMatchObject({ error_code: 'E_WORKER_LOST' });
      expect(ofType(chain, 'step.started')).toEqual([]);
    } finally {
      await runtime.stop();
    }
  });

  it('destroys the leftover sandbox, and a third delivery stores nothing more', async () => {
    const workerId = world.newWorkerId('again');
    const runtime = await world.startRuntime(workerId);
    try {
      // Placed without a lease first, so the live runtime sees it and leaves it; then the state a
      // crash after create leaves behind, and the placement handled again, as a redelivery is.
      const run = await world.submitRun(spec(), { workerId, lease: false });
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(await world.types(run.runId)).toEqual(['run.submitted', 'policy.decided', 'run.scheduled']);
      await world.leases.put(run.lease);
      await crashedAfterCreate(run, workerId, true);
      expect(await world.containersOf(workerId)).toHaveLength(1);

      const handler = runtime.app.get(RuntimeHandler);
      const redeliver = () => handler.handle(new ReactionContext(run.scheduled, 'runtime', world.log, () => undefined));
      await redeliver();
      expect(await world.containersOf(workerId)).toEqual([]);
      const chain = await world.receipts(run.runId);
      expect(chain.map((r) => r.type).slice(3)).toEqual(['sandbox.created', 'sandbox.destroyed', 'run.failed']);
      expect(ofType(chain, 'sandbox.destroyed')[0]).toMatchObject({ verified_gone: true, reason: 'reaped' });
      expect(ofType(chain, 'run.failed')[0]).toMatchObject({ error_code: 'E_WORKER_LOST' });
      expect(await world.leases.get(run.runId)).toBeNull();

      await redeliver();
      expect(await world.receipts(run.runId)).toHaveLength(chain.length);
    } finally {
      await runtime.stop();
    }
  });
});

/** Intake's request to stop a running run. */
async function askToCancel(runId: string): Promise<number> {
  const { receipt } = await world.log.append(runId, {
    type: 'run.cancel_requested',
    actor: 'intake',
    tenant: 'acme',
    causation: null,
    key: 'cancel',
    fields: { requested_by: 'key:test', reason: 'stop' },
  });
  return receipt.seq;
}

describe('a cancel asked of a run its runtime no longer runs', () => {
  it('reconcile at start answers it: the sandbox reaped and recorded, then run.cancelled (not E_WORKER_LOST)', async () => {
    const workerId = world.newWorkerId('reccancel');
    const run = await world.submitRun(spec(), { workerId });
    const name = await crashedAfterCreate(run, workerId, true);
    const requestSeq = await askToCancel(run.runId);

    const runtime = await world.startRuntime(workerId);
    try {
      const report = runtime.app.get(RuntimeWorker).reconcileReport;
      expect(report).toMatchObject({ lost: [], cancelled: [run.runId] });
      expect(report.reaped).toContain(name);
      const chain = await world.receipts(run.runId);
      expect(chain.map((r) => r.type).slice(3)).toEqual(['sandbox.created', 'run.cancel_requested', 'sandbox.destroyed', 'run.cancelled']);
      expect(ofType(chain, 'sandbox.destroyed')[0]).toMatchObject({ container_name: name, verified_gone: true, reason: 'reaped' });
      expect(ofType(chain, 'run.cancelled')[0]).toMatchObject({ actor: 'runtime', causation: `${run.runId}:${requestSeq}`, cancelled_by: 'key:test', reason: 'stop' });
      expect(foldRun(chain)).toMatchObject({ state: 'CANCELLED', errorCode: null });
      expect(verifyChain(chain).ok).toBe(true);
      expect(await world.containersOf(workerId)).toEqual([]);
      expect(await world.leases.get(run.runId)).toBeNull();
      // The placement and the request are delivered to the new consumer too: nothing more is stored.
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(await world.receipts(run.runId)).toHaveLength(chain.length);
    } finally {
      await runtime.stop();
    }
  });

  it('the live reactor answers a request for a run it lost, teardown first', async () => {
    const workerId = world.newWorkerId('livecancel');
    const runtime = await world.startRuntime(workerId);
    try {
      // Placed without a lease (the live runtime leaves it), then the state a crash after create leaves.
      const run = await world.submitRun(spec(), { workerId, lease: false });
      await new Promise((resolve) => setTimeout(resolve, 500));
      await world.leases.put(run.lease);
      const name = await crashedAfterCreate(run, workerId, true);
      const requestSeq = await askToCancel(run.runId);
      const chain = await world.waitForType(run.runId, ['run.cancelled', 'run.failed'], 15_000);
      expect(chain.map((r) => r.type).slice(3)).toEqual(['sandbox.created', 'run.cancel_requested', 'sandbox.destroyed', 'run.cancelled']);
      expect(ofType(chain, 'sandbox.destroyed')[0]).toMatchObject({ container_name: name, verified_gone: true, reason: 'reaped' });
      expect(ofType(chain, 'run.cancelled')[0]).toMatchObject({ actor: 'runtime', causation: `${run.runId}:${requestSeq}` });
      expect(await world.containersOf(workerId)).toEqual([]);
      expect(await world.leases.get(run.runId)).toBeNull();
    } finally {
      await runtime.stop();
    }
  });
});

describe('a worker without a container engine', () => {
  it('registers unhealthy and fails every run placed on it E_RUNTIME_ABSENT before any sandbox', async () => {
    const workerId = world.newWorkerId('absent');
    const runtime = await world.startRuntime(workerId, { CAIRN_DOCKER_SOCKET: `/tmp/${uniqueName('no-engine')}.sock` });
    try {
      expect(await world.registry.get(workerId)).toMatchObject({ healthy: false, images: {} });
      const { runId } = await world.submitRun(spec(), { workerId });
      const chain = await world.waitForType(runId, ['run.failed']);
      expect(chain.map((r) => r.type)).toEqual(['run.submitted', 'policy.decided', 'run.scheduled', 'run.failed']);
      expect(ofType(chain, 'run.failed')[0]).toMatchObject({ error_code: 'E_RUNTIME_ABSENT' });
      expect(foldRun(chain)).toMatchObject({ state: 'FAILED', errorCode: 'E_RUNTIME_ABSENT' });
    } finally {
      await runtime.stop();
    }
    // A clean stop takes the worker out of the registry.
    expect(await world.registry.get(workerId)).toBeNull();
  });
});
