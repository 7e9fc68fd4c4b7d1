import 'reflect-metadata';
import { loadConfig } from '@cairn/config';
import type { ReceiptEnvelope } from '@cairn/contracts';
import { sha256Hex } from '@cairn/evidence';
import { FACTS_OPERATIONS } from '@cairn/kernel';
import { startService } from '@cairn/service-kit';
import type { RunningService } from '@cairn/service-kit';
import { createEvidenceWorld, JUNIT_PASS, passingRun, plannedRun, sleep, TAP_PASS, unitTestSpec } from '@cairn/service-kit/testing';
import type { EvidenceWorld } from '@cairn/service-kit/testing';
import { jetstreamManager } from '@nats-io/jetstream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KernelConfigSchema } from '../src/kernel.config.js';
import type { KernelConfig } from '../src/kernel.config.js';
import { KERNEL_SERVICE, kernelModule } from '../src/kernel.module.js';

const READ_BOUND = 4096;
let world: EvidenceWorld;
let config: KernelConfig;
let kernel: RunningService;

function factsOf(receipts: readonly ReceiptEnvelope[]): Record<string, unknown> {
  const facts = receipts.find((r) => r.type === 'kernel.facts');
  if (facts === undefined) throw new Error('no kernel.facts');
  return facts.facts as Record<string, unknown>;
}

beforeAll(async () => {
  // A 1 s dedupe window, so a test can show the kernel never computes facts twice without leaning on it.
  world = await createEvidenceWorld('kernel', { duplicateWindowMs: 1000 });
  config = loadConfig(KernelConfigSchema, { ...world.env, CAIRN_ARTIFACT_READ_MAX_BYTES: String(READ_BOUND) });
  kernel = await startService(KERNEL_SERVICE, kernelModule(config));
});

afterAll(async () => {
  await kernel?.stop();
  await world?.dispose();
});

describe('the kernel service', () => {
  it('reacts to run.executed with kernel.facts: steps, artifacts and the JUnit and TAP summaries', async () => {
    const runId = world.runId('kfacts');
    const planned = plannedRun(runId, passingRun());
    await world.appendRun(runId, planned);
    const receipts = await world.chainWith(runId, 'kernel.facts');
    const facts = receipts.at(-1)!;
    expect(facts).toMatchObject({ type: 'kernel.facts', actor: 'kernel', seq: 11, causation: `${runId}:10`, operations: [...FACTS_OPERATIONS] });
    expect(factsOf(receipts)).toEqual({
      steps: [
        expect.objectContaining({ index: 0, name: 'build', exit_code: 0, stdout_sha256: planned.hashes['steps[0].stdout'], stdout_bytes: 16 }) as unknown,
        expect.objectContaining({ index: 1, name: 'test', exit_code: 0, stderr_sha256: sha256Hex(''), stderr_bytes: 0, limits_hit: [], error_code: null }) as unknown,
      ],
      artifacts: {
        '/out/junit.xml': { sha256: sha256Hex(JUNIT_PASS), bytes: JUNIT_PASS.length },
        '/out/results.tap': { sha256: sha256Hex(TAP_PASS), bytes: TAP_PASS.length },
      },
      junit: { tests: 3, passed: 2, failed: 0, failures: 0, errors: 0, skipped: 1, suites: 1, well_formed: true, reports: ['/out/junit.xml'] },
      tap: { planned: 2, tests: 2, passed: 2, failed: 0, skipped: 0, todo: 0, bailed_out: false, bail_reason: null, ok: true, reports: ['/out/results.tap'] },
      unavailable: [],
    });
  });

  it('records a missing, a corrupt and an oversized artifact in the facts instead of failing', async () => {
    const runId = world.runId('kbroken');
    const big = 'x'.repeat(READ_BOUND + 1);
    const scenario = passingRun({ ...unitTestSpec() });
    scenario.files['/out/big.log'] = big;
    // Bytes of its own: the store is content-addressed and shared by the whole file.
    scenario.steps[1]!.stdout = `ran 3 tests for ${runId}: all tests passed\n`;
    const planned = plannedRun(runId, scenario);
    const stdout = planned.hashes['steps[1].stdout']!;
    const tap = planned.hashes['/out/results.tap']!;
    planned.blobs.delete(stdout); // never stored
    await world.appendRun(runId, planned, { upTo: planned.events.length - 1 });
    await world.corrupt(tap, new TextEncoder().encode('not ok 1 - tampered\n'));
    await world.append(runId, planned.events.at(-1)!);

    const facts = factsOf(await world.chainWith(runId, 'kernel.facts'));
    expect(facts.unavailable).toEqual([
      { source: 'artifacts["/out/big.log"]', sha256: sha256Hex(big), state: 'too_large' },
      { source: 'artifacts["/out/results.tap"]', sha256: tap, state: 'corrupt' },
      { source: 'steps[1].stdout', sha256: stdout, state: 'missing' },
    ]);
    expect(facts.tap).toBeNull();
    expect(facts.junit).toMatchObject({ failed: 0 });
    expect(Object.keys(facts.artifacts as object)).toEqual(['/out/junit.xml']);
    expect((facts.steps as Record<string, unknown>[])[1]).toMatchObject({ stdout_sha256: null, stdout_bytes: null, exit_code: 0 });
  });

  it('computes facts once per run, even redelivered past the dedupe window, and none for a run that moved on', async () => {
    await kernel.stop();
    const cancelled = world.runId('kcancel');
    const planned = plannedRun(cancelled, passingRun());
    await world.appendRun(cancelled, planned);
    await world.append(cancelled, { type: 'run.cancelled', actor: 'intake', causation: null, key: 'cancel', fields: { cancelled_by: 'key:k1' } });
    await sleep(1500);
    // A fresh durable delivers every receipt again, the ones already handled included.
    await (await jetstreamManager(world.nc)).consumers.delete(world.env.CAIRN_EVIDENCE_STREAM!, 'cairn-kernel');
    kernel = await startService(KERNEL_SERVICE, kernelModule(config));
    const last = world.runId('klast');
    await world.appendRun(last, plannedRun(last, passingRun()));
    await world.chainWith(last, 'kernel.facts');
    await sleep(500);

    expect((await world.chain(cancelled)).map((r) => r.type).slice(-2)).toEqual(['run.executed', 'run.cancelled']);
    const counts = new Map<string, number>();
    for await (const message of world.log.readAll()) {
      const receipt = JSON.parse(new TextDecoder().decode(message.data)) as ReceiptEnvelope;
      if (receipt.type === 'kernel.facts') counts.set(receipt.run_id, (counts.get(receipt.run_id) ?? 0) + 1);
    }
    expect([...counts.values()]).toEqual([1, 1, 1]);
  });

  it('refuses a configuration with a read bound that is not a number, naming the variable', () => {
    expect(() => loadConfig(KernelConfigSchema, { ...world.env, CAIRN_ARTIFACT_READ_MAX_BYTES: 'lots' })).toThrow(/CAIRN_ARTIFACT_READ_MAX_BYTES/);
    // Artifacts come from the object store over NATS: the kernel has no directory to be pointed at.
    expect(loadConfig(KernelConfigSchema, {}).CAIRN_ARTIFACT_BUCKET).toBe('cairn_artifacts');
    expect(Object.keys(KernelConfigSchema.shape)).not.toContain('CAIRN_ARTIFACT_DIR');
  });
});
