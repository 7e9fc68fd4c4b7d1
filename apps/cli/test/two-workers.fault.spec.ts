import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readFile, rm } from 'node:fs/promises';
import { connect as tcpConnect } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ChildProcess } from 'node:child_process';
import { queueBucketFor } from '@cairn/config';
import type { Worker } from '@cairn/contracts';
import { checkStack, formatReport, scenarioClock } from '@cairn/fault-testing';
import { createNetworkNamespace, startNatsServers, testDatabaseUrl } from '@cairn/testing';
import type { NatsServers, NetworkNamespace } from '@cairn/testing';
import { connect } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestStack } from './stack.harness.js';

/*
 * Issue 19, item 4: two runtime workers of one stack. Worker A is the stack's own (`cairn up`, on
 * the host); worker B runs inside a network namespace the test makes, joined to the host by a veth
 * pair: the stack's NATS is a server of the test's own that listens only on the host end of that
 * pair, so B reaches it over the veth and nothing else (its loopback is its own). B shares the host's
 * Docker engine through its unix socket and reconciles only containers labelled with its own id.
 * Runs spread over both; B is killed -9 mid-run (RunSpec has no `retries`: its run ends
 * E_WORKER_LOST, sealed) while A goes on sealing runs; B restarts and reaps what it left; then B
 * is drained (`cairn workers drain`): new runs all go to A, B's running run finishes, and the drain
 * outlives B's restart. Every invariant (L, D, C, T, R, P) is checked over the whole log.
 * Then the same kill with a RunSpec of `retries: 1` (ADR 0035): the run is given back
 * (`run.retried`), placed again on A as attempt 2 and sealed; B, restarted, reaps its attempt's
 * sandbox and writes nothing on the chain; the invariants hold again.
 */

const RUNTIME_MAIN = fileURLToPath(new URL('../../runtime/dist/main.js', import.meta.url));
const CAPS = { memoryMiB: 64, diskMiB: 32, cpus: 0.5 };

let ns: NetworkNamespace;
let nats: NatsServers;
let stack: TestStack;
let workerA = '';
let workerB = '';
let workerBEnv: Record<string, string> = {};
const submitted: string[] = [];
const clock = scenarioClock();

