import { verifyChain } from '@cairn/evidence';
import { foldRun } from '@cairn/lifecycle';
import { ServiceProcesses, uniqueName, until } from '@cairn/testing';
import type { ServiceProcess } from '@cairn/testing';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ofType, RuntimeWorld, spec } from './runtime.harness.js';

// The real process, built by `npm run build` (npm test builds first).
const MAIN = fileURLToPath(new URL('../dist/main.js', import.meta.url));

let world: RuntimeWorld;
const processes = new ServiceProcesses();
const startProcess = (env: Record<string, string>): ServiceProcess => processes.start(MAIN, env);

beforeAll(async () => {
  if (!existsSync(MAIN)) throw new Error(`${MAIN} is missing: run npm run build first`);
  world = await RuntimeWorld.create('rtproc');
});

afterAll(async () => {
  processes.killAll();
  const left = await world?.leftoverContainers();
  await world?.dispose();
  expect(left).toEqual([]);
});

describe('the runtime process', () => {
  it('killed -9 mid-step in a claimed warm sandbox: restarted, it reaps it and the idle pool, and fails the run E_WORKER_LOST', async () => {
    const workerId = world.newWorkerId('killpool');
    const env = world.env(workerId, { CAIRN_WARM_POOL_SIZE: '1' });
    const first = startProcess(env);
    await until('the first runtime to register', async () => (await world.registry.get(workerId)) !== null);
    // A first run makes its profile warm.
    const warming = await world.submitRun(spec(), { workerId });
    await world.waitForType(warming.runId, ['run.executed']);
    await until('a warm sandbox', async () => (await world.containersOf(workerId)).filter((c) => c.pool !== undefined && c.running).length === 1);
    // Running is not claimable: the pool hands a container out once it is started, probed and booked,
    // which the worker's record reports (its heartbeat, 300 ms here).
    await until('the warm sandbox booked in the pool', async () => (await world.registry.get(workerId))?.pool?.size === 1);

    const { runId } = await world.submitRun(spec({ steps: [{ argv: ['sh', '-c', 'echo started; sleep 60'] }] }), { workerId, leaseTtlMs: 60_000 });
    const [created] = ofType(await world.waitForType(runId, ['step.started']), 'sandbox.created');
    // A warm one, claimed: it keeps its pool labels and takes the run's name (renamed behind the step's start).
    expect(created?.container_name).toBe(`cairn-${runId}-1`);
    await until('the claimed one renamed', async () => (await world.containersOf(workerId)).some((c) => c.name === created?.container_name));
    expect((await world.containersOf(workerId)).find((c) => c.name === created?.container_name)?.pool).toBeDefined();
    // The claimed one, and the pool refilled behind it.
    await until('the pool refilled', async () => (await world.containersOf(workerId)).length === 2);

    first.child.kill('SIGKILL');
    await first.exited;
    const second = startProcess(env);
    const chain = await world.waitForType(runId, ['run.failed'], 30_000);
    expect(ofType(chain, 'sandbox.destroyed')[0]).toMatchObject({ container_name: created!.container_name, verified_gone: true, reason: 'reaped' });
    expect(ofType(chain, 'run.failed')[0]).toMatchObject({ error_code: 'E_WORKER_LOST' });
    expect(verifyChain(chain)).toMatchObject({ ok: true, count: chain.length });
    // Nothing of the dead process is trusted: the claimed sandbox and the idle one are both gone.
    expect(await world.containersOf(workerId)).toEqual([]);
    second.child.kill('SIGTERM');
    await second.exited;
    expect(await world.containersOf(workerId)).toEqual([]);
  });

  it('killed -9 mid-step: restarted, it reaps the sandbox and fails the run E_WORKER_LOST; the chain verifies', async () => {
    const workerId = world.newWorkerId('kill');
    const env = world.env(workerId);
    const first = startProcess(env);
    await until('the first runtime to register', async () => (await world.registry.get(workerId)) !== null);

    const { runId } = await world.submitRun(spec({ steps: [{ argv: ['sh', '-c', 'echo started; sleep 60'] }, { argv: ['echo', 'second'] }] }), {
      workerId,
      leaseTtlMs: 60_000,
    });
    await world.waitForType(runId, ['step.started']);
    const [container] = await world.containersOf(workerId);
    expect(container?.name).toBe(`cairn-${runId}-1`);

    first.child.kill('SIGKILL');
    expect(await first.exited).toEqual({ code: null, signal: 'SIGKILL' });
    // The sandbox outlives its runtime; the lease is still this worker's and has not expired.
    expect((await world.containersOf(workerId)).map((c) => c.name)).toEqual([container!.name]);
    expect(await world.leases.get(runId)).toMatchObject({ worker_id: workerId });

    const second = startProcess(env);
    const chain = await world.waitForType(runId, ['run.failed'], 30_000);
    expect(chain.map((r) => r.type)).toEqual([
      'run.submitted',
      'policy.decided',
      'run.scheduled',
      'sandbox.created',
      'step.started',
      'sandbox.destroyed',
      'run.failed',
    ]);
    expect(ofType(chain, 'sandbox.destroyed')[0]).toMatchObject({ container_name: container!.name, verified_gone: true, reason: 'reaped' });
    expect(ofType(chain, 'run.failed')[0]).toMatchObject({ error_code: 'E_WORKER_LOST', actor: 'runtime' });
    expect(foldRun(chain)).toMatchObject({ state: 'FAILED', errorCode: 'E_WORKER_LOST' });
    expect(verifyChain(chain)).toMatchObject({ ok: true, count: chain.length });
    expect(await world.containersOf(workerId)).toEqual([]);
    expect(await world.leases.get(runId)).toBeNull();
    await until('the reconcile log line', () => second.output().includes('reconciled at start'));

    // A clean stop drains, deregisters and exits.
    second.child.kill('SIGTERM');
    expect(await second.exited).toEqual({ code: 0, signal: null });
    expect(await world.registry.get(workerId)).toBeNull();
    expect(ofType(await world.receipts(runId), 'step.completed')).toEqual([]);
  });

  it('told SIGTERM while it boots (registered, not yet up): it stops cleanly once up, deregistered and with its pool gone', async () => {
    const workerId = world.newWorkerId('bootterm');
    const started = startProcess(world.env(workerId, { CAIRN_WARM_POOL_SIZE: '1' }));
    // Registration is the first thing the worker does; the reconcile, the pool and the reactor follow.
    await until('the worker to register', async () => (await world.registry.get(workerId)) !== null, 20_000);
    started.child.kill('SIGTERM');
    expect(await started.exited, started.output()).toEqual({ code: 0, signal: null });
    expect(started.output()).toContain('"msg":"stopping"');
    expect(await world.registry.get(workerId)).toBeNull();
    expect(await world.containersOf(workerId)).toEqual([]);
  });

  it('with no container engine, logs the reason at fatal level and registers unhealthy', async () => {
    const workerId = world.newWorkerId('noengine');
    const started = startProcess(world.env(workerId, { CAIRN_DOCKER_SOCKET: `/tmp/${uniqueName('none')}.sock` }));
    await until('the worker to register', async () => (await world.registry.get(workerId)) !== null);
    expect(await world.registry.get(workerId)).toMatchObject({ healthy: false });
    const fatal = started
      .output()
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as Record<string, unknown>)
      .find((line) => line.level === 'fatal');
    expect(fatal).toMatchObject({ service: 'runtime', worker_id: workerId });
    expect(String(fatal?.msg)).toContain('E_RUNTIME_ABSENT');
    started.child.kill('SIGTERM');
    await started.exited;
  });

  it('fails at boot, naming the variable, when the configuration is wrong', async () => {
    const started = startProcess({ ...world.env(world.newWorkerId('badcfg')), CAIRN_WORKER_SLOTS: 'many' });
    expect((await started.exited).code).toBe(1);
    expect(started.output()).toContain('CAIRN_WORKER_SLOTS');
  });

  it("refuses to start (E_INPUT) a worker whose sandbox uid or gid is root or one of this host's accounts or groups", async () => {
    // An account and a group this host has (Debian's nobody and nogroup, or whatever is first past root).
    const firstId = (text: string) => text.split('\n').map((line) => line.split(':')).find((f) => f.length > 3 && /^[1-9]\d*$/.test(f[2] ?? ''))!;
    const account = firstId(readFileSync('/etc/passwd', 'utf8'));
    const group = firstId(readFileSync('/etc/group', 'utf8'));
    for (const [user, message] of [
      ['0:0', /the sandbox uid must be an integer from 1/],
      [`${account[2]}:65520`, new RegExp(`uid ${account[2]} is the host's user ${account[0]} \\(/etc/passwd\\)`)],
      [`65520:${group[2]}`, new RegExp(`gid ${group[2]} is the host's group ${group[0]} \\(/etc/group\\)`)],
    ] as const) {
      const workerId = world.newWorkerId('baduser');
      const started = startProcess({ ...world.env(workerId), CAIRN_SANDBOX_USER: user });
      expect((await started.exited).code, user).toBe(1);
      const fatal = fatalLine(started.output());
      expect(fatal).toMatchObject({ msg: 'failed to start', code: 'E_INPUT' });
      expect(String(fatal?.error)).toMatch(/CAIRN_SANDBOX_USER/);
      expect(String(fatal?.error)).toMatch(message);
      expect(await world.registry.get(workerId)).toBeNull();
    }
  });

  it('refuses to start (E_RUNTIME_ABSENT) a worker that must remap user namespaces on an engine that does not', async () => {
    const workerId = world.newWorkerId('userns');
    const started = startProcess({ ...world.env(workerId), CAIRN_SANDBOX_REQUIRE_USERNS: '1' });
    expect((await started.exited).code).toBe(1);
    const fatal = fatalLine(started.output());
    expect(fatal).toMatchObject({ msg: 'failed to start', code: 'E_RUNTIME_ABSENT' });
    expect(String(fatal?.error)).toMatch(/must run sandboxes user-namespace-remapped \(CAIRN_SANDBOX_REQUIRE_USERNS\)/);
    expect(await world.registry.get(workerId)).toBeNull();
  });
});

function fatalLine(output: string): Record<string, unknown> | undefined {
  return output
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as Record<string, unknown>)
    .find((line) => line.level === 'fatal');
}
