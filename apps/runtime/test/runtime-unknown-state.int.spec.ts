import { verifyChain } from '@cairn/evidence';
import { readRunChain } from '@cairn/lifecycle';
import type { RunningService } from '@cairn/service-kit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RuntimeWorld, spec } from './runtime.harness.js';

/*
 * PRODUCT.md's last taxonomy row, E_UNKNOWN_STATE (I-5: an unknown state or event type stops the
 * run; never continue), met for real: a receipt Cairn has no contract for — or one that breaks
 * its contract — lands on a run's chain through the real evidence log, and the real runtime on the
 * real NATS and Docker engine must stop the run on the record, FAILED E_UNKNOWN_STATE, its
 * sandbox destroyed, nothing more run.
 */

let world: RuntimeWorld;
let runtime: RunningService;
let workerId: string;

beforeAll(async () => {
  world = await RuntimeWorld.create('rtunk');
  workerId = world.newWorkerId('unk');
  runtime = await world.startRuntime(workerId);
});

afterAll(async () => {
  await runtime?.stop();
  const left = await world?.leftoverContainers();
  await world?.dispose();
  expect(left).toEqual([]);
});

type Raw = Record<string, unknown> & { type: string; seq: number };

/** The chain as stored, every receipt whether or not it meets its contract. */
async function rawChain(runId: string): Promise<Raw[]> {
  const out: Raw[] = [];
  for await (const stored of world.log.readChain(runId)) out.push(stored.receipt);
  return out;
}

async function waitForRaw(runId: string, done: (chain: Raw[]) => boolean, ms = 30_000): Promise<Raw[]> {
  const end = Date.now() + ms;
  for (;;) {
    const chain = await rawChain(runId);
    if (done(chain)) return chain;
    if (Date.now() > end) throw new Error(`${runId}: not there in ${ms} ms; chain: ${chain.map((r) => r.type).join(', ')}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

const types = (chain: readonly Raw[]) => chain.map((r) => r.type);

describe('a receipt the runtime cannot read on a run it runs', () => {
  it('an event type Cairn does not know, appended while a step runs: the step keeps its receipt, nothing more runs, the run is FAILED E_UNKNOWN_STATE', async () => {
    const { runId } = await world.submitRun(spec({ steps: [{ argv: ['sh', '-c', 'sleep 2; echo done'] }, { argv: ['echo', 'never'] }] }), { workerId });
    await waitForRaw(runId, (chain) => chain.some((r) => r.type === 'step.started'));
    await world.log.append(runId, { type: 'run.teleported', actor: 'intake', tenant: 'acme', causation: null, fields: { to: 'elsewhere' } });

    const chain = await waitForRaw(runId, (c) => c.some((r) => r.type === 'run.failed' || r.type === 'run.executed'));
    expect(types(chain).slice(3)).toEqual(['sandbox.created', 'step.started', 'run.teleported', 'step.completed', 'sandbox.destroyed', 'run.failed']);
    // The step that was running has its receipt: it ran to its end in the sandbox.
    expect(chain.find((r) => r.type === 'step.completed')).toMatchObject({ step_index: 0, exit_code: 0 });
    expect(chain.filter((r) => r.type === 'step.started').map((r) => r.step_index)).toEqual([0]);
    expect(chain.find((r) => r.type === 'sandbox.destroyed')).toMatchObject({ verified_gone: true, reason: 'failed' });
    const failed = chain.find((r) => r.type === 'run.failed');
    expect(failed).toMatchObject({ actor: 'runtime', error_code: 'E_UNKNOWN_STATE' });
    expect(String(failed?.message)).toContain('seq 6');
    // The lifecycle agrees, and the chain itself is intact (the hashes link; only a type is unknown).
    expect(readRunChain(chain)?.view).toMatchObject({ state: 'FAILED', errorCode: 'E_UNKNOWN_STATE' });
    expect(verifyChain(chain, { requireNonEmpty: true, chainId: runId })).toMatchObject({ ok: true, count: chain.length });
    expect(await world.containersOf(workerId)).toEqual([]);
    expect(await world.leases.get(runId)).toBeNull();
  });

  it('a known type whose fields break its contract, on the chain before the placement is read: no sandbox, FAILED E_UNKNOWN_STATE', async () => {
    // A worker whose runtime starts only once the bad receipt is on the chain.
    const lateWorker = world.newWorkerId('late');
    const { runId } = await world.submitRun(spec({ steps: [{ argv: ['echo', 'never'] }] }), { workerId: lateWorker, leaseTtlMs: 30_000 });
    await world.log.append(runId, { type: 'sandbox.created', actor: 'runtime', tenant: 'acme', causation: null, fields: { container_name: 'not a container name!' } });
    const late = await world.startRuntime(lateWorker);
    try {
      const chain = await waitForRaw(runId, (c) => c.some((r) => r.type === 'run.failed'));
      expect(types(chain)).toEqual(['run.submitted', 'policy.decided', 'run.scheduled', 'sandbox.created', 'run.failed']);
      expect(chain.at(-1)).toMatchObject({ actor: 'runtime', error_code: 'E_UNKNOWN_STATE' });
      expect(String(chain.at(-1)?.message)).toContain('seq 4');
      expect(readRunChain(chain)?.view).toMatchObject({ state: 'FAILED', errorCode: 'E_UNKNOWN_STATE' });
      expect(await world.containersOf(lateWorker)).toEqual([]);
      expect(await world.leases.get(runId)).toBeNull();
    } finally {
      await late.stop();
    }
  });
});
