import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isolatedNames, queueBucketFor } from '@cairn/config';
import type { Worker } from '@cairn/contracts';
import { checkStack, formatReport, scenarioClock } from '@cairn/fault-testing';
import { WorkerRegistry } from '@cairn/operational';
import { testDatabaseUrl, testNatsUrl } from '@cairn/testing';
import { connect } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FaultScenario, sleep } from './fault-stack.harness.js';
import { TestStack } from './stack.harness.js';

/*
 * Lease and heartbeat times from one clock (ADR 0033; issue 18, "clocks skewed between services").
 * Beside the stack's own runtime (drained: it takes no work here), two more runtimes from dist/,
 * each under Debian's libfaketime — one a minute behind the machine's clock, one a minute ahead —
 * so every lease renewal and heartbeat they write carries a wall time 60 s off the scheduler's.
 * The scheduler judges them on its own monotonic clock (when it last saw a new revision), so both
 * stay eligible and the runs on both seal; one killed -9 mid-run has its run failed E_WORKER_LOST
 * within its TTL and a scan or two — not the minute its clock is ahead.
 */

const RUNTIME_MAIN = fileURLToPath(new URL('../../runtime/dist/main.js', import.meta.url));
const TTL_MS = 4000;
const STEPS = (seconds: number) => [{ argv: ['sleep', String(seconds)] }, { argv: ['echo', 'done'] }];

let stack: TestStack;
let scenario: FaultScenario;
let nc: Awaited<ReturnType<typeof connect>>;
let shared: Record<string, string> = {};
const clock = scenarioClock();
const runtimes = new Map<string, { child: ChildProcess; output: () => string; exited: Promise<unknown> }>();
const workerIds: string[] = [];

/**
 * Debian's libfaketime (package `faketime`, installed by tools/ensure-services.sh), preloaded into the node process
 * itself as `faketime -f <offset>` would: the `faketime` wrapper forks, and a kill -9 of it would leave node running.
 */
const LIBFAKETIME = ['/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1', '/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1', '/usr/lib/faketime/libfaketime.so.1'].find((path) => existsSync(path));

