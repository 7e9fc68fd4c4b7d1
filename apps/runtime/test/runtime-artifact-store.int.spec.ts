import { FsArtifactStore, NatsArtifactStore } from '@cairn/artifact-store';
import { sha256Hex, verifyChain } from '@cairn/evidence';
import type { RunningService } from '@cairn/service-kit';
import { uniqueName } from '@cairn/testing';
import { jetstreamManager } from '@nats-io/jetstream';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ofType, RuntimeWorld, spec } from './runtime.harness.js';

/*
 * The runtime's artifact object store (docs/adr/0021): full, a run fails E_CAPACITY with a chain
 * that names only what is stored; and an older stack's artifact directory is uploaded at boot.
 */

const SMALL_STORE_BYTES = 96 * 1024;
let world: RuntimeWorld;
let small: NatsArtifactStore;
let runtime: RunningService;
let workerId: string;

beforeAll(async () => {
  world = await RuntimeWorld.create('rtart');
  workerId = world.newWorkerId('full');
  const bucket = uniqueName('rtart_small');
  runtime = await world.startRuntime(workerId, { CAIRN_ARTIFACT_BUCKET: bucket, CAIRN_ARTIFACT_STORE_MAX_BYTES: String(SMALL_STORE_BYTES) });
  small = await NatsArtifactStore.open(world.nc, { bucket });
});

afterAll(async () => {
  await runtime?.stop();
  if (small !== undefined) await (await jetstreamManager(world.nc)).streams.delete(small.stream).catch(() => false);
  const left = await world?.leftoverContainers();
  await world?.dispose();
  expect(left).toEqual([]);
});

describe('a full artifact store', () => {
  it('fails the run E_CAPACITY at the step whose output does not fit: its receipt names the empty artifact, nothing after it runs', async () => {
    const print = (n: number) => ({ argv: ['sh', '-c', `head -c ${n} /dev/urandom`] });
    const { runId } = await world.submitRun(spec({ steps: [print(60_000), print(60_000), { argv: ['echo', 'never'] }] }), { workerId });
    const chain = await world.waitForType(runId, ['run.executed', 'run.failed']);
    const steps = ofType(chain, 'step.completed');
    expect(steps).toHaveLength(2);
    expect(steps[0]).toMatchObject({ exit_code: 0, stdout_bytes: 60_000, output_truncated: false });
    expect(steps[0]!.error_code).toBeUndefined();
    expect(steps[1]).toMatchObject({ exit_code: 0, stdout_bytes: 60_000, output_truncated: true, error_code: 'E_CAPACITY', stdout_sha256: sha256Hex(''), stderr_sha256: sha256Hex('') });
    expect(ofType(chain, 'step.started')).toHaveLength(2);
    const [failed] = ofType(chain, 'run.failed');
    expect(failed).toMatchObject({ error_code: 'E_CAPACITY', step_index: 1 });
    expect(failed!.message).toContain(small.bucket);
    expect(failed!.message).toContain('CAIRN_ARTIFACT_STORE_MAX_BYTES');
    expect(ofType(chain, 'sandbox.destroyed')).toMatchObject([{ verified_gone: true }]);
    expect(verifyChain(chain).ok).toBe(true);
    // Every artifact the chain names is in the store and hashes to its name.
    for (const step of steps) for (const sha of [step.stdout_sha256, step.stderr_sha256]) expect(await small.verify(sha)).toBe('ok');
    expect((await small.get(steps[0]!.stdout_sha256)).byteLength).toBe(60_000);
  });
});

describe('an artifact directory of an older stack', () => {
  it('is uploaded into the object store when the runtime starts, then marked imported', async () => {
    const dir = join(world.artifactDir, 'legacy');
    const old = new FsArtifactStore(dir);
    const ids = [await old.put(new TextEncoder().encode('stdout of an old run\n')), await old.put(new Uint8Array(100_000).fill(7))];
    const importer = world.newWorkerId('import');
    const started = await world.startRuntime(importer, { CAIRN_ARTIFACT_DIR: dir });
    try {
      for (const id of ids) expect(await world.artifacts.verify(id)).toBe('ok');
      expect(new TextDecoder().decode(await world.artifacts.get(ids[0]!))).toBe('stdout of an old run\n');
      expect(JSON.parse(await readFile(join(dir, 'imported-to-object-store.json'), 'utf8'))).toMatchObject({ bucket: world.names.artifacts, imported: 2, corrupt: [] });
    } finally {
      await started.stop();
    }
  });
});
