import type { RunSpec } from '@cairn/contracts';
import { checkStack, formatReport, scenarioClock } from '@cairn/fault-testing';
import { bucketStreamName } from '@cairn/operational';
import { ServiceProcesses, testNatsUrl, uniqueName, until } from '@cairn/testing';
import { jetstreamManager } from '@nats-io/jetstream';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ofType, RuntimeWorld } from './runtime.harness.js';

// The real processes, built by `npm run build` (`npm run test:faults` builds first).
const RUNTIME_MAIN = fileURLToPath(new URL('../dist/main.js', import.meta.url));
const SCHEDULER_MAIN = fileURLToPath(new URL('../../scheduler/dist/main.js', import.meta.url));
const LEASE_TTL_MS = 2000;

let world: RuntimeWorld;
const processes = new ServiceProcesses();
const commands = { CAIRN_COMMAND_STREAM: uniqueName('PAUSE_CMDS').toUpperCase(), CAIRN_COMMAND_SUBJECT_PREFIX: uniqueName('pause_cmd').toLowerCase() };

beforeAll(async () => {
  for (const main of [RUNTIME_MAIN, SCHEDULER_MAIN]) if (!existsSync(main)) throw new Error(`${main} is missing: run npm run build first`);
  world = await RuntimeWorld.create('rtpause');
});

afterAll(async () => {
  processes.killAll();
  const jsm = await jetstreamManager(world.nc);
  const leases = world.names.leases;
  for (const stream of [commands.CAIRN_COMMAND_STREAM, bucketStreamName(`${leases}_queue`), bucketStreamName(`${leases}_approvals`)]) await jsm.streams.delete(stream).catch(() => false);
  await world?.dispose();
});

describe('fault: a runtime paused past its lease', () => {
  it('SIGSTOPped mid-step until the scheduler fails the run E_WORKER_LOST, then SIGCONTed: it writes nothing more and its sandbox goes', async () => {
    const clock = scenarioClock();
    const workerId = world.newWorkerId('paused');
    const leaseEnv = { CAIRN_LEASE_TTL_MS: String(LEASE_TTL_MS), CAIRN_LEASE_RENEW_MS: '300' };
    const runtime = processes.start(RUNTIME_MAIN, { ...world.env(workerId, leaseEnv), ...commands });
    const scheduler = processes.start(SCHEDULER_MAIN, {
      ...world.env(workerId),
      ...leaseEnv,
      ...commands,
      CAIRN_LEASE_SCAN_INTERVAL_MS: '200',
      CAIRN_LOG_LEVEL: 'info',
    });
    await until('the runtime to register', async () => (await world.registry.get(workerId)) !== null);

    // Intake's and policy's receipts; the real scheduler places it with a short lease.
    const spec: RunSpec = { name: 'paused', steps: [{ argv: ['sh', '-c', 'echo started; sleep 4; echo done'] }, { argv: ['echo', 'second'] }] };
    const { runId } = await world.submitAllowed(spec, { runId: `run_${uniqueName('pause').toLowerCase()}` });
    await world.waitForType(runId, ['step.started'], 30_000);

    runtime.child.kill('SIGSTOP');
    const failed = ofType(await world.waitForType(runId, ['run.failed'], 15_000), 'run.failed')[0]!;
    expect(failed).toMatchObject({ actor: 'scheduler', error_code: 'E_WORKER_LOST' });
    // Past the step's end too: its result waits in the paused process.
    await new Promise((resolve) => setTimeout(resolve, 3000));
    runtime.child.kill('SIGCONT');

    await until('the paused runtime to destroy its sandbox', async () => (await world.containersOf(workerId)).length === 0, 20_000);
    // Time for anything it would still write.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    runtime.child.kill('SIGTERM');
    scheduler.child.kill('SIGTERM');
    await Promise.all([runtime.exited, scheduler.exited]);
    const leases = world.names.leases;
    const report = await checkStack(
      {
        nc: world.nc,
        natsUrl: testNatsUrl(),
        evidenceStream: world.names.stream,
        subjectPrefix: world.names.prefix,
        workerIds: [workerId],
        leasesBucket: leases,
        queueBucket: `${leases}_queue`,
      },
      { acknowledged: [runId] },
      clock,
    );
    console.log(formatReport(report));
    expect(report.invariants.T, formatReport(report)).toMatchObject({ checked: true, ok: true });
    expect(report.invariants.D).toMatchObject({ checked: true, ok: true });
    expect(report.ok, formatReport(report)).toBe(true);
    expect((await world.receipts(runId)).map((r) => `${r.type}:${r.actor}`)).toEqual([
      'run.submitted:intake',
      'policy.decided:policy',
      'run.scheduled:scheduler',
      'sandbox.created:runtime',
      'step.started:runtime',
      'run.failed:scheduler',
    ]);
    expect(runtime.output()).toContain("no longer holds the run's lease");
  });
});