/** A runtime of the stack on a clock `offset` off the machine's (`-60s`, `+60s`), with a worker id and state directory of its own. */
function startSkewed(name: string, offset: string): string {
  const workerId = `${name}-${stack.stackId}`.slice(0, 64);
  const child = spawn(process.execPath, [RUNTIME_MAIN], {
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...shared, CAIRN_WORKER_ID: workerId, CAIRN_WORKER_STATE_DIR: join(stack.home, `worker-${name}`), LD_PRELOAD: LIBFAKETIME!, FAKETIME: offset },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise((resolve) => child.once('exit', resolve));
  runtimes.set(workerId, { child, output: () => output, exited });
  if (!workerIds.includes(workerId)) workerIds.push(workerId);
  return workerId;
}

async function workers(): Promise<Worker[]> {
  const listed = await stack.cairn(['workers', '--json']);
  expect(listed.code, listed.stderr).toBe(0);
  return (JSON.parse(listed.stdout) as { items: Worker[] }).items;
}

async function placedOn(runId: string): Promise<string> {
  for (let tries = 0; tries < 300; tries++) {
    const items = ((await (await stack.api(`/v1/runs/${runId}/events?after=0&limit=100`)).json()) as { items: { type: string; worker_id?: string }[] }).items;
    const scheduled = items.find((r) => r.type === 'run.scheduled');
    if (scheduled?.worker_id !== undefined) return scheduled.worker_id;
    await sleep(100);
  }
  throw new Error(`${runId} was never scheduled\n${await stack.logs(10)}`);
}

async function containersOf(ids: readonly string[]): Promise<string[]> {
  const { createDockerClient } = await import('@cairn/sandbox-docker');
  const docker = createDockerClient();
  const names: string[] = [];
  for (const id of ids) for (const c of await docker.listContainers({ all: true, filters: { label: [`io.cairn.worker=${id}`] } })) names.push(c.Names.join(','));
  return names;
}

function outputs(): string {
  return [...runtimes].map(([id, r]) => `--- ${id}\n${r.output().split('\n').slice(-10).join('\n')}`).join('\n');
}

beforeAll(async () => {
  if (!existsSync(RUNTIME_MAIN)) throw new Error(`${RUNTIME_MAIN} is missing: run npm run build first`);
  if (LIBFAKETIME === undefined) throw new Error('libfaketime is missing: apt-get install faketime (tools/ensure-services.sh does)');
  stack = await TestStack.create('clock-skew', {
    CAIRN_HEARTBEAT_MS: '500',
    CAIRN_WORKER_STALE_AFTER_MS: '3000',
    CAIRN_LEASE_TTL_MS: String(TTL_MS),
    CAIRN_LEASE_RENEW_MS: '1000',
    CAIRN_LEASE_SCAN_INTERVAL_MS: '500',
    CAIRN_WARM_POOL_SIZE: '0',
    CAIRN_GRADER_TEARDOWN_GRACE_MS: '20000',
  });
  await stack.up();
  const { config } = JSON.parse(await readFile(join(stack.home, 'stack.json'), 'utf8')) as { config: Record<string, string> };
  const { CAIRN_SECRETS_KEY_FILE: _secrets, ...rest } = config;
  shared = rest;
  nc = await connect({ servers: (stack.env.CAIRN_NATS_URL ?? testNatsUrl()).split(',') });
  scenario = new FaultScenario(stack, nc, clock);
  workerIds.push(stack.names.workerId);
  // The stack's own runtime keeps the machine's clock: drained, so every run goes to a skewed one.
  const drained = await stack.cairn(['workers', 'drain', stack.names.workerId, '--json']);
  expect(drained.code, drained.stdout + drained.stderr).toBe(0);
}, 180_000);

afterAll(async () => {
  for (const r of runtimes.values()) if (r.child.exitCode === null && r.child.signalCode === null) r.child.kill('SIGKILL');
  await Promise.all([...runtimes.values()].map((r) => r.exited));
  const { createDockerClient } = await import('@cairn/sandbox-docker');
  const docker = createDockerClient();
  for (const id of workerIds.slice(1)) {
    for (const c of await docker.listContainers({ all: true, filters: { label: [`io.cairn.worker=${id}`] } })) await docker.getContainer(c.Id).remove({ force: true }).catch(() => undefined);
  }
  await nc?.close();
  await stack?.dispose();
}, 120_000);

describe('fault: runtimes a minute behind and a minute ahead of the scheduler\'s clock', () => {
  it('both stay eligible and their runs seal; one killed -9 mid-run has its run failed E_WORKER_LOST within its TTL, not a minute late; every invariant holds', async () => {
    const behind = startSkewed('behind', '-60s');
    const ahead = startSkewed('ahead', '+60s');
    // The clocks are off indeed: each runtime's own heartbeat says so.
    const raw = async (id: string) => ((await WorkerRegistry.open(nc, { bucket: stack.names.workersBucket })).get(id));
    for (let tries = 0; tries < 150 && ((await raw(behind)) === null || (await raw(ahead)) === null); tries++) await sleep(200);
    expect((await raw(behind))!.lastHeartbeatAt).toBeLessThan(Date.now() - 45_000);
    expect((await raw(ahead))!.lastHeartbeatAt).toBeGreaterThan(Date.now() + 45_000);
    // Heard from on the observer's clock: a heartbeat 60 s behind is not stale, one 60 s ahead not fresh for a minute.
    for (let tries = 0; ; tries++) {
      const listed = await workers();
      if ([behind, ahead].every((id) => listed.find((w) => w.workerId === id)?.status === 'eligible')) break;
      if (tries > 150) throw new Error(`the skewed workers never became eligible: ${JSON.stringify(listed.map((w) => [w.workerId, w.status]))}\n${outputs()}`);
      await sleep(200);
    }

    // One run on each (the second goes to the freer worker); both seal as a run on a true clock does.
    const runs = await Promise.all([scenario.submit('skewed one', STEPS(2)), scenario.submit('skewed two', STEPS(2))]);
    expect((await Promise.all(runs.map(placedOn))).sort()).toEqual([ahead, behind].sort());
    for (const runId of runs) await scenario.expectSealedSupports(runId);
    // Leases renewed every second for a few seconds past their TTL were never judged expired.
    const longer = await Promise.all([scenario.submit('skewed long behind', STEPS(7)), scenario.submit('skewed long ahead', STEPS(7))]);
    const longPlaces = await Promise.all(longer.map(placedOn));
    expect([...longPlaces].sort()).toEqual([ahead, behind].sort());
    for (const runId of longer) await scenario.expectSealedSupports(runId);

    // The runtime a minute ahead wrote leases that look good for a minute more: killed, its run still fails within its TTL.
    const doomed = await Promise.all([scenario.submit('killed ahead', STEPS(20)), scenario.submit('beside it', STEPS(3))]);
    const doomedPlaces = await Promise.all(doomed.map(placedOn));
    const onAhead = doomed[doomedPlaces.indexOf(ahead)];
    expect(onAhead, `placed on ${doomedPlaces.join(', ')}`).toBeDefined();
    await scenario.waitForType(onAhead!, 'step.started');
    runtimes.get(ahead)!.child.kill('SIGKILL');
    await runtimes.get(ahead)!.exited;
    const killedAt = Date.now();
    const lost = await stack.waitForRun(onAhead!, (r) => r.state === 'FAILED', 45_000);
    const tookMs = Date.now() - killedAt;
    console.log(`a runtime 60 s ahead killed -9: its run failed E_WORKER_LOST ${tookMs} ms later (lease TTL ${TTL_MS} ms, scan every 500 ms)`);
    expect(lost).toMatchObject({ state: 'FAILED', errorCode: 'E_WORKER_LOST' });
    // Judged by the writer's clock it would have waited out its minute: well under that here, however loaded the machine.
    expect(tookMs).toBeLessThan(40_000);
    await scenario.expectSealedSupports(doomed[1 - doomedPlaces.indexOf(ahead)]!);

    // Restarted (a minute ahead still), the runtime reaps what it left; the lost run seals.
    startSkewed('ahead', '+60s');
    await stack.waitForRun(onAhead!, (r) => r.sealed, 60_000);
    for (let tries = 0; tries < 150 && (await containersOf(workerIds)).length > 0; tries++) await sleep(200);
    expect(await containersOf(workerIds)).toEqual([]);

    const report = await checkStack(
      {
        nc,
        natsUrl: stack.env.CAIRN_NATS_URL ?? testNatsUrl(),
        evidenceStream: stack.names.evidenceStream,
        subjectPrefix: isolatedNames(stack.stackId).CAIRN_EVIDENCE_SUBJECT_PREFIX,
        workerIds,
        leasesBucket: stack.names.leasesBucket,
        queueBucket: queueBucketFor(stack.names.leasesBucket),
        databaseUrl: stack.database.url,
        databaseServerUrl: testDatabaseUrl(),
      },
      { acknowledged: scenario.acknowledged },
      clock,
    );
    console.log(formatReport(report));
    expect(report.ok, `${formatReport(report)}\n${outputs()}`).toBe(true);
  });
});
