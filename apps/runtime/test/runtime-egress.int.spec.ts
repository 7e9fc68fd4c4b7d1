import { verifyChain } from '@cairn/evidence';
import { foldRun } from '@cairn/lifecycle';
import { BUSYBOX_IMAGE_TAG, IptablesFirewall } from '@cairn/sandbox-docker';
import type { RunningService } from '@cairn/service-kit';
import { uniqueName } from '@cairn/testing';
import { readdir, readFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ofType, RuntimeWorld, spec } from './runtime.harness.js';

/*
 * A run with egress through the runtime, on the real NATS, engine and iptables. The only server
 * reached is a sink (busybox httpd) this file starts in its own container on its own network;
 * the runtime resolves `sink.test` and `evil.test` from CAIRN_EGRESS_HOSTS, never from DNS.
 */

let world: RuntimeWorld;
let runtime: RunningService;
let workerId: string;
let sinkIp = '';
const testLabel = uniqueName('rtegr');
const firewall = new IptablesFirewall();

async function startSink(): Promise<void> {
  const { docker } = world;
  const network = await docker.createNetwork({ Name: uniqueName('rtegr-sink'), Driver: 'bridge', Labels: { 'io.cairn.test': testLabel } });
  const container = await docker.createContainer({
    name: uniqueName('rtegr-sink'),
    Image: BUSYBOX_IMAGE_TAG,
    Labels: { 'io.cairn.test': testLabel },
    Entrypoint: ['sh', '-c', 'mkdir -p /tmp/www && echo sink-ok > /tmp/www/index.html && exec busybox httpd -f -p 8080 -h /tmp/www'],
    HostConfig: { NetworkMode: network.id, CapDrop: ['ALL'] },
  });
  await container.start();
  sinkIp = Object.values((await container.inspect()).NetworkSettings.Networks)[0]?.IPAddress ?? '';
  for (let i = 0; i < 50; i++) {
    if (await fetch(`http://${sinkIp}:8080/`).then((r) => r.ok, () => false)) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error('the sink did not answer');
}

async function removeTestObjects(): Promise<void> {
  const { docker } = world;
  const filters = { label: [`io.cairn.test=${testLabel}`] };
  for (const c of await docker.listContainers({ all: true, filters })) await docker.getContainer(c.Id).remove({ force: true }).catch(() => undefined);
  for (const n of await docker.listNetworks({ filters })) await docker.getNetwork(n.Id).remove().catch(() => undefined);
}

async function networksOf(worker: string): Promise<string[]> {
  return (await world.docker.listNetworks({ filters: { label: [`io.cairn.worker=${worker}`] } })).map((n) => n.Name);
}

/** The egress proxy processes this process started (the runtime runs in it): host pids. */
async function proxyChildren(): Promise<number[]> {
  const found: number[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const [status, cmdline] = await Promise.all([readFile(`/proc/${entry}/status`, 'utf8'), readFile(`/proc/${entry}/cmdline`, 'utf8')]).catch(() => ['', '']);
    if (Number(/^PPid:\s+(\d+)/m.exec(status)?.[1]) === process.pid && cmdline.includes('egress-proxy.child.js')) found.push(Number(entry));
  }
  return found;
}

// No `-T`: this busybox's wget crashes (SIGSEGV) with a timeout set; steps have their own.
const wget = (url: string) => ['busybox', 'wget', '-q', '-O', '-', url];

beforeAll(async () => {
  world = await RuntimeWorld.create('rtegr');
  await startSink();
  workerId = world.newWorkerId('egress');
  runtime = await world.startRuntime(workerId, { CAIRN_EGRESS_HOSTS: `sink.test=${sinkIp},evil.test=${sinkIp}` });
});

afterAll(async () => {
  await runtime?.stop();
  const leftContainers = await world?.leftoverContainers();
  const leftNetworks = await networksOf(workerId);
  const leftRules = await firewall.list(workerId);
  await removeTestObjects();
  await world?.dispose();
  expect(leftContainers).toEqual([]);
  expect(leftNetworks).toEqual([]);
  expect(leftRules).toEqual([]);
});

describe('a run with egress', () => {
  it('reaches its allowlisted host, is refused another with an egress.denied receipt, goes on, and leaves nothing behind', async () => {
    const { runId } = await world.submitRun(
      spec({
        network: { egress: ['sink.test:8080'] },
        steps: [
          { argv: wget('http://sink.test:8080/') },
          { argv: wget('http://evil.test:8080/') },
          { argv: ['busybox', 'nc', '-w', '3', sinkIp, '8080'] },
          { argv: ['echo', 'still running'] },
        ],
      }),
      { workerId, network: { egress: ['sink.test:8080'], allow_private: true } },
    );
    const chain = await world.waitForType(runId, ['run.executed', 'run.failed'], 60_000);
    expect(chain.map((r) => r.type)).toEqual([
      'run.submitted',
      'policy.decided',
      'run.scheduled',
      'sandbox.created',
      'step.started',
      'step.completed',
      'step.started',
      'egress.denied',
      'step.completed',
      'step.started',
      'step.completed',
      'step.started',
      'step.completed',
      'sandbox.destroyed',
      'run.executed',
    ]);
    expect(verifyChain(chain)).toMatchObject({ ok: true, count: chain.length });
    expect(foldRun(chain)?.state).toBe('EXECUTED');

    const [created] = ofType(chain, 'sandbox.created');
    expect(created).toMatchObject({ network: 'egress_proxy', hardening: { network: `cairn-egress-${runId}-1` } });
    expect(ofType(chain, 'egress.denied')).toEqual([
      expect.objectContaining({ actor: 'runtime', host: 'evil.test', port: 8080, reason: 'not_allowlisted', error_code: 'E_EGRESS', step_index: 1 }),
    ]);
    const steps = ofType(chain, 'step.completed');
    const output = async (sha: string) => Buffer.from(await world.artifacts.get(sha)).toString();
    expect(steps.map((s) => s.exit_code)).toEqual([0, 1, 1, 0]);
    expect(await output(steps[0]!.stdout_sha256)).toBe('sink-ok\n');
    expect(await output(steps[1]!.stdout_sha256)).toBe('');
    expect(await output(steps[1]!.stderr_sha256)).toContain('403 Forbidden');
    expect(await output(steps[2]!.stdout_sha256)).toBe('');
    expect(await output(steps[2]!.stderr_sha256)).toMatch(/can't connect/);
    expect(ofType(chain, 'sandbox.destroyed')).toEqual([expect.objectContaining({ verified_gone: true, reason: 'completed' })]);
    expect(await world.containersOf(workerId)).toEqual([]);
    expect(await networksOf(workerId)).toEqual([]);
    expect(await firewall.list(workerId)).toEqual([]);
  });

  it('is refused a name that resolves to a private address when policy does not allow private addresses', async () => {
    const { runId } = await world.submitRun(spec({ network: { egress: ['sink.test:8080'] }, steps: [{ argv: wget('http://sink.test:8080/') }] }), {
      workerId,
      network: { egress: ['sink.test:8080'], allow_private: false },
    });
    const chain = await world.waitForType(runId, ['run.executed', 'run.failed'], 60_000);
    expect(ofType(chain, 'egress.denied')).toEqual([expect.objectContaining({ host: 'sink.test', port: 8080, reason: 'private_address', step_index: 0 })]);
    expect(ofType(chain, 'run.executed')[0]?.exit_codes).toEqual([1]);
    const [step] = ofType(chain, 'step.completed');
    expect(Buffer.from(await world.artifacts.get(step!.stderr_sha256)).toString()).toContain('403 Forbidden');
  });

  it('whose proxy dies mid-run: the runtime logs it, and the sandbox has no way out from then on', async () => {
    const logged: string[] = [];
    const stderr = vi.spyOn(process.stderr, 'write').mockImplementation((line: string | Uint8Array) => {
      logged.push(String(line));
      return true;
    });
    try {
      const { runId } = await world.submitRun(
        spec({ network: { egress: ['sink.test:8080'] }, steps: [{ argv: wget('http://sink.test:8080/') }, { argv: ['sleep', '2'] }, { argv: wget('http://sink.test:8080/') }] }),
        { workerId, network: { egress: ['sink.test:8080'], allow_private: true } },
      );
      await world.waitForType(runId, ['step.completed'], 60_000);
      const [proxy] = await proxyChildren();
      expect(proxy).toBeDefined();
      process.kill(proxy!, 'SIGKILL');
      const chain = await world.waitForType(runId, ['run.executed', 'run.failed'], 60_000);
      const steps = ofType(chain, 'step.completed');
      expect(steps.map((s) => s.exit_code)).toEqual([0, 0, 1]);
      expect(Buffer.from(await world.artifacts.get(steps[0]!.stdout_sha256)).toString()).toBe('sink-ok\n');
      expect(Buffer.from(await world.artifacts.get(steps[2]!.stdout_sha256)).toString()).toBe('');
      const line = logged.find((l) => l.includes('the egress proxy of a run died'));
      expect(line).toBeDefined();
      expect(JSON.parse(line!)).toMatchObject({ level: 'error', run_id: runId, reason: expect.stringContaining('SIGKILL') as string });
      expect(ofType(chain, 'sandbox.destroyed')).toEqual([expect.objectContaining({ verified_gone: true })]);
      expect(await proxyChildren()).toEqual([]);
      expect(await networksOf(workerId)).toEqual([]);
    } finally {
      stderr.mockRestore();
    }
  });

  it('fails E_SANDBOX_START, with no sandbox, when its network cannot be set up', async () => {
    const runId = `run_${uniqueName('rtegr').toLowerCase()}`;
    // Someone else's network holds the name: the runtime must not start the run without its own.
    await world.docker.createNetwork({ Name: `cairn-egress-${runId}-1`, Driver: 'bridge', Internal: true, Labels: { 'io.cairn.test': testLabel } });
    await world.submitRun(spec({ network: { egress: ['sink.test:8080'] }, steps: [{ argv: ['echo', 'never'] }] }), {
      workerId,
      runId,
      network: { egress: ['sink.test:8080'], allow_private: true },
    });
    const chain = await world.waitForType(runId, ['run.executed', 'run.failed'], 60_000);
    expect(chain.map((r) => r.type)).toEqual(['run.submitted', 'policy.decided', 'run.scheduled', 'run.failed']);
    expect(ofType(chain, 'run.failed')[0]).toMatchObject({ error_code: 'E_SANDBOX_START' });
    expect(ofType(chain, 'run.failed')[0]?.message).toMatch(/egress network/);
    expect(await world.containersOf(workerId)).toEqual([]);
  });
});
