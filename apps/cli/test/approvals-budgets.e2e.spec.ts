import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { ApiKeyScope } from '@cairn/contracts';
import { provisionKey, uniqueName } from '@cairn/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CliRun } from './cli.harness.js';
import { TestStack } from './stack.harness.js';
import type { RunView } from './stack.harness.js';

/*
 * Approvals and budgets end to end, through the CLI and REST of one isolated stack on the real
 * Docker engine, NATS and PostgreSQL. The stack's policy holds runs of two extra tags of the
 * busybox image (one with a 2 s approval timeout), holds every `apply` step, and sets tenant and
 * output budgets. Each test acts in a tenant of its own (keys minted into the stack's database),
 * so the tenant quota of one never touches another; independent runs start together.
 */

const exec = promisify(execFile);
const SMALL = { wallSeconds: 20, memoryMiB: 32, pids: 32, diskMiB: 8, cpus: 0.5 };
const suffix = uniqueName('t').toLowerCase().replace(/[^a-z0-9]/g, '');
const HELD = `cairn/sandbox-busybox:held-${suffix}`;
const QUICK = `cairn/sandbox-busybox:quick-${suffix}`;
const OUTPUT_BUDGET = 4096;

let stack: TestStack;
let policyDir: string;

interface Key {
  id: string;
  key: string;
  tenant: string;
}
interface TenantKeys {
  /** runs:read, runs:write and approve: may approve others' runs, never its own. */
  submitter: Key;
  approver: Key;
  reader: Key;
}

/** Mints keys through the stack's REST API with its operator key (each recorded on adm_<tenant>). */
async function mintKeys(tenant: string): Promise<TenantKeys> {
  const mint = (scopes: ApiKeyScope[]): Promise<Key> => provisionKey(stack.url, stack.apiKey, { tenant, scopes });
  return {
    submitter: await mint(['runs:read', 'runs:write', 'approve']),
    approver: await mint(['runs:read', 'approve']),
    reader: await mint(['runs:read']),
  };
}

function cairn(key: Key, args: string[]): Promise<CliRun> {
  return stack.cairn(args, { CAIRN_API_KEY: key.key });
}

function json(run: CliRun): Record<string, unknown> {
  try {
    return JSON.parse(run.stdout) as Record<string, unknown>;
  } catch {
    throw new Error(`no JSON (exit ${run.code}):\n${run.stdout}\n${run.stderr}`);
  }
}

async function api(key: Key, path: string, init: RequestInit = {}): Promise<Response> {
  return fetch(`${stack.url}${path}`, { ...init, headers: { authorization: `Bearer ${key.key}`, 'content-type': 'application/json', ...(init.headers as Record<string, string> | undefined) } });
}

/** `cairn run <spec> --json` as `key`: the run id (not waiting). */
async function submit(key: Key, name: string, spec: Record<string, unknown>): Promise<string> {
  const path = await stack.specFile(`${name}-${randomUUID()}`, { name, image: 'cairn/sandbox-busybox:1', caps: SMALL, network: 'none', ...spec });
  const run = await cairn(key, ['run', path, '--json']);
  expect(run.code, run.stdout + run.stderr).toBe(0);
  return json(run).runId as string;
}

async function waitFor(key: Key, runId: string, done: (run: RunView) => boolean, timeoutMs = 60_000): Promise<RunView> {
  const deadline = Date.now() + timeoutMs;
  let last: RunView | null = null;
  while (Date.now() < deadline) {
    const response = await api(key, `/v1/runs/${runId}`);
    if (response.status === 200) {
      last = (await response.json()) as RunView;
      if (done(last)) return last;
    }
    await new Promise((resolve) => setTimeout(resolve, 150));
  }
  throw new Error(`run ${runId} did not get there in ${timeoutMs} ms; last seen ${JSON.stringify(last)}\n${await stack.logs()}`);
}

type Receipt = Record<string, unknown> & { type: string; seq: number };
async function receipts(key: Key, runId: string): Promise<Receipt[]> {
  const response = await api(key, `/v1/runs/${runId}/events?after=0&limit=1000`);
  expect(response.status).toBe(200);
  return ((await response.json()) as { items: Receipt[] }).items;
}

