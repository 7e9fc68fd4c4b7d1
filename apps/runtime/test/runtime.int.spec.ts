import { sha256Hex, verifyChain } from '@cairn/evidence';
import { foldRun } from '@cairn/lifecycle';
import { sandboxSeccomp } from '@cairn/sandbox-docker';
import type { RunningService } from '@cairn/service-kit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AppendInput, AppendOptions } from '@cairn/evidence-log';
import { ReactionContext } from '@cairn/service-kit';
import { RuntimeHandler } from '../src/runtime.handler.js';
import { ofType, RuntimeWorld, spec } from './runtime.harness.js';

async function until<T>(what: string, probe: () => Promise<T>, ok: (value: T) => boolean, ms: number): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await probe();
    if (ok(value)) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(value)}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/*
 * The runtime in-process on the real NATS and Docker engine: the upstream receipts are appended
 * here as intake, policy and the scheduler would, with a lease in the lease store.
 */

let world: RuntimeWorld;
let runtime: RunningService;
let workerId: string;

beforeAll(async () => {
  world = await RuntimeWorld.create('rtint');
  workerId = world.newWorkerId('main');
  runtime = await world.startRuntime(workerId, { CAIRN_OUTPUT_FILES_MAX_BYTES: '100000' });
});

afterAll(async () => {
  await runtime?.stop();
  const left = await world?.leftoverContainers();
  await world?.dispose();
  expect(left).toEqual([]);
});

const text = (bytes: Uint8Array) => Buffer.from(bytes).toString('utf8');

