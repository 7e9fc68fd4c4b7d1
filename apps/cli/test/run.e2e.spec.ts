import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STACK_SERVICES } from '../src/stack/stack-config.js';
import type { CliRun } from './cli.harness.js';
import { isRunning, TestStack } from './stack.harness.js';
import type { RunOutcome } from './stack.harness.js';

/*
 * A run end to end, through the CLI and REST, on the real Docker engine, NATS and PostgreSQL:
 * one isolated stack for the file (`cairn up` with its own state dir and names, `cairn down`
 * and every stream, bucket, database and container removed afterwards). Independent runs are
 * submitted together at the start. A service killed mid-run (`kill -9`, restarted by `cairn up`)
 * is the fault suite's: service-crash.fault.spec.ts, every invariant checked after each.
 */

const QUICKSTART = fileURLToPath(new URL('../../../examples/quickstart.yaml', import.meta.url));
const QUICKSTART_SCRIPT = fileURLToPath(new URL('../../../tools/dist/quickstart.js', import.meta.url));
const SMALL = { wallSeconds: 20, memoryMiB: 32, pids: 32, diskMiB: 8, cpus: 0.5 };

let stack: TestStack;

/** `cairn run <spec> --wait --json`: the exit code and the one object it prints. */
interface WaitedRun {
  cli: CliRun;
  outcome: RunOutcome;
}

async function runAndWait(specPath: string, extra: string[] = []): Promise<WaitedRun> {
  const cli = await stack.cairn(['run', specPath, '--wait', '--json', ...extra]);
  let outcome: RunOutcome;
  try {
    outcome = JSON.parse(cli.stdout) as RunOutcome;
  } catch {
    throw new Error(`cairn run printed no JSON (exit ${cli.code}):\n${cli.stdout}\n${cli.stderr}\n${await stack.logs()}`);
  }
  return { cli, outcome };
}

function spec(name: string, steps: unknown[], more: Record<string, unknown> = {}) {
  return { name, image: 'cairn/sandbox-busybox:1', steps, caps: SMALL, network: 'none', ...more };
}

const batch: Record<string, Promise<WaitedRun>> = {};

beforeAll(async () => {
  stack = await TestStack.create('run-e2e');
  const up = await stack.up();
  expect(up.outcome).toBe('started');

  // Independent runs go in together; each test below awaits its own.
  const specs: Record<string, unknown> = {
    failingCheck: spec('a check that fails', [{ argv: ['echo', 'hello'] }], {
      checks: [
        { id: 'exits-0', source: 'steps[0].exit_code', op: 'eq', value: 0, weight: 1 },
        { id: 'says-goodbye', source: 'steps[0].stdout', op: 'contains', value: 'goodbye', weight: 3 },
      ],
      claim: { statement: 'it says goodbye', checks: [{ id: 'goodbye', source: 'steps[0].stdout', op: 'contains', value: 'goodbye' }] },
    }),
    denied: spec('caps over the frozen maxima', [{ argv: ['echo', 'never'] }], { caps: { ...SMALL, wallSeconds: 601 } }),
    timeout: spec('a step past its time cap', [{ argv: ['sleep', '30'], timeoutSeconds: 1 }, { argv: ['echo', 'never'] }]),
    memory: spec('a memory balloon', [{ argv: ['sh', '-c', 'x=aaaaaaaaaaaaaaaa; while :; do x="$x$x"; done'] }], { caps: { ...SMALL, memoryMiB: 16 } }),
    procs: spec('a fork bomb', [{ argv: ['sh', '-c', 'f(){ f|f& }; f; wait'] }], { caps: { ...SMALL, pids: 16 } }),
    disk: spec('a disk filler', [{ argv: ['dd', 'if=/dev/zero', 'of=/work/fill', 'bs=1048576', 'count=64'] }]),
  };
  batch.passing = runAndWait(QUICKSTART);
  for (const [key, body] of Object.entries(specs)) batch[key] = stack.specFile(key, body).then((path) => runAndWait(path));
  // Nothing waits on a promise before its test: keep a failure from going unhandled meanwhile.
  for (const pending of Object.values(batch)) pending.catch(() => undefined);
});

afterAll(async () => {
  await stack?.dispose();
});