/** Sealed, no container left, and the chain verifies offline from the proof bundle. */
async function expectSealedCleanVerified(key: Key, runId: string): Promise<void> {
  expect(await stack.containers(runId)).toEqual([]);
  const verified = await cairn(key, ['verify', runId, '--json']);
  expect(verified.code, verified.stdout + verified.stderr).toBe(0);
  expect(json(verified)).toMatchObject({ ok: true, chainId: runId });
}

/**
 * Each test is a scenario in a tenant of its own: all of them start together once the stack is
 * up, and each test awaits its own, so the file takes as long as its slowest scenario.
 */
const scenarios = new Map<string, () => Promise<void>>();
const started = new Map<string, Promise<void>>();
function scenario(name: string, body: () => Promise<void>): void {
  scenarios.set(name, body);
  it(name, () => started.get(name) ?? Promise.reject(new Error(`scenario ${name} never started`)));
}

const sealed = (run: RunView) => run.sealed;
const awaiting = (run: RunView) => run.state === 'AWAITING_APPROVAL';

beforeAll(async () => {
  policyDir = await mkdtemp(join(tmpdir(), 'cairn-approvals-policy-'));
  const policyFile = join(policyDir, 'policy.json');
  await writeFile(
    policyFile,
    JSON.stringify({
      version: 1,
      defaultImage: 'cairn/sandbox-busybox:1',
      images: { allow: [{ name: 'cairn/sandbox-busybox:1' }, { name: HELD }, { name: QUICK }] },
      caps: {
        defaults: { wallSeconds: 60, memoryMiB: 256, pids: 64, diskMiB: 256, cpus: 1 },
        max: { wallSeconds: 600, memoryMiB: 4096, pids: 256, diskMiB: 8192, cpus: 4 },
      },
      network: { egress: 'deny' },
      approvals: {
        rules: [
          { when: 'apply_step', timeoutSeconds: 120 },
          { when: { image: HELD }, timeoutSeconds: 120 },
          { when: { image: QUICK }, timeoutSeconds: 2 },
        ],
      },
      budgets: { runsPerJob: 6, jobMinutes: 90, tenantConcurrentRuns: 2, tenantCpuSecondsPerDay: 1_000_000, outputBytesPerStep: OUTPUT_BUDGET },
    }),
  );
  stack = await TestStack.create('approvals-e2e', {
    CAIRN_POLICY_FILE: policyFile,
    CAIRN_APPROVAL_SCAN_INTERVAL_MS: '200',
    CAIRN_HEARTBEAT_MS: '500',
    CAIRN_GRADER_TEARDOWN_GRACE_MS: '3000',
    // Generous leases: a held step's lease is renewed for as long as it waits, and a loaded machine must not lose one.
    CAIRN_LEASE_TTL_MS: '60000',
  });
  await stack.up();
  // The held images are the busybox image under other tags: the worker reports them at its next heartbeat.
  for (const tag of [HELD, QUICK]) await exec('docker', ['tag', 'cairn/sandbox-busybox:1', tag]);
  await new Promise((resolve) => setTimeout(resolve, 1200));
  for (const [name, body] of scenarios) {
    const running = body();
    // Nothing waits on a scenario before its test: keep a failure from going unhandled meanwhile.
    running.catch(() => undefined);
    started.set(name, running);
  }
}, 180_000);

afterAll(async () => {
  await stack?.dispose();
  for (const tag of [HELD, QUICK]) await exec('docker', ['rmi', tag]).catch(() => undefined);
  await rm(policyDir, { recursive: true, force: true });
});

