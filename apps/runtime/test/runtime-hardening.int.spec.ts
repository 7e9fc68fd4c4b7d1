import { DEFAULT_DOCKER_SOCKET } from '@cairn/sandbox-docker';
import { uniqueName } from '@cairn/testing';
import { rm, symlink } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ofType, RuntimeWorld, spec } from './runtime.harness.js';

/*
 * A sandbox the hardening check at start refuses, through a whole runtime on the real NATS and
 * engine: the run fails E_SANDBOX_START, no step runs, and the sandbox is destroyed. The shortfall
 * is a real one: a worker that must run sandboxes user-namespace-remapped (it refuses to start on an
 * engine that does not remap) found no engine at start; the engine it later reaches does not remap.
 */
let world: RuntimeWorld;
const socket = `/tmp/${uniqueName('rthard')}.sock`;

beforeAll(async () => {
  world = await RuntimeWorld.create('rthard');
});

afterAll(async () => {
  await rm(socket, { force: true });
  const left = await world?.leftoverContainers();
  await world?.dispose();
  expect(left).toEqual([]);
});

describe('a sandbox short of its hardening', () => {
  it('fails its run E_SANDBOX_START before any step, and is destroyed', async () => {
    const workerId = world.newWorkerId('userns');
    await world.startRuntime(workerId, { CAIRN_DOCKER_SOCKET: socket, CAIRN_SANDBOX_REQUIRE_USERNS: '1' });
    // Now the engine answers (this machine's, which does not remap).
    await symlink(DEFAULT_DOCKER_SOCKET, socket);
    const { runId } = await world.submitRun(spec({ steps: [{ argv: ['sh', '-c', 'echo ran > /work/ran'] }] }), { workerId });
    const chain = await world.waitForType(runId, ['run.executed', 'run.failed'], 60_000);
    expect(chain.map((r) => r.type)).toEqual(['run.submitted', 'policy.decided', 'run.scheduled', 'run.failed']);
    const [failed] = ofType(chain, 'run.failed');
    expect(failed).toMatchObject({ error_code: 'E_SANDBOX_START' });
    expect(failed?.message).toMatch(/the engine does not remap user namespaces, and this worker must \(CAIRN_SANDBOX_REQUIRE_USERNS\)/);
    expect(await world.containersOf(workerId)).toEqual([]);
  });
});