describe('cairn run --wait, through the whole stack', () => {
  it('a passing run: SEALED, verdict SUPPORTS, full score, exit 0', async () => {
    const { cli, outcome } = await batch.passing!;
    expect(cli.code, cli.stdout + cli.stderr).toBe(0);
    expect(Object.keys(outcome).sort()).toEqual(['errorCode', 'maxScore', 'runId', 'score', 'state', 'verdict']);
    expect(outcome).toMatchObject({ state: 'SEALED', verdict: 'SUPPORTS', errorCode: null, maxScore: 8, score: 8 });
    // Progress on stderr: each step's argv and exit code, the seal, the chain checked.
    expect(cli.stderr).toContain("step 3      $ sh /work/test.sh");
    expect(cli.stderr).toContain('step 3      → exit 0');
    expect(cli.stderr).toMatch(/chain {7}\d+ receipts verified, head [0-9a-f]{64}/);
    expect(await stack.types(outcome.runId)).toEqual([
      'run.submitted',
      'policy.decided',
      'run.scheduled',
      'sandbox.created',
      ...Array.from({ length: 4 }, () => ['step.started', 'step.completed']).flat(),
      'sandbox.destroyed',
      'run.executed',
      'kernel.facts',
      'verification.completed',
      'grade.recorded',
      'run.sealed',
    ]);
    await stack.expectCleanAndVerifiable(outcome.runId);
  });

  it('a failing check: SEALED all the same, a lower score, verdict REJECTED, exit 0', async () => {
    const { cli, outcome } = await batch.failingCheck!;
    expect(cli.code, cli.stdout + cli.stderr).toBe(0);
    expect(outcome).toMatchObject({ state: 'SEALED', verdict: 'REJECTED', errorCode: null, score: 1, maxScore: 4 });
    await stack.expectCleanAndVerifiable(outcome.runId);
  });

  it('E_POLICY_DENIED: caps over the frozen maxima are refused, never clamped (REJECTED, exit 1)', async () => {
    const { cli, outcome } = await batch.denied!;
    expect(cli.code, cli.stdout + cli.stderr).toBe(1);
    expect(outcome).toMatchObject({ state: 'REJECTED', errorCode: 'E_POLICY_DENIED', verdict: null, score: null });
    expect(await stack.types(outcome.runId)).toEqual(['run.submitted', 'policy.decided', 'run.sealed']);
    await stack.expectCleanAndVerifiable(outcome.runId);
  });

  it.each([
    ['timeout', 'E_TIMEOUT'],
    ['memory', 'E_MEM_LIMIT'],
    ['procs', 'E_PROC_LIMIT'],
    ['disk', 'E_DISK_LIMIT'],
  ])('%s: a cap hit for real ends the run ROLLBACK with %s, its sandbox gone (exit 1)', async (key, code) => {
    const { cli, outcome } = await batch[key]!;
    expect(cli.code, cli.stderr).toBe(1);
    expect(outcome).toMatchObject({ state: 'ROLLBACK', errorCode: code });
    expect(cli.stderr).toContain(`sealed      ROLLBACK ${code}`);
    const types = await stack.types(outcome.runId);
    expect(types).toContain('sandbox.destroyed');
    expect(types).not.toContain('run.executed');
    expect(types.at(-1)).toBe('run.sealed');
    await stack.expectCleanAndVerifiable(outcome.runId);
  });
});