describe('approvals', () => {
  scenario('a held run: AWAITING_APPROVAL; its own key, a read-only key and another tenant are refused; an approver releases it to SEALED, on the chain', async () => {
    const keys = await mintKeys('apr-ok');
    const other = await mintKeys('apr-other');
    const runId = await submit(keys.submitter, 'held then approved', { image: HELD, steps: [{ argv: ['echo', 'approved'] }] });
    await waitFor(keys.submitter, runId, awaiting);

    const own = await cairn(keys.submitter, ['approve', runId, '--json']);
    expect(own.code).toBe(1);
    expect(json(own)).toMatchObject({ ok: false, error: { code: 'E_FORBIDDEN', message: expect.stringContaining('submitted') as string } });
    const readOnly = await api(keys.reader, `/v1/runs/${runId}/approvals`, { method: 'POST', body: JSON.stringify({ decision: 'approve' }) });
    expect(readOnly.status).toBe(403);
    expect(await readOnly.json()).toMatchObject({ code: 'E_FORBIDDEN', details: { scope: 'approve' } });
    const elsewhere = await cairn(other.approver, ['approve', runId, '--json']);
    expect(json(elsewhere)).toMatchObject({ ok: false, error: { code: 'E_NOT_FOUND' } });
    const bad = await api(keys.approver, `/v1/runs/${runId}/approvals`, { method: 'POST', body: JSON.stringify({ decision: 'maybe' }) });
    expect(bad.status).toBe(400);
    expect((await receipts(keys.submitter, runId)).map((r) => r.type)).toEqual(['run.submitted', 'policy.decided', 'approval.requested']);

    const approved = await cairn(keys.approver, ['approve', runId, '--comment', 'ship it', '--json']);
    expect(approved.code, approved.stdout + approved.stderr).toBe(0);
    expect(json(approved)).toMatchObject({ ok: true, runId, decision: 'approve', duplicate: false });
    const run = await waitFor(keys.submitter, runId, sealed);
    expect(run).toMatchObject({ state: 'SEALED', errorCode: null });
    const chain = await receipts(keys.submitter, runId);
    expect(chain.map((r) => r.type).slice(0, 5)).toEqual(['run.submitted', 'policy.decided', 'approval.requested', 'approval.granted', 'run.scheduled']);
    expect(chain[3]).toMatchObject({ approval_id: 'image', approved_by: `key:${keys.approver.id}`, comment: 'ship it' });
    expect(chain[0]).toMatchObject({ submitted_by: `key:${keys.submitter.id}` });

    const after = await cairn(keys.approver, ['approve', runId, '--json']);
    expect(json(after)).toMatchObject({ ok: false, error: { code: 'E_SEALED' } });
    await expectSealedCleanVerified(keys.submitter, runId);
  });

  scenario('a rejection ends the run CANCELLED with E_NO_APPROVAL, the approver and comment on the chain', async () => {
    const keys = await mintKeys('apr-no');
    const runId = await submit(keys.submitter, 'held then rejected', { image: HELD, steps: [{ argv: ['echo', 'never'] }] });
    await waitFor(keys.submitter, runId, awaiting);
    const rejected = await cairn(keys.approver, ['approve', runId, '--reject', '--comment', 'not this one', '--json']);
    expect(rejected.code, rejected.stdout + rejected.stderr).toBe(0);
    expect(json(rejected)).toMatchObject({ ok: true, decision: 'reject', state: 'CANCELLED' });
    const run = await waitFor(keys.submitter, runId, sealed);
    expect(run).toMatchObject({ state: 'CANCELLED', errorCode: 'E_NO_APPROVAL' });
    const chain = await receipts(keys.submitter, runId);
    expect(chain.map((r) => r.type)).toEqual(['run.submitted', 'policy.decided', 'approval.requested', 'approval.rejected', 'run.sealed']);
    expect(chain[3]).toMatchObject({ rejected_by: `key:${keys.approver.id}`, cause: 'rejected', comment: 'not this one' });
    await expectSealedCleanVerified(keys.submitter, runId);
  });

  scenario('no decision before the approval’s timeout ends the run CANCELLED with E_NO_APPROVAL', async () => {
    const keys = await mintKeys('apr-late');
    const runId = await submit(keys.submitter, 'held and forgotten', { image: QUICK, steps: [{ argv: ['echo', 'never'] }] });
    const run = await waitFor(keys.submitter, runId, sealed, 30_000);
    expect(run).toMatchObject({ state: 'CANCELLED', errorCode: 'E_NO_APPROVAL' });
    const chain = await receipts(keys.submitter, runId);
    expect(chain.map((r) => r.type)).toEqual(['run.submitted', 'policy.decided', 'approval.requested', 'approval.rejected', 'run.sealed']);
    expect(chain[3]).toMatchObject({ actor: 'scheduler', rejected_by: 'scheduler', cause: 'timeout' });
    expect(Date.parse(chain[3]!.ts as string)).toBeGreaterThanOrEqual(Date.parse(chain[2]!.expires_at as string));
    const late = await cairn(keys.approver, ['approve', runId, '--json']);
    expect(json(late)).toMatchObject({ ok: false, error: { code: 'E_SEALED' } });
  });

  scenario('a step marked apply: the run is held before it with its sandbox kept, and continues on approval with what the steps before it made', async () => {
    const keys = await mintKeys('apr-step');
    const runId = await submit(keys.submitter, 'apply after approval', {
      steps: [
        { argv: ['sh', '-c', 'echo planned > /work/plan'] },
        { name: 'apply', argv: ['sh', '-c', 'cat /work/plan > /out/applied'], apply: true },
      ],
      outputs: ['/out'],
      checks: [{ id: 'applied', source: 'artifacts["/out/applied"]', op: 'exists', weight: 1 }],
    });
    await waitFor(keys.submitter, runId, awaiting);
    let chain = await receipts(keys.submitter, runId);
    expect(chain.map((r) => r.type)).toEqual(['run.submitted', 'policy.decided', 'run.scheduled', 'sandbox.created', 'step.started', 'step.completed', 'approval.requested']);
    expect(chain[1]).toMatchObject({ step_approvals: [{ approval_id: 'step-1', step_index: 1, timeout_seconds: 120 }] });
    expect(chain[6]).toMatchObject({ actor: 'runtime', approval_id: 'step-1', scope: 'step', step_index: 1 });
    expect(await stack.containers(runId)).toHaveLength(1);

    const approved = await cairn(keys.approver, ['approve', runId, '--json']);
    expect(approved.code, approved.stdout + approved.stderr).toBe(0);
    const run = await waitFor(keys.submitter, runId, sealed);
    expect(run).toMatchObject({ state: 'SEALED', score: 1, maxScore: 1 });
    chain = await receipts(keys.submitter, runId);
    expect(chain.map((r) => r.type).slice(6, 10)).toEqual(['approval.requested', 'approval.granted', 'step.started', 'step.completed']);
    expect(chain[9]).toMatchObject({ step_index: 1, exit_code: 0 });
    await expectSealedCleanVerified(keys.submitter, runId);
  });

  scenario('a step marked apply and rejected: E_NO_APPROVAL, the step never runs, its kept sandbox is destroyed', async () => {
    const keys = await mintKeys('apr-step-no');
    const runId = await submit(keys.submitter, 'apply refused', {
      steps: [{ argv: ['echo', 'build'] }, { argv: ['echo', 'deploy'], apply: true }],
    });
    await waitFor(keys.submitter, runId, awaiting);
    const rejected = await cairn(keys.approver, ['approve', runId, '--reject', '--json']);
    expect(rejected.code, rejected.stdout + rejected.stderr).toBe(0);
    const run = await waitFor(keys.submitter, runId, sealed);
    expect(run).toMatchObject({ state: 'CANCELLED', errorCode: 'E_NO_APPROVAL' });
    const chain = await receipts(keys.submitter, runId);
    expect(chain.map((r) => r.type).slice(6)).toEqual(['approval.requested', 'approval.rejected', 'sandbox.destroyed', 'run.sealed']);
    expect(chain.filter((r) => r.type === 'step.started')).toHaveLength(1);
    expect(chain[8]).toMatchObject({ verified_gone: true, reason: 'cancelled' });
    await expectSealedCleanVerified(keys.submitter, runId);
  });
});

