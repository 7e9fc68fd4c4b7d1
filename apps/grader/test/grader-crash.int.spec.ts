import type { ReceiptEnvelope } from '@cairn/contracts';
import { readRunChain } from '@cairn/lifecycle';
import { createEvidenceWorld, expectSealedChain, passingRun, plannedRun, sleep, startProcess, stopAll } from '@cairn/service-kit/testing';
import type { EvidenceWorld, ServiceProcess } from '@cairn/service-kit/testing';
import { jetstreamManager } from '@nats-io/jetstream';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

// Real processes from their builds (`npm run build` first).
const main = (app: string) => fileURLToPath(new URL(`../../${app}/dist/main.js`, import.meta.url));
const GRADER = main('grader');
const RUNS = 16;

let world: EvidenceWorld;
const processes: ServiceProcess[] = [];

function start(path: string, env: Record<string, string> = {}): ServiceProcess {
  // A short ack wait, so the receipts the killed grader held come back quickly.
  const p = startProcess(path, { ...world.env, CAIRN_GRADER_ACK_WAIT_MS: '2000', ...env });
  processes.push(p);
  return p;
}

async function executedRun(label: string): Promise<string> {
  const runId = world.runId(label);
  await world.appendRun(runId, plannedRun(runId, passingRun()));
  return runId;
}

const count = (receipts: readonly ReceiptEnvelope[], type: string) => receipts.filter((r) => r.type === type).length;

beforeAll(async () => {
  for (const app of ['kernel', 'verifier', 'grader']) if (!existsSync(main(app))) throw new Error(`${main(app)} is missing: run npm run build first`);
  world = await createEvidenceWorld('gcrash');
  start(main('kernel'));
  start(main('verifier'));
});

afterAll(async () => {
  await stopAll(processes);
  await world?.dispose();
});

describe('the grader process', () => {
  it('killed -9 between verification and seal, restarted: every run sealed exactly once, graded once, and every chain verifies', async () => {
    const runs: string[] = [];
    for (let i = 0; i < RUNS; i++) runs.push(await executedRun('crash'));
    for (const runId of runs) await world.chainWith(runId, 'verification.completed', 30_000);

    // Kill the grader the moment its first receipt lands: it is between a grade and its seal, with the rest to do.
    const jsm = await jetstreamManager(world.nc);
    const before = (await jsm.streams.info(world.env.CAIRN_EVIDENCE_STREAM!)).state.last_seq;
    const first = start(GRADER);
    const deadline = Date.now() + 30_000;
    while ((await jsm.streams.info(world.env.CAIRN_EVIDENCE_STREAM!)).state.last_seq === before) {
      if (Date.now() > deadline) throw new Error('the grader appended nothing');
    }
    first.child.kill('SIGKILL');
    expect(await first.exited).toEqual({ code: null, signal: 'SIGKILL' });

    const atKill = await Promise.all(runs.map((runId) => world.chain(runId)));
    const unfinished = atKill.filter((receipts) => count(receipts, 'run.sealed') === 0);
    // Here: all 16 unsealed, 8 of them (the reactor's concurrency) graded but not sealed.
    expect(unfinished.filter((receipts) => count(receipts, 'grade.recorded') === 1).length).toBeGreaterThan(0);

    // A run arrives while the grader is down: kernel and verifier handle it; nobody seals it.
    const late = await executedRun('late');
    runs.push(late);
    await world.chainWith(late, 'verification.completed', 30_000);
    await sleep(500);
    expect((await world.chain(late)).at(-1)?.type).toBe('verification.completed');

    const second = start(GRADER);
    for (const runId of runs) await world.chainWith(runId, 'run.sealed', 30_000);
    await sleep(2500); // past the ack wait: anything the first process held has been delivered again

    for (const runId of runs) {
      const receipts = await world.chain(runId);
      expect(expectSealedChain(receipts), runId).toEqual({ ok: true, problems: [] });
      expect(count(receipts, 'grade.recorded'), runId).toBe(1);
      expect(readRunChain(receipts)?.view, runId).toMatchObject({ state: 'SEALED', score: 7, sealed: true });
    }

    second.child.kill('SIGTERM');
    const exit = await second.exited;
    expect(exit).toEqual({ code: 0, signal: null });
  });

  it('fails at boot, naming the variable, when the configuration is wrong', async () => {
    const p = start(GRADER, { CAIRN_GRADER_TEARDOWN_GRACE_MS: 'soon' });
    expect((await p.exited).code).toBe(1);
    expect(p.output()).toContain('CAIRN_GRADER_TEARDOWN_GRACE_MS');
  });
});