describe('submitting', () => {
  it('E_INPUT: a bad spec is refused before anything is created (exit 2), by the CLI and by the gateway', async () => {
    const name = `bad spec ${Date.now()}`;
    const path = await stack.specFile('bad', { name, steps: [{ argv: 'rm -rf /' }] });
    const cli = await stack.cairn(['run', path, '--json']);
    expect(cli.code).toBe(2);
    expect(JSON.parse(cli.stdout)).toMatchObject({ ok: false, error: { code: 'E_INPUT', message: expect.stringContaining('steps[0].argv') as string } });

    const response = await stack.api('/v1/runs', {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': `bad-${Date.now()}` },
      body: JSON.stringify({ name, steps: [{ argv: 'rm -rf /' }] }),
    });
    expect(response.status).toBe(400);
    expect(await response.json()).toMatchObject({ code: 'E_INPUT', message: expect.stringContaining('steps[0].argv') as string });

    const listed = await stack.cairn(['status', '--json', '--limit', '200']);
    expect(listed.code).toBe(0);
    const names = (JSON.parse(listed.stdout) as { items: { name: string | null }[] }).items.map((run) => run.name);
    expect(names).not.toContain(name);
  });

  it('an idempotent resubmission: the same key gives the same run; the same key with another spec is E_IDEMPOTENCY_MISMATCH', async () => {
    const key = `e2e-${Date.now()}`;
    const path = await stack.specFile('idem', spec('idempotent', [{ argv: ['echo', 'once'] }]));
    const first = await stack.cairn(['run', path, '--idempotency-key', key, '--json']);
    const second = await stack.cairn(['run', path, '--idempotency-key', key, '--json']);
    expect(first.code, first.stdout + first.stderr).toBe(0);
    expect(second.code, second.stdout + second.stderr).toBe(0);
    const a = JSON.parse(first.stdout) as RunOutcome;
    const b = JSON.parse(second.stdout) as RunOutcome;
    expect(b.runId).toBe(a.runId);
    expect(second.stderr).toContain('the same idempotency key submitted this run before');

    const other = await stack.specFile('idem-other', spec('idempotent, changed', [{ argv: ['echo', 'twice'] }]));
    const mismatch = await stack.cairn(['run', other, '--idempotency-key', key, '--json']);
    expect(mismatch.code).toBe(1);
    expect(JSON.parse(mismatch.stdout)).toMatchObject({ ok: false, error: { code: 'E_IDEMPOTENCY_MISMATCH' } });

    const sealed = await stack.waitForRun(a.runId, (run) => run.sealed);
    expect(sealed.state).toBe('SEALED');
    expect(await stack.types(a.runId)).toEqual(expect.arrayContaining(['run.submitted']));
    expect((await stack.types(a.runId)).filter((t) => t === 'run.submitted')).toHaveLength(1);
    await stack.expectCleanAndVerifiable(a.runId);
  });

  it('a cancelled run: its sandbox is stopped and destroyed, it ends CANCELLED', async () => {
    const path = await stack.specFile('cancel', spec('to be cancelled', [{ argv: ['sleep', '30'] }, { argv: ['echo', 'never'] }]));
    const waiting = runAndWait(path);
    // Find the run by its step having started, then cancel it mid-step.
    let runId = '';
    const deadline = Date.now() + 30_000;
    while (runId === '' && Date.now() < deadline) {
      const page = JSON.parse((await stack.cairn(['status', '--json', '--limit', '50'])).stdout) as { items: { runId: string; name: string; state: string }[] };
      const mine = page.items.find((run) => run.name === 'to be cancelled' && run.state === 'RUNNING');
      if (mine !== undefined && (await stack.types(mine.runId)).includes('step.started')) runId = mine.runId;
      else await new Promise((resolve) => setTimeout(resolve, 200));
    }
    expect(runId).not.toBe('');
    const cancel = await stack.cairn(['cancel', runId, '--json']);
    expect(cancel.code, cancel.stdout).toBe(0);
    expect(JSON.parse(cancel.stdout)).toMatchObject({ ok: true, runId });

    const { cli, outcome } = await waiting;
    expect(cli.code, cli.stdout + cli.stderr).toBe(1);
    expect(outcome).toMatchObject({ runId, state: 'CANCELLED' });
    const types = await stack.types(runId);
    expect(types).toContain('run.cancelled');
    expect(types).toContain('sandbox.destroyed');
    expect(types).not.toContain('run.executed');
    await stack.expectCleanAndVerifiable(runId);
  });

  it('409 after the seal: cancelling a sealed run is E_SEALED (CLI exit 1, REST 409)', async () => {
    const { outcome } = await batch.passing!;
    const cli = await stack.cairn(['cancel', outcome.runId, '--json']);
    expect(cli.code, cli.stdout + cli.stderr).toBe(1);
    expect(JSON.parse(cli.stdout)).toMatchObject({ ok: false, error: { code: 'E_SEALED' } });
    const response = await stack.api(`/v1/runs/${outcome.runId}/cancel`, { method: 'POST' });
    expect(response.status).toBe(409);
    expect(await response.json()).toMatchObject({ code: 'E_SEALED' });
  });
});

