import { checkStack, formatReport, scenarioClock } from '@cairn/fault-testing';
import { ServiceProcesses, testNatsUrl, until } from '@cairn/testing';
import type { ServiceProcess } from '@cairn/testing';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ofType, RuntimeWorld, spec } from './runtime.harness.js';

// The real process, built by `npm run build` (`npm run test:faults` builds first).
const MAIN = fileURLToPath(new URL('../dist/main.js', import.meta.url));

let world: RuntimeWorld;
const processes = new ServiceProcesses();

/** A runtime with no CAIRN_WORKER_ID: its id is whatever its state directory keeps (or makes). */
function startRuntime(stateDir: string, extra: Record<string, string> = {}): ServiceProcess {
  const { CAIRN_WORKER_ID: _given, ...env } = world.env('identity-unused', { CAIRN_WORKER_STATE_DIR: stateDir, ...extra });
  return processes.start(MAIN, { ...env, ...extra });
}

function logLines(output: string): Record<string, unknown>[] {
  return output
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

/** The id a runtime announced, once it is registered under it. */
async function registeredId(started: ServiceProcess): Promise<string> {
  let id: string | undefined;
  await until('the worker identity line', () => (id = logLines(started.output()).find((l) => l.msg === 'worker identity')?.worker_id as string | undefined) !== undefined);
  world.workerIds.add(id!);
  await until(`worker ${id} to register`, async () => (await world.registry.get(id!)) !== null);
  return id!;
}

beforeAll(async () => {
  if (!existsSync(MAIN)) throw new Error(`${MAIN} is missing: run npm run build first`);
  world = await RuntimeWorld.create('rtident');
});

afterAll(async () => {
  processes.killAll();
  await world?.dispose();
});

describe('fault: two runtimes on one host', () => {
  it('each keeps its own id in its state directory; a second on a live one refuses to start; a restart reuses it; neither reaps the other', async () => {
    const clock = scenarioClock();
    const dirA = world.stateDir('host-a');
    const dirB = world.stateDir('host-b');
    const a = startRuntime(dirA);
    const idA = await registeredId(a);
    const b = startRuntime(dirB);
    const idB = await registeredId(b);
    // Made on the first start from the host name with a suffix of its own, and kept.
    expect(idA).not.toBe(idB);
    for (const [id, dir] of [[idA, dirA], [idB, dirB]] as const) {
      expect(id).toMatch(/^[a-z0-9][a-z0-9_.-]*-[0-9a-f]{8}$/);
      expect((await readFile(join(dir, 'worker-id'), 'utf8')).trim()).toBe(id);
    }

    const { runId } = await world.submitRun(spec({ steps: [{ argv: ['sh', '-c', 'echo started; sleep 4'] }, { argv: ['echo', 'second'] }] }), { workerId: idA, leaseTtlMs: 60_000 });
    await world.waitForType(runId, ['step.started']);
    const [sandboxA] = await world.containersOf(idA);
    expect(sandboxA?.name).toBe(`cairn-${runId}-1`);

    // A third runtime on A's directory while A lives: refused before it touches anything, naming the holder.
    const third = startRuntime(dirA);
    expect((await third.exited).code, third.output()).toBe(1);
    const fatal = logLines(third.output()).find((l) => l.level === 'fatal');
    expect(fatal).toMatchObject({ msg: 'failed to start', code: 'E_CONFLICT' });
    expect(String(fatal?.error)).toContain(`CAIRN_WORKER_STATE_DIR ${dirA} is held by a running runtime (pid ${a.child.pid} as worker ${idA})`);

    // B killed -9 and restarted: the same id (the lock it left is taken over), and its reconcile leaves A's sandbox alone.
    b.child.kill('SIGKILL');
    await b.exited;
    const b2 = startRuntime(dirB);
    expect(await registeredId(b2)).toBe(idB);
    // Started: registered, reconciled (it reaps only what carries its own id), serving.
    await until('B to be up', () => logLines(b2.output()).some((l) => l.msg === 'started'));
    expect(b2.output()).not.toContain('reconciled at start');
    expect((await world.containersOf(idA)).map((c) => c.name)).toEqual([sandboxA!.name]);

    const chain = await world.waitForType(runId, ['run.executed', 'run.failed'], 30_000);
    expect(ofType(chain, 'run.executed')).toHaveLength(1);
    expect(ofType(chain, 'sandbox.destroyed')).toEqual([expect.objectContaining({ reason: 'completed', verified_gone: true })]);

    // A stopped and started again on its directory: the same worker.
    a.child.kill('SIGTERM');
    expect(await a.exited).toEqual({ code: 0, signal: null });
    const a2 = startRuntime(dirA);
    expect(await registeredId(a2)).toBe(idA);
    expect(logLines(a2.output()).find((l) => l.msg === 'worker identity')).toMatchObject({ worker_id: idA, created: false });
    a2.child.kill('SIGTERM');
    await a2.exited;
    // A directory keeps its worker: another id given for it is refused.
    const renamed = startRuntime(dirA, { CAIRN_WORKER_ID: 'someone-else' });
    expect((await renamed.exited).code).toBe(1);
    expect(String(logLines(renamed.output()).find((l) => l.level === 'fatal')?.error)).toContain(`CAIRN_WORKER_ID is someone-else, but the state directory ${dirA} belongs to worker ${idA}`);

    b2.child.kill('SIGTERM');
    await b2.exited;
    const report = await checkStack(
      { nc: world.nc, natsUrl: testNatsUrl(), evidenceStream: world.names.stream, subjectPrefix: world.names.prefix, workerIds: [idA, idB], leasesBucket: world.names.leases },
      // No kernel, verifier or grader here: the run ends at run.executed.
      { acknowledged: [runId], mustEnd: [] },
      clock,
    );
    console.log(formatReport(report));
    expect(report.ok, formatReport(report)).toBe(true);
    expect(await world.registry.get(idA)).toBeNull();
    expect(await world.registry.get(idB)).toBeNull();
  });
});