describe('budgets', () => {
  scenario('runs per job: the 7th run of a job is REJECTED E_BUDGET before it starts', async () => {
    const keys = await mintKeys('jobs');
    // Six runs of the job, each held and then cancelled (a cancelled run still counts against its job).
    for (let i = 1; i <= 6; i++) {
      const runId = await submit(keys.submitter, `nightly ${i}`, { image: HELD, job: 'nightly', steps: [{ argv: ['true'] }] });
      await waitFor(keys.submitter, runId, awaiting);
      expect((await cairn(keys.submitter, ['cancel', runId, '--json'])).code).toBe(0);
      await waitFor(keys.submitter, runId, sealed);
    }
    const seventh = await submit(keys.submitter, 'nightly 7', { image: HELD, job: 'nightly', steps: [{ argv: ['true'] }] });
    const run = await waitFor(keys.submitter, seventh, sealed);
    expect(run).toMatchObject({ state: 'REJECTED', errorCode: 'E_BUDGET' });
    const chain = await receipts(keys.submitter, seventh);
    expect(chain.map((r) => r.type)).toEqual(['run.submitted', 'policy.decided', 'run.sealed']);
    expect(chain[1]).toMatchObject({ decision: 'deny', error_code: 'E_BUDGET', reasons: ['job nightly: this would be run 7 of a job allowed 6 runs'] });
    // Another job of the same tenant is not touched.
    const weekly = await submit(keys.submitter, 'weekly', { image: HELD, job: 'weekly', steps: [{ argv: ['true'] }] });
    await waitFor(keys.submitter, weekly, awaiting);
    expect((await cairn(keys.submitter, ['cancel', weekly, '--json'])).code).toBe(0);
  });

  scenario('tenant quota: with two runs in flight allowed, a third is REJECTED E_BUDGET; another tenant is not touched', async () => {
    const keys = await mintKeys('quota');
    const others = await mintKeys('quota-other');
    const runs = await Promise.all([1, 2, 3].map((i) => submit(keys.submitter, `in flight ${i}`, { image: HELD, steps: [{ argv: ['true'] }] })));
    const elsewhere = await submit(others.submitter, 'other tenant', { image: HELD, steps: [{ argv: ['true'] }] });
    const views = await Promise.all(runs.map((runId) => waitFor(keys.submitter, runId, (run) => run.state === 'AWAITING_APPROVAL' || run.sealed)));
    expect(views.map((v) => v.state).sort()).toEqual(['AWAITING_APPROVAL', 'AWAITING_APPROVAL', 'REJECTED']);
    const refused = views.find((v) => v.state === 'REJECTED')!;
    expect(refused.errorCode).toBe('E_BUDGET');
    const decided = (await receipts(keys.submitter, refused.runId)).find((r) => r.type === 'policy.decided');
    expect(decided).toMatchObject({ reasons: ['tenant: this would be run 3 in flight of the 2 allowed at once'] });
    await waitFor(others.submitter, elsewhere, awaiting);
    for (const view of views.filter((v) => v.state === 'AWAITING_APPROVAL')) await cairn(keys.submitter, ['cancel', view.runId, '--json']);
    await cairn(others.submitter, ['cancel', elsewhere, '--json']);
  });

  scenario('output bytes per step: a step writing more ends the run ROLLBACK E_BUDGET, its sandbox destroyed, its receipts kept', async () => {
    const keys = await mintKeys('output');
    const runId = await submit(keys.submitter, 'too chatty', {
      steps: [{ argv: ['sh', '-c', `yes | head -c ${OUTPUT_BUDGET * 4}`] }, { argv: ['echo', 'never'] }],
    });
    const run = await waitFor(keys.submitter, runId, sealed);
    expect(run, await stack.logs(40)).toMatchObject({ state: 'ROLLBACK', errorCode: 'E_BUDGET' });
    const chain = await receipts(keys.submitter, runId);
    expect(chain.map((r) => r.type)).toEqual([
      'run.submitted',
      'policy.decided',
      'run.scheduled',
      'sandbox.created',
      'step.started',
      'step.completed',
      'sandbox.destroyed',
      'run.failed',
      'run.sealed',
    ]);
    expect(chain[1]).toMatchObject({ budget: { output_bytes_per_step: OUTPUT_BUDGET } });
    expect(chain[5]).toMatchObject({ error_code: 'E_BUDGET', limits_hit: ['output_bytes'] });
    // Stopped the moment it passed the budget: some of the rest may have arrived meanwhile, never more than was written.
    expect(chain[5]!.stdout_bytes as number).toBeGreaterThan(OUTPUT_BUDGET);
    expect(chain[5]!.stdout_bytes as number).toBeLessThanOrEqual(OUTPUT_BUDGET * 4);
    expect(chain[6]).toMatchObject({ verified_gone: true });
    expect(chain[7]).toMatchObject({ error_code: 'E_BUDGET', step_index: 0 });
    await expectSealedCleanVerified(keys.submitter, runId);
  });
});