describe('the runtime worker', () => {
  it('registers with its capacity, isolation and local images, and heartbeats', async () => {
    const first = await world.registry.get(workerId);
    expect(first).toMatchObject({
      workerId,
      capacity: { slots: 2 },
      isolation: ['docker'],
      healthy: true,
      draining: false,
      inFlight: [],
    });
    expect(first?.images['cairn/sandbox-busybox:1']).toBe(world.busyboxId);
    await new Promise((resolve) => setTimeout(resolve, 700));
    expect((await world.registry.get(workerId))!.lastHeartbeatAt).toBeGreaterThan(first!.lastHeartbeatAt);
  });

  it('runs a two-step run with an input and an output file to run.executed, every hash in the artifact store', async () => {
    const { runId, lease } = await world.submitRun(
      spec({
        files: [{ path: '/work/in.txt', content: 'hello cairn' }],
        steps: [
          { argv: ['sh', '-c', 'cat in.txt > /out/result.txt; echo "$GREETING"'], env: { GREETING: 'copied' } },
          { argv: ['wc', '-c', '/out/result.txt'], workdir: '/out' },
        ],
        outputs: ['/out/result.txt'],
      }),
      { workerId },
    );
    const chain = await world.waitForType(runId, ['run.executed', 'run.failed']);
    expect(chain.map((r) => r.type)).toEqual([
      'run.submitted',
      'policy.decided',
      'run.scheduled',
      'sandbox.created',
      'step.started',
      'step.completed',
      'step.started',
      'step.completed',
      'sandbox.destroyed',
      'run.executed',
    ]);
    expect(verifyChain(chain)).toMatchObject({ ok: true, count: chain.length, headHash: chain.at(-1)!.hash });
    expect(foldRun(chain)?.state).toBe('EXECUTED');

    const [created] = ofType(chain, 'sandbox.created');
    expect(created).toMatchObject({
      actor: 'runtime',
      causation: `${runId}:3`,
      container_name: `cairn-${runId}-1`,
      worker_id: workerId,
      driver: 'docker',
      image: 'cairn/sandbox-busybox:1',
      image_digest: world.busyboxId,
      caps: { wall_seconds: 30, memory_mib: 32, pids: 32, disk_mib: 8, cpus: 0.5 },
      network: 'none',
      // What the engine reports the sandbox runs under, confirmed before the first step.
      hardening: {
        read_only_root: true,
        cap_drop: ['ALL'],
        cap_add: [],
        no_new_privileges: true,
        user: '65520:65520',
        init: true,
        pids_limit: 32,
        memory_bytes: 40 * 1024 * 1024,
        network: 'none',
        tmpfs: {
          '/tmp': { size_bytes: 1024 * 1024, exec: false },
          '/work': { size_bytes: 4 * 1024 * 1024, exec: true },
          '/out': { size_bytes: 2 * 1024 * 1024, exec: true },
          '/dev/shm': { size_bytes: 1024 * 1024, exec: false },
          // Every sandbox has the secrets tmpfs (empty without secrets), root's and not executable.
          '/run/secrets': { size_bytes: 2 * 1024 * 1024, exec: false },
        },
        seccomp: 'custom',
        seccomp_profile_sha256: sandboxSeccomp().sha256.slice('sha256:'.length),
        userns_remap: false,
      },
    });
    const started = ofType(chain, 'step.started');
    expect(started.map((s) => [s.step_index, s.tool, s.workdir, s.env_names])).toEqual([
      [0, 'sh', '/work', ['GREETING']],
      [1, 'wc', '/out', []],
    ]);
    const [first, second] = ofType(chain, 'step.completed');
    expect(first).toMatchObject({ step_index: 0, stage: 'step', tool: 'sh', exit_code: 0, signal: null, stdout_bytes: 7, output_truncated: false, limits_hit: [], redactions: [] });
    expect(first!.error_code).toBeUndefined();
    expect(text(await world.artifacts.get(first!.stdout_sha256))).toBe('copied\n');
    expect(second).toMatchObject({ step_index: 1, exit_code: 0 });
    expect(text(await world.artifacts.get(second!.stdout_sha256))).toBe('11 /out/result.txt\n');
    expect(await world.artifacts.verify(second!.stderr_sha256)).toBe('ok');

    const [destroyed] = ofType(chain, 'sandbox.destroyed');
    expect(destroyed).toMatchObject({ container_name: `cairn-${runId}-1`, verified_gone: true, reason: 'completed' });
    const [executed] = ofType(chain, 'run.executed');
    const resultHash = sha256Hex('hello cairn');
    expect(executed).toMatchObject({ steps_completed: 2, exit_codes: [0, 0], artifact_hashes: { '/out/result.txt': resultHash } });
    for (const hash of Object.values(executed!.artifact_hashes)) expect(await world.artifacts.verify(hash)).toBe('ok');
    expect(text(await world.artifacts.get(resultHash))).toBe('hello cairn');

    expect(await world.containersOf(workerId)).toEqual([]);
    expect(await world.leases.get(runId)).toBeNull();
    expect(lease.worker_id).toBe(workerId);
  });

  it('carries on past a non-zero exit and still reaches run.executed', async () => {
    const { runId } = await world.submitRun(spec({ steps: [{ argv: ['sh', '-c', 'echo oops >&2; exit 3'] }, { argv: ['echo', 'after'] }] }), { workerId });
    const chain = await world.waitForType(runId, ['run.executed', 'run.failed']);
    const [executed] = ofType(chain, 'run.executed');
    expect(executed).toMatchObject({ steps_completed: 2, exit_codes: [3, 0], artifact_hashes: {} });
    const [failedStep] = ofType(chain, 'step.completed');
    expect(failedStep).toMatchObject({ exit_code: 3, stderr_bytes: 5 });
    expect(failedStep!.error_code).toBeUndefined();
    expect(text(await world.artifacts.get(failedStep!.stderr_sha256))).toBe('oops\n');
    expect(verifyChain(chain).ok).toBe(true);
  });

  it('keeps the first bytes of an endless output, counts the rest, and says it was cut', async () => {
    const { runId } = await world.submitRun(spec({ steps: [{ argv: ['sh', '-c', 'head -c 200000 /dev/zero'] }] }), { workerId });
    const chain = await world.waitForType(runId, ['run.executed', 'run.failed']);
    const [step] = ofType(chain, 'step.completed');
    expect(step).toMatchObject({ exit_code: 0, stdout_bytes: 200_000, output_truncated: true, limits_hit: ['output_bytes'] });
    expect((await world.artifacts.get(step!.stdout_sha256)).byteLength).toBe(65_536);
    expect(ofType(chain, 'run.executed')).toHaveLength(1);
  });

  it('E_TIMEOUT: stops at the step’s timeout, destroys the sandbox, fails the run (ROLLBACK), leaves no container', async () => {
    const started = Date.now();
    const { runId } = await world.submitRun(spec({ steps: [{ argv: ['sleep', '30'], timeoutSeconds: 1 }, { argv: ['echo', 'never'] }] }), { workerId });
    const chain = await world.waitForType(runId, ['run.executed', 'run.failed']);
    expect(Date.now() - started).toBeLessThan(15_000);
    expect(chain.map((r) => r.type).slice(3)).toEqual(['sandbox.created', 'step.started', 'step.completed', 'sandbox.destroyed', 'run.failed']);
    const [step] = ofType(chain, 'step.completed');
    expect(step).toMatchObject({ exit_code: null, signal: 'SIGKILL', error_code: 'E_TIMEOUT', limits_hit: ['wall_time'] });
    expect(step!.duration_ms).toBeGreaterThanOrEqual(1000);
    expect(ofType(chain, 'sandbox.destroyed')[0]).toMatchObject({ verified_gone: true, reason: 'failed' });
    expect(ofType(chain, 'run.failed')[0]).toMatchObject({ error_code: 'E_TIMEOUT', step_index: 0 });
    expect(foldRun(chain)).toMatchObject({ state: 'ROLLBACK', errorCode: 'E_TIMEOUT' });
    expect(await world.containersOf(workerId)).toEqual([]);
    expect(verifyChain(chain).ok).toBe(true);
  });

  it('E_MEM_LIMIT: an OOM-killed step fails the run with E_MEM_LIMIT, and the sandbox is gone', async () => {
    const { runId } = await world.submitRun(spec({ steps: [{ argv: ['sh', '-c', 'x=aaaaaaaaaaaaaaaa; while :; do x="$x$x"; done'] }] }), {
      workerId,
      caps: { wall_seconds: 20, memory_mib: 16, pids: 32, disk_mib: 8, cpus: 0.5 },
    });
    const chain = await world.waitForType(runId, ['run.executed', 'run.failed']);
    const [step] = ofType(chain, 'step.completed');
    expect(step).toMatchObject({ error_code: 'E_MEM_LIMIT' });
    expect(step!.limits_hit[0]).toBe('memory');
    expect(ofType(chain, 'sandbox.destroyed')[0]).toMatchObject({ verified_gone: true, reason: 'failed' });
    expect(ofType(chain, 'run.failed')[0]).toMatchObject({ error_code: 'E_MEM_LIMIT', step_index: 0 });
    expect(foldRun(chain)?.state).toBe('ROLLBACK');
    expect(await world.containersOf(workerId)).toEqual([]);
  });

  it('E_DISK_LIMIT: a step that fills its tmpfs fails the run with E_DISK_LIMIT', async () => {
    const { runId } = await world.submitRun(spec({ steps: [{ argv: ['dd', 'if=/dev/zero', 'of=/work/fill', 'bs=65536', 'count=1000'] }] }), { workerId });
    const chain = await world.waitForType(runId, ['run.executed', 'run.failed']);
    expect(ofType(chain, 'step.completed')[0]).toMatchObject({ error_code: 'E_DISK_LIMIT', limits_hit: ['disk'] });
    expect(ofType(chain, 'run.failed')[0]).toMatchObject({ error_code: 'E_DISK_LIMIT', step_index: 0 });
    expect(foldRun(chain)?.state).toBe('ROLLBACK');
    expect(await world.containersOf(workerId)).toEqual([]);
  });

  it('E_BUDGET: outputs over the worker’s bound fail the run after its steps, and the sandbox is still torn down', async () => {
    const { runId } = await world.submitRun(spec({ steps: [{ argv: ['dd', 'if=/dev/zero', 'of=/out/big', 'bs=1024', 'count=200'] }], outputs: ['/out'] }), { workerId });
    const chain = await world.waitForType(runId, ['run.executed', 'run.failed']);
    expect(chain.map((r) => r.type).slice(3)).toEqual(['sandbox.created', 'step.started', 'step.completed', 'sandbox.destroyed', 'run.failed']);
    expect(ofType(chain, 'step.completed')[0]).toMatchObject({ exit_code: 0 });
    expect(ofType(chain, 'sandbox.destroyed')[0]).toMatchObject({ verified_gone: true, reason: 'failed' });
    expect(ofType(chain, 'run.failed')[0]).toMatchObject({ error_code: 'E_BUDGET' });
    expect(foldRun(chain)?.state).toBe('ROLLBACK');
    expect(await world.containersOf(workerId)).toEqual([]);
  });

  it('E_IMAGE_PULL: an image the engine does not have, or not the granted digest, fails before any sandbox', async () => {
    const missing = await world.submitRun(spec(), { workerId, image: 'cairn/not-built:1' });
    const other = await world.submitRun(spec(), { workerId, image: `cairn/sandbox-busybox:1@sha256:${'0'.repeat(64)}` });
    for (const { runId } of [missing, other]) {
      const chain = await world.waitForType(runId, ['run.failed', 'run.executed']);
      expect(chain.map((r) => r.type)).toEqual(['run.submitted', 'policy.decided', 'run.scheduled', 'run.failed']);
      expect(ofType(chain, 'run.failed')[0]).toMatchObject({ error_code: 'E_IMAGE_PULL', actor: 'runtime' });
      // Released right after the ending is on the chain (never before it: a live run without a lease
      // is the lease scan's to settle), long before the lease could lapse (10 s): its reservation is back.
      await until('the lease released', () => world.leases.get(runId), (lease) => lease === null, 3000);
    }
  });

  it('does not run a placement whose lease it does not hold', async () => {
    const { runId } = await world.submitRun(spec(), { workerId, lease: false });
    const marker = await world.submitRun(spec(), { workerId });
    await world.waitForType(marker.runId, ['run.executed']);
    // The reactor handles placements as they come; by now the one without a lease was seen and left.
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(await world.types(runId)).toEqual(['run.submitted', 'policy.decided', 'run.scheduled']);
  });

  it('cancel: a run.cancel_requested while a step runs stops it, records the interrupted step and the teardown, then run.cancelled', async () => {
    const { runId } = await world.submitRun(spec({ steps: [{ argv: ['sleep', '30'] }, { argv: ['echo', 'never'] }] }), { workerId });
    await world.waitForType(runId, ['step.started']);
    // The registry learns of the run at the worker's next heartbeat (300 ms here; later on a loaded host).
    const inFlight = async () => (await world.registry.get(workerId))?.inFlight.map((r) => r.runId) ?? [];
    for (const end = Date.now() + 10_000; !(await inFlight()).includes(runId) && Date.now() < end; ) {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(await inFlight()).toContain(runId);
    const askedAt = Date.now();
    // As intake asks a RUNNING run to stop.
    const request = await world.log.append(runId, {
      type: 'run.cancel_requested',
      actor: 'intake',
      tenant: 'acme',
      causation: null,
      key: 'cancel',
      fields: { requested_by: 'key:test', reason: 'no longer needed' },
    });
    const chain = await world.waitForType(runId, ['run.cancelled', 'run.failed', 'run.executed'], 15_000);
    expect(Date.now() - askedAt).toBeLessThan(5000);
    expect(chain.map((r) => r.type).slice(3)).toEqual(['sandbox.created', 'step.started', 'run.cancel_requested', 'step.completed', 'sandbox.destroyed', 'run.cancelled']);
    const [step] = ofType(chain, 'step.completed');
    expect(step).toMatchObject({ step_index: 0, exit_code: null, signal: 'SIGKILL', limits_hit: [], output_truncated: true, stdout_bytes: 0, actor: 'runtime' });
    expect(step!.error_code).toBeUndefined();
    expect(await world.artifacts.verify(step!.stdout_sha256)).toBe('ok');
    expect(ofType(chain, 'sandbox.destroyed')[0]).toMatchObject({ verified_gone: true, reason: 'cancelled' });
    expect(ofType(chain, 'run.cancelled')[0]).toMatchObject({
      actor: 'runtime',
      causation: `${runId}:${request.receipt.seq}`,
      cancelled_by: 'key:test',
      reason: 'no longer needed',
    });
    expect(ofType(chain, 'run.cancelled')[0]!.error_code).toBeUndefined();
    // The lifecycle accepts every receipt: the grader would seal it CANCELLED now.
    expect(foldRun(chain)).toMatchObject({ state: 'CANCELLED', errorCode: null, sealed: false });
    expect(verifyChain(chain).ok).toBe(true);
    expect(await world.containersOf(workerId)).toEqual([]);
    expect(await world.leases.get(runId)).toBeNull();
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(await world.types(runId)).toHaveLength(chain.length);
  });

  it('cancel: a run.cancelled landing just before its sandbox.created is recorded leaves no receipt after it and no container', async () => {
    // Placed without a lease first, so the live reactor sees the placement and leaves it.
    const { runId, scheduled, lease } = await world.submitRun(spec({ steps: [{ argv: ['echo', 'never'] }] }), { workerId, lease: false });
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(await world.types(runId)).toEqual(['run.submitted', 'policy.decided', 'run.scheduled']);
    await world.leases.put(lease);
    // The placement handled again, with intake's cancel landing right before the runtime's first append.
    let raced = false;
    const racing = new Proxy(world.log, {
      get(target, prop, receiver) {
        if (prop !== 'append') return Reflect.get(target, prop, receiver) as unknown;
        return async (chainId: string, input: AppendInput, options?: AppendOptions) => {
          if (!raced && input.type === 'sandbox.created') {
            raced = true;
            await target.append(chainId, { type: 'run.cancelled', actor: 'intake', tenant: 'acme', causation: null, key: 'cancel', fields: { cancelled_by: 'key:test' } });
          }
          return target.append(chainId, input, options);
        };
      },
    });
    await runtime.app.get(RuntimeHandler).handle(new ReactionContext(scheduled, 'runtime', racing, () => undefined));
    expect(raced).toBe(true);
    const chain = await world.receipts(runId);
    expect(chain.map((r) => r.type)).toEqual(['run.submitted', 'policy.decided', 'run.scheduled', 'run.cancelled']);
    expect(foldRun(chain)).toMatchObject({ state: 'CANCELLED' });
    expect(await world.containersOf(workerId)).toEqual([]);
    expect(await world.leases.get(runId)).toBeNull();
  });

  it('a lost lease stops the run and destroys its sandbox, recording nothing more; failing the run is left to the scheduler', async () => {
    const { runId, lease } = await world.submitRun(spec({ steps: [{ argv: ['sleep', '30'] }] }), { workerId });
    await world.waitForType(runId, ['step.started']);
    // Another worker holds the run now (a re-offer after this one looked dead).
    await world.leases.put({ ...lease, lease_id: `${lease.lease_id}x`, worker_id: 'someone-else' });
    const end = Date.now() + 15_000;
    while ((await world.containersOf(workerId)).length > 0 && Date.now() < end) await new Promise((resolve) => setTimeout(resolve, 100));
    await new Promise((resolve) => setTimeout(resolve, 500));
    // The fence (docs/adr/0019): neither the interrupted step's receipt nor the teardown is this worker's to write any more.
    expect((await world.types(runId)).slice(3)).toEqual(['sandbox.created', 'step.started']);
    // The lease is the new holder's, untouched.
    expect(await world.leases.get(runId)).toMatchObject({ lease_id: `${lease.lease_id}x`, worker_id: 'someone-else' });
    expect(await world.containersOf(workerId)).toEqual([]);
  });
});