describe('reading runs back', () => {
  it('cairn status, events and verify <run id> agree with each other', async () => {
    const { outcome } = await batch.passing!;
    const one = await stack.cairn(['status', outcome.runId, '--json']);
    expect(one.code).toBe(0);
    const run = JSON.parse(one.stdout) as { state: string; verdict: string; score: number; eventCount: number; headHash: string; sealed: boolean };
    expect(run).toMatchObject({ state: 'SEALED', verdict: 'SUPPORTS', score: 8, sealed: true });

    const human = await stack.cairn(['status']);
    expect(human.code).toBe(0);
    expect(human.stdout.split('\n')[0]).toMatch(/^RUN +STATE +ERROR +VERDICT +SCORE +UPDATED +NAME$/);
    expect(human.stdout).toMatch(new RegExp(`${outcome.runId} +SEALED +- +SUPPORTS +8/8`));

    const events = await stack.cairn(['events', outcome.runId, '--json']);
    expect(events.code).toBe(0);
    const lines = events.stdout.trimEnd().split('\n');
    expect(lines).toHaveLength(run.eventCount);
    const file = join(stack.home, 'events.jsonl');
    await writeFile(file, events.stdout);
    const verified = await stack.cairn(['verify', file, '--json']);
    expect(JSON.parse(verified.stdout)).toMatchObject({ ok: true, chainId: outcome.runId, count: run.eventCount, headHash: run.headHash });

    const bundleFile = join(stack.home, 'bundle.json');
    const fromStack = await stack.cairn(['verify', outcome.runId, '-o', bundleFile]);
    expect(fromStack.code).toBe(0);
    expect(fromStack.stdout).toContain(`head ${run.headHash}  (proof bundle from ${stack.url})`);
    expect(fromStack.stdout).toContain('verdict SUPPORTS  grade 8/8');
    // The saved bundle verifies offline, with no stack at all.
    const offline = await stack.cairn(['verify', bundleFile], { CAIRN_HOME: join(stack.home, 'nowhere') });
    expect(offline.code).toBe(0);
    expect(JSON.parse(await readFile(bundleFile, 'utf8'))).toMatchObject({ format: 'cairn.bundle/v1', runId: outcome.runId, verdict: 'SUPPORTS' });

    const unknown = await stack.cairn(['status', 'run_doesnotexist', '--json']);
    expect(unknown.code).toBe(1);
    expect(JSON.parse(unknown.stdout)).toMatchObject({ error: { code: 'E_NOT_FOUND' } });
  });

  it('the quick start (tools/dist/quickstart.js): the sample mission SEALED, verified, and an edited copy refused', async () => {
    const child = spawn(process.execPath, [QUICKSTART_SCRIPT], { cwd: stack.home, env: { PATH: process.env.PATH ?? '', NO_COLOR: '1', ...stack.env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const [code] = (await once(child, 'close')) as [number | null];
    expect(code, stdout + stderr).toBe(0);
    // It found the stack already up (`cairn up` is idempotent) and followed the run on stderr.
    expect(stdout).toContain(`stack      ${stack.url}  (already running;`);
    expect(stderr).toContain('step 3      → exit 0');
    const runId = /run {8}(run_[a-z0-9]+) /.exec(stdout)?.[1];
    expect(runId).toBeDefined();
    expect(stdout).toContain('state      SEALED');
    expect(stdout).toContain('verdict    SUPPORTS');
    expect(stdout).toContain('grade      8/8');
    expect(stdout).toMatch(new RegExp(`verified   OK {2}\\d+ receipts {2}chain ${runId!} {2}head [0-9a-f]{64} {2}\\(proof bundle from ${stack.url}\\)`));
    expect(stdout).toMatch(/→ E_CHAIN_BROKEN at seq \d+ \(hash_mismatch\), exit 1/);
    const bundle = join(stack.home, '.cairn', 'quickstart', `${runId!}.bundle.json`);
    expect(stdout).toContain(`npx --no-install cairn verify .cairn/quickstart/${runId!}.bundle.json`);
    const offline = await stack.cairn(['verify', bundle], { CAIRN_HOME: join(stack.home, 'nowhere') });
    expect(offline.code).toBe(0);
    await stack.expectCleanAndVerifiable(runId!);
  });

  it('cairn up on a running stack changes nothing and prints the same URL', async () => {
    const again = await stack.up();
    expect(again).toMatchObject({ outcome: 'running', url: stack.url, restarted: [] });
  });
});

describe('cairn down', () => {
  it('stops every process of the stack and removes stack.json; then nothing answers', async () => {
    const pids = Object.values((await stack.stackFile()).services).map((s) => s.pid);
    expect(pids).toHaveLength(STACK_SERVICES.length);
    const down = await stack.cairn(['down', '--json']);
    expect(down.code).toBe(0);
    expect((JSON.parse(down.stdout) as { stopped: unknown[] }).stopped).toHaveLength(STACK_SERVICES.length);
    // Gone, not merely signalled (a dead child stays in the process table until its parent reaps it).
    for (const pid of pids) await expect.poll(() => isRunning(pid), { timeout: 5_000 }).toBe(false);
    await expect(readFile(join(stack.home, 'stack.json'))).rejects.toMatchObject({ code: 'ENOENT' });
    const status = await stack.cairn(['status']);
    expect(status.code).toBe(1);
    expect(status.stderr).toContain('cairn up');
    expect(await stack.containers(undefined, { includeIdlePool: true })).toEqual([]);
  });
});
