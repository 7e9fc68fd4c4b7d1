import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { uniqueName } from '@cairn/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestStack } from './stack.harness.js';
import type { RunOutcome } from './stack.harness.js';

/*
 * Egress through the whole stack (`cairn up` with an operator policy that allowlists one host):
 * policy admits or refuses the hosts a RunSpec asks for, the runtime gives an admitted run its
 * own internal network and allowlisting proxy, a refused connection lands on the chain as
 * `egress.denied` while the run goes on to its seal. The only server reached is a sink this file
 * starts in its own container; names resolve through CAIRN_EGRESS_HOSTS, never DNS.
 */

const SMALL = { wallSeconds: 20, memoryMiB: 32, pids: 32, diskMiB: 8, cpus: 0.5 };
const testLabel = uniqueName('egress-e2e');
let stack: TestStack;
let policyDir = '';
let sinkIp = '';

async function docker() {
  const { createDockerClient } = await import('@cairn/sandbox-docker');
  return createDockerClient();
}

async function startSink(): Promise<void> {
  const engine = await docker();
  const network = await engine.createNetwork({ Name: uniqueName('egress-e2e-sink'), Driver: 'bridge', Labels: { 'io.cairn.test': testLabel } });
  const container = await engine.createContainer({
    name: uniqueName('egress-e2e-sink'),
    Image: 'cairn/sandbox-busybox:1',
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

async function removeSink(): Promise<void> {
  const engine = await docker();
  const filters = { label: [`io.cairn.test=${testLabel}`] };
  for (const c of await engine.listContainers({ all: true, filters })) await engine.getContainer(c.Id).remove({ force: true }).catch(() => undefined);
  for (const n of await engine.listNetworks({ filters })) await engine.getNetwork(n.Id).remove().catch(() => undefined);
}

/** The built-in default policy, with an egress allowlist of one host (on a private address: the sink). */
const POLICY = {
  version: 1,
  defaultImage: 'cairn/sandbox-busybox:1',
  images: { allow: [{ name: 'cairn/sandbox-busybox:1' }, { name: 'cairn/sandbox-debian:1' }] },
  caps: {
    defaults: { wallSeconds: 60, memoryMiB: 256, pids: 64, diskMiB: 256, cpus: 1 },
    max: { wallSeconds: 600, memoryMiB: 4096, pids: 256, diskMiB: 8192, cpus: 4 },
  },
  network: { egress: 'allowlist', allow: ['sink.test:8080'], allowPrivate: true },
  approvals: { rules: [{ when: 'apply_step' }] },
  budgets: { runsPerJob: 6, jobMinutes: 90 },
};

async function runAndWait(name: string, spec: unknown): Promise<{ code: number; outcome: RunOutcome; stderr: string }> {
  const path = await stack.specFile(name, spec);
  const cli = await stack.cairn(['run', path, '--wait', '--json']);
  try {
    return { code: cli.code ?? -1, outcome: JSON.parse(cli.stdout) as RunOutcome, stderr: cli.stderr };
  } catch {
    throw new Error(`cairn run printed no JSON (exit ${cli.code}):\n${cli.stdout}\n${cli.stderr}\n${await stack.logs()}`);
  }
}

async function events(runId: string): Promise<Record<string, unknown>[]> {
  const response = await stack.api(`/v1/runs/${runId}/events?after=0&limit=1000`);
  expect(response.status).toBe(200);
  return ((await response.json()) as { items: Record<string, unknown>[] }).items;
}

beforeAll(async () => {
  await removeSink();
  policyDir = await mkdtemp(join(tmpdir(), 'cairn-egress-e2e-'));
  const policyFile = join(policyDir, 'policy.json');
  await writeFile(policyFile, JSON.stringify(POLICY));
  // The sink runs from the sandbox image (`cairn up` would build it too, but the sink comes first).
  const { ensureBusyboxImage } = await import('@cairn/sandbox-docker');
  await ensureBusyboxImage();
  await startSink();
  stack = await TestStack.create('egress-e2e', { CAIRN_POLICY_FILE: policyFile, CAIRN_EGRESS_HOSTS: `sink.test=${sinkIp},evil.test=${sinkIp}` });
  const up = await stack.up();
  expect(up.outcome).toBe('started');
});

afterAll(async () => {
  await stack?.dispose();
  const engine = await docker();
  const left = stack === undefined ? [] : await engine.listNetworks({ filters: { label: [`io.cairn.worker=${stack.names.workerId}`] } });
  await removeSink();
  if (policyDir !== '') await rm(policyDir, { recursive: true, force: true });
  expect(left.map((n) => n.Name)).toEqual([]);
});

describe('egress through the stack', () => {
  it('an allowlisted host is reached, another is refused and recorded, and the run seals SUPPORTS', async () => {
    const { code, outcome, stderr } = await runAndWait('egress', {
      name: 'egress allowlist',
      image: 'cairn/sandbox-busybox:1',
      caps: SMALL,
      network: { egress: ['sink.test:8080'] },
      steps: [
        { argv: ['busybox', 'wget', '-q', '-O', '-', 'http://sink.test:8080/'] },
        { argv: ['busybox', 'wget', '-q', '-O', '-', 'http://evil.test:8080/'] },
        { argv: ['echo', 'still running'] },
      ],
      checks: [{ id: 'reached', source: 'steps[0].stdout', op: 'contains', value: 'sink-ok', weight: 1 }],
      claim: {
        statement: 'the allowlisted host answered through the proxy and the other was refused',
        checks: [
          { id: 'reached', source: 'steps[0].stdout', op: 'contains', value: 'sink-ok' },
          { id: 'refused', source: 'steps[1].exit_code', op: 'eq', value: 1 },
          { id: 'went-on', source: 'steps[2].exit_code', op: 'eq', value: 0 },
        ],
      },
    });
    expect(code, stderr).toBe(0);
    expect(outcome).toMatchObject({ state: 'SEALED', verdict: 'SUPPORTS', errorCode: null, score: 1, maxScore: 1 });
    const chain = await events(outcome.runId);
    expect(chain.find((r) => r.type === 'policy.decided')).toMatchObject({ decision: 'allow', network: { egress: ['sink.test:8080'], allow_private: true } });
    expect(chain.find((r) => r.type === 'sandbox.created')).toMatchObject({ network: 'egress_proxy' });
    expect(chain.filter((r) => r.type === 'egress.denied')).toEqual([
      expect.objectContaining({ host: 'evil.test', port: 8080, reason: 'not_allowlisted', error_code: 'E_EGRESS', step_index: 1 }),
    ]);
    expect(chain.at(-1)).toMatchObject({ type: 'run.sealed', final_state: 'SEALED' });
    await stack.expectCleanAndVerifiable(outcome.runId);
  });

  it('a spec asking for a host not on the operator allowlist is REJECTED E_POLICY_DENIED naming it', async () => {
    const { code, outcome } = await runAndWait('egress-denied', {
      name: 'egress off the list',
      image: 'cairn/sandbox-busybox:1',
      caps: SMALL,
      network: { egress: ['sink.test:8080', 'evil.test:8080'] },
      steps: [{ argv: ['echo', 'never'] }],
    });
    expect(code).toBe(1);
    expect(outcome).toMatchObject({ state: 'REJECTED', errorCode: 'E_POLICY_DENIED' });
    const chain = await events(outcome.runId);
    expect(chain.map((r) => r.type)).toEqual(['run.submitted', 'policy.decided', 'run.sealed']);
    expect(chain[1]).toMatchObject({ decision: 'deny', reasons: ["network: egress to evil.test:8080 is not on the policy's egress allowlist"] });
    await stack.expectCleanAndVerifiable(outcome.runId);
  });
});