interface Started {
  child: ChildProcess;
  output(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}
const started: Started[] = [];

/** Worker B, from dist/, inside the namespace. */
function startWorkerB(): Started {
  const child = ns.spawn([process.execPath, RUNTIME_MAIN], workerBEnv);
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  const process_ = { child, output: () => output, exited };
  started.push(process_);
  return process_;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function poll<T>(what: string, probe: () => Promise<T | null | undefined>, ms = 45_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const value = await probe();
    if (value !== null && value !== undefined) return value;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}\n${await stack.logs(8)}\n--- worker B\n${started.at(-1)?.output().split('\n').slice(-8).join('\n') ?? ''}`);
    await sleep(150);
  }
}

/** `cairn workers --json`, as an operator reads it. */
async function workers(): Promise<Worker[]> {
  const listed = await stack.cairn(['workers', '--json']);
  expect(listed.code, listed.stderr).toBe(0);
  return (JSON.parse(listed.stdout) as { items: Worker[] }).items;
}

async function workerWith(id: string, check: (w: Worker) => boolean): Promise<Worker> {
  return poll(`worker ${id} as expected`, async () => (await workers()).find((w) => w.workerId === id && check(w)));
}

async function submit(name: string, argv: string[], extra: Record<string, unknown> = {}): Promise<string> {
  const response = await stack.api('/v1/runs', {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': randomUUID() },
    body: JSON.stringify({ name, steps: [{ argv }], caps: CAPS, ...extra }),
  });
  expect(response.status, await response.clone().text()).toBe(202);
  const { runId } = (await response.json()) as { runId: string };
  submitted.push(runId);
  return runId;
}

/** The worker a run was scheduled on (its `run.scheduled` receipt). */
async function placedOn(runId: string): Promise<string> {
  return poll(`run.scheduled on ${runId}`, async () => {
    const response = await stack.api(`/v1/runs/${runId}/events?after=0&limit=100`);
    if (response.status !== 200) return null;
    const items = ((await response.json()) as { items: { type: string; worker_id?: string; fields?: { worker_id?: string } }[] }).items;
    const scheduled = items.find((r) => r.type === 'run.scheduled');
    return scheduled === undefined ? null : (scheduled.worker_id ?? scheduled.fields?.worker_id ?? null);
  });
}

/** Each placement of a run (`run.scheduled`), in order: the worker and the attempt. */
async function placementsOf(runId: string): Promise<{ worker: string; attempt: number }[]> {
  const response = await stack.api(`/v1/runs/${runId}/events?after=0&limit=1000`);
  expect(response.status).toBe(200);
  type Scheduled = { type: string; worker_id?: string; attempt?: number; fields?: { worker_id?: string; attempt?: number } };
  return ((await response.json()) as { items: Scheduled[] }).items
    .filter((r) => r.type === 'run.scheduled')
    .map((r) => ({ worker: r.worker_id ?? r.fields?.worker_id ?? '', attempt: r.attempt ?? r.fields?.attempt ?? 0 }));
}

/** The fault checker over the whole log: every invariant holds, and every run acknowledged is on it. */
async function expectInvariantsHold(): Promise<void> {
  const nc = await connect({ servers: nats.urls });
  try {
    const report = await checkStack(
      {
        nc,
        natsUrl: nats.urls,
        evidenceStream: stack.names.evidenceStream,
        subjectPrefix: `cairn.${stack.stackId}.evidence`,
        workerIds: [workerA, workerB],
        leasesBucket: stack.names.leasesBucket,
        queueBucket: queueBucketFor(stack.names.leasesBucket),
        databaseUrl: stack.database.url,
        databaseServerUrl: testDatabaseUrl(),
      },
      { acknowledged: submitted },
      clock,
    );
    console.log(formatReport(report));
    expect(report.ok, formatReport(report)).toBe(true);
    expect(Object.keys(report.chains).filter((id) => id.startsWith('run_')).sort()).toEqual([...submitted].sort());
  } finally {
    await nc.close();
  }
}

async function typesOf(runId: string): Promise<string[]> {
  return stack.types(runId);
}

async function containersOf(workerId: string): Promise<string[]> {
  const { createDockerClient } = await import('@cairn/sandbox-docker');
  const list = await createDockerClient().listContainers({ all: true, filters: { label: [`io.cairn.worker=${workerId}`] } });
  return list.map((c) => c.Names.join(','));
}

/** Whether anything on the host accepts a TCP connection at host:port. */
function hostReaches(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = tcpConnect({ host, port, timeout: 3000 });
    socket.once('connect', () => (socket.destroy(), resolve(true)));
    socket.once('error', () => resolve(false));
    socket.once('timeout', () => (socket.destroy(), resolve(false)));
  });
}

beforeAll(async () => {
  if (!existsSync(RUNTIME_MAIN)) throw new Error(`${RUNTIME_MAIN} is missing: run npm run build first`);
  ns = await createNetworkNamespace();
  nats = await startNatsServers({ nodes: 1, sync: 'default', label: 'two-workers', clientHost: ns.hostAddress });
  stack = await TestStack.create('two-workers', {
    CAIRN_NATS_URL: nats.urls,
    CAIRN_HEARTBEAT_MS: '500',
    CAIRN_WORKER_STALE_AFTER_MS: '3000',
    // Generous for a loaded 2-core machine: a lapse fails a run by design, and only B's run may lapse here.
    CAIRN_LEASE_TTL_MS: '8000',
    CAIRN_LEASE_RENEW_MS: '1000',
    CAIRN_LEASE_SCAN_INTERVAL_MS: '500',
    CAIRN_WARM_POOL_SIZE: '0',
    CAIRN_WORKER_SLOTS: '4',
  });
  await stack.up();
  workerA = stack.names.workerId;
  workerB = `netns-${stack.stackId}`.slice(0, 64);
  // B is started as the stack starts its runtime, but for its id, state directory and secrets (none: it needs no database).
  const { config } = JSON.parse(await readFile(join(stack.home, 'stack.json'), 'utf8')) as { config: Record<string, string> };
  const { CAIRN_SECRETS_KEY_FILE: _secrets, ...shared } = config;
  workerBEnv = { ...shared, CAIRN_WORKER_ID: workerB, CAIRN_WORKER_STATE_DIR: join(stack.home, 'worker-b') };
}, 180_000);

afterAll(async () => {
  for (const p of started) if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
  await Promise.all(started.map((p) => p.exited));
  if (workerB !== '') {
    const { createDockerClient, defaultAgentSocketRoot } = await import('@cairn/sandbox-docker');
    const docker = createDockerClient();
    for (const c of await docker.listContainers({ all: true, filters: { label: [`io.cairn.worker=${workerB}`] } })) await docker.getContainer(c.Id).remove({ force: true }).catch(() => undefined);
    await rm(join(defaultAgentSocketRoot(), workerB), { recursive: true, force: true });
  }
  if (stack !== undefined) {
    await stack.dispose();
  }
  await nats?.stop();
  await ns?.dispose();
}, 120_000);

describe('fault: two workers, one in a network namespace reaching NATS only over a veth pair', () => {
  it('spreads runs over both; kill -9 of one mid-run fails its run E_WORKER_LOST while the other seals; a drain sends new work to the other, lets the running run finish, and outlives a restart; every invariant holds', async () => {
    const natsPort = Number(new URL(nats.urls).port);
    // The namespace reaches the test's server over the veth, and nothing on loopback: neither it nor the machine's.
    expect(await ns.reaches(ns.hostAddress, natsPort)).toBe(true);
    expect(await ns.reaches('127.0.0.1', natsPort)).toBe(false);
    expect(await ns.reaches('127.0.0.1', 4222)).toBe(false);
    expect(await hostReaches('127.0.0.1', natsPort)).toBe(false);

    let b = startWorkerB();
    const both = await poll('both workers eligible', async () => {
      const listed = await workers();
      return [workerA, workerB].every((id) => listed.find((w) => w.workerId === id)?.status === 'eligible') ? listed : null;
    });
    expect(both.map((w) => w.workerId).sort()).toEqual([workerA, workerB].sort());

    // Two long runs at once: the second goes to the worker the first left freer, so one lands on each.
    const first = await Promise.all([submit('long one', ['sh', '-c', 'echo started; sleep 5; echo done']), submit('long two', ['sh', '-c', 'echo started; sleep 5; echo done'])]);
    const places = await Promise.all(first.map(placedOn));
    expect([...places].sort()).toEqual([workerA, workerB].sort());
    const onB = first[places.indexOf(workerB)]!;
    const onA = first[places.indexOf(workerA)]!;
    await poll(`step.started on ${onB}`, async () => ((await typesOf(onB)).includes('step.started') ? true : null));
    expect(await containersOf(workerB)).toHaveLength(1);

    // B dies mid-run.
    b.child.kill('SIGKILL');
    expect((await b.exited).signal).toBe('SIGKILL');
    const sealedA = await stack.waitForRun(onA, (r) => r.sealed, 60_000);
    expect(sealedA).toMatchObject({ state: 'SEALED', errorCode: null });
    // Failed once its lease lapses; its seal waits for the teardown's record (the grader's grace), checked at the end.
    const lost = await stack.waitForRun(onB, (r) => r.state === 'FAILED', 60_000);
    expect(lost).toMatchObject({ state: 'FAILED', errorCode: 'E_WORKER_LOST' });
    expect((await typesOf(onB)).filter((t) => t === 'step.completed')).toEqual([]);
    await workerWith(workerB, (w) => w.status === 'stale');
    // The other worker keeps sealing runs.
    const afterKill = await submit('after the kill', ['echo', 'still here']);
    expect(await placedOn(afterKill)).toBe(workerA);
    expect(await stack.waitForRun(afterKill, (r) => r.sealed, 60_000)).toMatchObject({ state: 'SEALED' });

    // B back on its state directory: the same id, and its reconcile reaps the sandbox it left (and nothing of A's).
    b = startWorkerB();
    await workerWith(workerB, (w) => w.status === 'eligible');
    await poll('B to reap what it left', async () => ((await containersOf(workerB)).length === 0 ? true : null));

    // Drain: one long run on each, then B is drained.
    const second = await Promise.all([submit('drained one', ['sh', '-c', 'sleep 4; echo finished']), submit('drained two', ['sh', '-c', 'sleep 4; echo finished'])]);
    const secondPlaces = await Promise.all(second.map(placedOn));
    expect([...secondPlaces].sort()).toEqual([workerA, workerB].sort());
    const runningOnB = second[secondPlaces.indexOf(workerB)]!;
    await poll(`step.started on ${runningOnB}`, async () => ((await typesOf(runningOnB)).includes('step.started') ? true : null));
    // Fail closed: a bad id is a usage error, an unknown worker E_NOT_FOUND; nothing is drained.
    const bad = await stack.cairn(['workers', 'drain', 'Not An Id', '--json']);
    expect(bad.code).toBe(2);
    const ghost = await stack.cairn(['workers', 'drain', 'w-ghost', '--json']);
    expect(ghost.code).toBe(1);
    expect(JSON.parse(ghost.stdout)).toMatchObject({ ok: false, error: { code: 'E_NOT_FOUND' } });
    const drained = await stack.cairn(['workers', 'drain', workerB, '--json']);
    expect(drained.code, drained.stdout + drained.stderr).toBe(0);
    expect((JSON.parse(drained.stdout) as { worker: Worker }).worker).toMatchObject({ workerId: workerB, status: 'draining', draining: true, runs: 1 });
    const table = await stack.cairn(['workers']);
    expect(table.stdout.split('\n').find((line) => line.startsWith(workerB))).toMatch(/^\S+\s+draining\s+1\/4\s/);
    // New runs all land on A, though B is the roomier.
    const meanwhile = await Promise.all([submit('while drained 1', ['echo', 'a']), submit('while drained 2', ['echo', 'b']), submit('while drained 3', ['echo', 'c'])]);
    expect(await Promise.all(meanwhile.map(placedOn))).toEqual([workerA, workerA, workerA]);
    // B's running run finishes normally.
    const finished = await stack.waitForRun(runningOnB, (r) => r.sealed, 60_000);
    expect(finished).toMatchObject({ state: 'SEALED', errorCode: null });
    for (const runId of [...second, ...meanwhile]) expect(await stack.waitForRun(runId, (r) => r.sealed, 60_000)).toMatchObject({ state: 'SEALED' });

    // B stopped and started again: its own record says nothing of the drain; the operator's drain holds.
    b.child.kill('SIGTERM');
    expect(await b.exited).toEqual({ code: 0, signal: null });
    b = startWorkerB();
    const back = await poll('B registered again', async () => (await workers()).find((w) => w.workerId === workerB && w.healthy));
    expect(back).toMatchObject({ status: 'draining', drain: { by: expect.stringMatching(/^key:/) as unknown } });
    const last = await submit('after the restart', ['echo', 'a']);
    expect(await placedOn(last)).toBe(workerA);
    expect(await stack.waitForRun(last, (r) => r.sealed, 60_000)).toMatchObject({ state: 'SEALED' });
    const undrained = await stack.cairn(['workers', 'undrain', workerB, '--json']);
    expect(undrained.code, undrained.stdout + undrained.stderr).toBe(0);
    expect((JSON.parse(undrained.stdout) as { worker: Worker }).worker).toMatchObject({ status: 'eligible', drain: null });
    b.child.kill('SIGTERM');
    expect(await b.exited).toEqual({ code: 0, signal: null });
    // The lost run, sealed as it ended: its chain exports and verifies.
    expect(await stack.waitForRun(onB, (r) => r.sealed, 60_000)).toMatchObject({ state: 'FAILED', errorCode: 'E_WORKER_LOST', sealed: true });
    await stack.expectCleanAndVerifiable(onB);

    await expectInvariantsHold();
  });

  it('with retries: 1, kill -9 of the worker mid-run gives the run back and places it again on the other, which seals it; one run.retried; the lost worker writes nothing after; every invariant holds', async () => {
    // On its own feet whatever the case before left: one B running, registered, and not drained.
    for (const p of started) if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGTERM');
    await Promise.all(started.map((p) => p.exited));
    let b = startWorkerB();
    await poll('B registered', async () => (await workers()).find((w) => w.workerId === workerB && w.healthy));
    const undrained = await stack.cairn(['workers', 'undrain', workerB, '--json']);
    expect(undrained.code, undrained.stdout + undrained.stderr).toBe(0);
    let listed: Worker[] = [];
    await poll('both workers eligible', async () => {
      listed = await workers();
      return [workerA, workerB].every((id) => listed.find((w) => w.workerId === id)?.status === 'eligible') ? listed : null;
    }).catch((error: unknown) => {
      throw new Error(`${String(error)}\n--- workers\n${JSON.stringify(listed.map((w) => ({ id: w.workerId, status: w.status, runs: w.runs })))}`);
    });
    // One short run on each, both opted into one retry: the one on B is lost.
    const argv = ['sh', '-c', 'echo started; sleep 2; echo done'];
    // A claim on what the step printed: sealed SUPPORTS only when the attempt that ran it to the end printed it.
    const opted = { retries: 1, claim: { statement: 'the step ran to its end', checks: [{ id: 'done', source: 'steps[0].stdout', op: 'contains', value: 'done' }] } };
    const runs = await Promise.all([submit('retried one', argv, opted), submit('retried two', argv, opted)]);
    const places = await Promise.all(runs.map(placedOn));
    expect([...places].sort()).toEqual([workerA, workerB].sort());
    const onB = runs[places.indexOf(workerB)]!;
    const onA = runs[places.indexOf(workerA)]!;
    await poll(`step.started on ${onB}`, async () => ((await typesOf(onB)).includes('step.started') ? true : null));

    b.child.kill('SIGKILL');
    expect((await b.exited).signal).toBe('SIGKILL');
    expect(await stack.waitForRun(onA, (r) => r.sealed, 60_000)).toMatchObject({ state: 'SEALED', verdict: 'SUPPORTS', errorCode: null });
    // Its lease lapses: run.retried, not run.failed; attempt 2 goes to A (B is stale by then) and seals.
    const sealed = await stack.waitForRun(onB, (r) => r.sealed, 90_000);
    expect(sealed).toMatchObject({ state: 'SEALED', verdict: 'SUPPORTS', errorCode: null });
    expect(await placementsOf(onB)).toEqual([
      { worker: workerB, attempt: 1 },
      { worker: workerA, attempt: 2 },
    ]);
    const types = await typesOf(onB);
    expect(types.filter((t) => t === 'run.retried')).toHaveLength(1);
    expect(types).not.toContain('run.failed');
    // Attempt 1's step never completed; attempt 2's did, once.
    expect(types.filter((t) => t === 'step.completed')).toHaveLength(1);

    // B back: its reconcile reaps the sandbox of its lost attempt and writes nothing on the chain (the fence).
    b = startWorkerB();
    await workerWith(workerB, (w) => w.status === 'eligible');
    await poll('B to reap what it left', async () => ((await containersOf(workerB)).length === 0 ? true : null));
    expect(await typesOf(onB)).toEqual(types);
    b.child.kill('SIGTERM');
    expect(await b.exited).toEqual({ code: 0, signal: null });
    await stack.expectCleanAndVerifiable(onB);
    await expectInvariantsHold();
  });
});
