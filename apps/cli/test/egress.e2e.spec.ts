import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
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

const DENIALS_RECORDED = 3;

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
  stack = await TestStack.create('egress-e2e', {
    CAIRN_POLICY_FILE: policyFile,
    CAIRN_EGRESS_HOSTS: `sink.test=${sinkIp},evil.test=${sinkIp}`,
    // Small, so a session can be seen to pass it (a run here is refused once).
    CAIRN_EGRESS_DENIALS_RECORDED: String(DENIALS_RECORDED),
  });
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

  it('a sandbox session’s refusals are recorded as a run’s: at most CAIRN_EGRESS_DENIALS_RECORDED, all before its teardown, the chain verifying', async () => {
    const created = await stack.api('/v1/sandboxes', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ image: 'cairn/sandbox-busybox:1', caps: { memoryMiB: 64, pids: 64, diskMiB: 16, cpus: 0.5 }, network: { egress: ['sink.test:8080'] }, ttlSeconds: 300 }),
    });
    const sandbox = (await created.json()) as { id: string };
    expect(created.status, JSON.stringify(sandbox)).toBe(201);
    const exec = async (argv: string[]) => {
      const answer = await stack.api(`/v1/sandboxes/${sandbox.id}/exec`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ argv }) });
      expect(answer.status).toBe(200);
      return (await answer.json()) as { stdout: string; exitCode: number };
    };
    const attempts = DENIALS_RECORDED + 3;
    await exec(['sh', '-c', `for i in $(seq ${attempts}); do busybox wget -q -O - http://evil.test:8080/; done; true`]);
    // The session goes on: the allowlisted host still answers.
    expect((await exec(['busybox', 'wget', '-q', '-O', '-', 'http://sink.test:8080/'])).stdout).toContain('sink-ok');
    expect((await stack.api(`/v1/sandboxes/${sandbox.id}`, { method: 'DELETE' })).status).toBe(200);

    const response = await stack.api(`/v1/sandboxes/${sandbox.id}/events?after=0&limit=1000`);
    const chain = ((await response.json()) as { items: Record<string, unknown>[] }).items;
    const denied = chain.filter((r) => r.type === 'egress.denied');
    expect(denied).toHaveLength(DENIALS_RECORDED);
    for (const r of denied) expect(r).toMatchObject({ host: 'evil.test', port: 8080, reason: 'not_allowlisted', error_code: 'E_EGRESS' });
    const destroyedAt = chain.findIndex((r) => r.type === 'sandbox.destroyed');
    expect(destroyedAt).toBeGreaterThan(0);
    expect(chain.slice(destroyedAt).map((r) => r.type)).not.toContain('egress.denied');
    const log = await readFile(join(stack.home, 'logs', 'runtime.log'), 'utf8');
    expect(log).toContain('egress refusals past the recorded maximum are only logged');
    await stack.expectCleanAndVerifiable(sandbox.id);
  });
});
