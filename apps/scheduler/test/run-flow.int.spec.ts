import type { CommandReply, ReceiptEnvelope, RunSpec } from '@cairn/contracts';
import { sha256Hex } from '@cairn/evidence';
import { CommandBus } from '@cairn/operational';
import { createTestDatabase, uniqueName } from '@cairn/testing';
import type { TestDatabase } from '@cairn/testing';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BUSYBOX, BUSYBOX_DIGEST, createSchedulerWorld, fakeWorker, killAll, sleep, startProcess, until } from './scheduler.harness.js';
import type { SchedulerWorld, ServiceProcess } from './scheduler.harness.js';

// The three services as real processes, from their builds (`npm run build` first).
const MAINS = {
  intake: fileURLToPath(new URL('../../intake/dist/main.js', import.meta.url)),
  policy: fileURLToPath(new URL('../../policy/dist/main.js', import.meta.url)),
  scheduler: fileURLToPath(new URL('../dist/main.js', import.meta.url)),
};

let world: SchedulerWorld;
let db: TestDatabase;
let bus: CommandBus;
const processes: ServiceProcess[] = [];

async function submit(spec: RunSpec, key = uniqueName('key')): Promise<CommandReply> {
  const keySha = sha256Hex(key);
  return bus.send('submit', { tenant: 'acme', submitted_by: 'key:k1', idempotency_key_sha256: keySha, spec }, { msgId: `acme:${keySha}`, timeoutMs: 15_000 });
}

function runIdOf(reply: CommandReply): string {
  if (!reply.ok) throw new Error(`submit failed: ${JSON.stringify(reply)}`);
  return reply.run_id;
}

async function chainUntil(runId: string, type: string): Promise<ReceiptEnvelope[]> {
  return until(`${type} on ${runId}`, async () => {
    const receipts = await world.chain(runId);
    return receipts.some((r) => r.type === type) ? receipts : null;
  });
}

beforeAll(async () => {
  for (const main of Object.values(MAINS)) if (!existsSync(main)) throw new Error(`${main} is missing: run npm run build first`);
  world = await createSchedulerWorld('flow');
  db = await createTestDatabase('flow_intake');
  await world.registry.register(fakeWorker('w-flow'));
  const env = { ...world.env, CAIRN_DATABASE_URL: db.url, CAIRN_LEASE_TTL_MS: '60000' };
  for (const main of Object.values(MAINS)) processes.push(startProcess(main, env));
  bus = await CommandBus.open(world.nc, { stream: world.env.CAIRN_COMMAND_STREAM!, subjectPrefix: world.env.CAIRN_COMMAND_SUBJECT_PREFIX! });
});

afterAll(async () => {
  for (const p of processes) if (p.child.exitCode === null) p.child.kill('SIGTERM');
  await sleep(300);
  await killAll(processes);
  await world?.dispose();
  await db?.drop();
});

describe('a run from submit to scheduled, across intake, policy and scheduler', () => {
  it('submit → run.submitted → policy.decided allow → run.scheduled on the registered worker', async () => {
    const reply = await submit({ name: 'end-to-end', steps: [{ argv: ['echo', 'hello'] }] });
    expect(reply).toMatchObject({ ok: true, duplicate: false });
    const runId = runIdOf(reply);
    const receipts = await chainUntil(runId, 'run.scheduled');
    expect(receipts.map((r) => [r.type, r.actor])).toEqual([
      ['run.submitted', 'intake'],
      ['policy.decided', 'policy'],
      ['run.scheduled', 'scheduler'],
    ]);
    expect(receipts[1]).toMatchObject({ decision: 'allow', image: `${BUSYBOX}@${BUSYBOX_DIGEST}` });
    expect(receipts[2]).toMatchObject({ worker_id: 'w-flow', attempt: 1 });
    expect(await world.leases.get(runId)).toMatchObject({ worker_id: 'w-flow' });
  });

  it('a spec over the caps is denied with E_POLICY_DENIED and never scheduled', async () => {
    const runId = runIdOf(await submit({ name: 'too-big', steps: [{ argv: ['true'] }], caps: { wallSeconds: 3600 } }));
    const receipts = await chainUntil(runId, 'policy.decided');
    expect(receipts[1]).toMatchObject({ decision: 'deny', error_code: 'E_POLICY_DENIED' });
    await sleep(500);
    expect(await world.chain(runId)).toHaveLength(2);
  });

  it('an image that is not allowed is denied', async () => {
    const runId = runIdOf(await submit({ name: 'unknown-image', image: 'docker.io/library/ubuntu:24.04', steps: [{ argv: ['true'] }] }));
    const receipts = await chainUntil(runId, 'policy.decided');
    expect(receipts[1]).toMatchObject({ decision: 'deny', error_code: 'E_POLICY_DENIED' });
    expect(receipts[1]?.reasons).toEqual([expect.stringContaining('docker.io/library/ubuntu:24.04 is not on the policy')]);
  });

  it('a resubmission gets the same run and one chain; the same key with another body is refused', async () => {
    const key = uniqueName('key');
    const spec: RunSpec = { name: 'once', steps: [{ argv: ['true'] }] };
    const runId = runIdOf(await submit(spec, key));
    await chainUntil(runId, 'run.scheduled');
    expect(await submit(spec, key)).toEqual({ ok: true, run_id: runId, duplicate: true });
    expect(await submit({ ...spec, name: 'twice' }, key)).toMatchObject({ ok: false, error: { code: 'E_IDEMPOTENCY_MISMATCH' } });
    await sleep(300);
    expect((await world.chain(runId)).map((r) => r.type)).toEqual(['run.submitted', 'policy.decided', 'run.scheduled']);
  });

  it('cancel before running releases the lease; cancel of an unknown run is E_NOT_FOUND', async () => {
    const runId = runIdOf(await submit({ name: 'to-cancel', steps: [{ argv: ['sleep', '60'] }] }));
    await chainUntil(runId, 'run.scheduled');
    expect(await bus.send('cancel', { tenant: 'acme', run_id: runId, requested_by: 'key:k1' }, { msgId: uniqueName('c'), timeoutMs: 15_000 })).toEqual({
      ok: true,
      run_id: runId,
      duplicate: false,
    });
    expect((await chainUntil(runId, 'run.cancelled')).map((r) => r.type)).toEqual(['run.submitted', 'policy.decided', 'run.scheduled', 'run.cancelled']);
    await until('the lease released', async () => ((await world.leases.get(runId)) === null ? true : null));
    expect(await bus.send('cancel', { tenant: 'acme', run_id: 'run_nope', requested_by: 'key:k1' }, { msgId: uniqueName('c'), timeoutMs: 15_000 })).toMatchObject({
      ok: false,
      error: { code: 'E_NOT_FOUND' },
    });
  });
});
