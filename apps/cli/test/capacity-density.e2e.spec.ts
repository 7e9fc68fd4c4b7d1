import { rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestStack } from './stack.harness.js';

/*
 * A hundred sandboxes open at once on this host (issue 14), on the stack's defaults but for a
 * configured limit of 100 slots and a tenant quota of 99 sandboxes: tenant A opens 99, its 100th is
 * refused by the quota (E_BUDGET) while tenant B still gets the worker's 100th; each of the 100
 * answers an exec; the next create is refused at once with E_CAPACITY naming the slots; then all are
 * deleted and the worker holds nothing.
 */

const SLOTS = 100;
const QUOTA = 99;
/** A sandbox of 128 MiB (and a 64 MiB disk): 192 MiB reserved. */
const SPEC = { caps: { memoryMiB: 128, diskMiB: 64, cpus: 1 }, ttlSeconds: 900, idleSeconds: 900 };

let stack: TestStack;
let keyA = '';
let keyB = '';
const policyFile = join(tmpdir(), `cairn-density-policy-${process.pid}.json`);

async function call(key: string, path: string, init: { method?: string; body?: unknown } = {}): Promise<{ status: number; body: Record<string, unknown>; headers: Headers }> {
  const response = await fetch(`${stack.url}${path}`, {
    method: init.method ?? 'GET',
    headers: { authorization: `Bearer ${key}`, ...(init.body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) }),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown>, headers: response.headers };
}

/** `n` calls of `task`, `width` at a time. */
async function inParallel<T>(n: number, width: number, task: (i: number) => Promise<T>): Promise<T[]> {
  const results: T[] = new Array<T>(n);
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      for (let i = next++; i < n; i = next++) results[i] = await task(i);
    }),
  );
  return results;
}

async function reservedSlots(): Promise<number> {
  const body = (await (await stack.api('/v1/workers')).json()) as { items: unknown[] };
  const worker = (body.items as { workerId: string; reserved: { slots: number } }[]).find((w) => w.workerId === stack.names.workerId);
  return worker?.reserved.slots ?? -1;
}

beforeAll(async () => {
  await writeFile(
    policyFile,
    JSON.stringify({
      version: 1,
      defaultImage: 'cairn/sandbox-busybox:1',
      images: { allow: [{ name: 'cairn/sandbox-busybox:1' }] },
      caps: {
        defaults: { wallSeconds: 60, memoryMiB: 256, pids: 64, diskMiB: 256, cpus: 1 },
        max: { wallSeconds: 600, memoryMiB: 4096, pids: 256, diskMiB: 8192, cpus: 4 },
      },
      network: { egress: 'deny' },
      approvals: { rules: [] },
      budgets: { runsPerJob: 6, jobMinutes: 90, tenantConcurrentSandboxes: QUOTA },
    }),
  );
  stack = await TestStack.create('cap-density', { CAIRN_POLICY_FILE: policyFile, CAIRN_WORKER_SLOTS: String(SLOTS), CAIRN_HEARTBEAT_MS: '500' });
  await stack.up();
  keyA = await stack.mintKey('acme', ['runs:read', 'runs:write']);
  keyB = await stack.mintKey('globex', ['runs:read', 'runs:write']);
}, 180_000);

afterAll(async () => {
  await stack?.dispose();
  await rm(policyFile, { force: true });
});

describe('a hundred idle sandboxes on one host (issue 14)', () => {
  it('holds 100 open at once, each answering an exec; a tenant quota refuses its own excess while another tenant gets in; the next create past the limit is refused at once (E_CAPACITY, slots)', async () => {
    const started = performance.now();
    const created = await inParallel(QUOTA, 8, async () => call(keyA, '/v1/sandboxes', { method: 'POST', body: SPEC }));
    const refusedEarly = created.filter((c) => c.status !== 201);
    expect(refusedEarly.map((c) => c.body), await stack.logs(5)).toEqual([]);
    const ids = created.map((c) => c.body.id as string);
    const createMs = performance.now() - started;

    // Tenant A's 100th is its own excess: refused by its quota, on the record (REJECTED E_BUDGET).
    const excess = await call(keyA, '/v1/sandboxes', { method: 'POST', body: SPEC });
    expect(excess.status).toBe(429);
    expect(excess.body).toMatchObject({ code: 'E_BUDGET' });
    expect(String(excess.body.message)).toContain(`sandbox ${QUOTA + 1} open of the ${QUOTA} allowed`);

    // Tenant B still gets in: the worker's 100th.
    const other = await call(keyB, '/v1/sandboxes', { method: 'POST', body: SPEC });
    expect(other.status, JSON.stringify(other.body)).toBe(201);
    ids.push(other.body.id as string);
    expect(await reservedSlots()).toBe(SLOTS);

    // Past the configured limit: refused at once, naming what ran out.
    const t0 = performance.now();
    const full = await call(keyB, '/v1/sandboxes', { method: 'POST', body: SPEC });
    const fullMs = performance.now() - t0;
    expect(full.status).toBe(503);
    expect(full.headers.get('retry-after')).toBe('5');
    expect(full.body).toMatchObject({ code: 'E_CAPACITY', details: { resource: 'slots' } });
    expect(fullMs).toBeLessThan(5000);

    // Every one of the hundred answers.
    const execs = await inParallel(ids.length, 10, async (i) => {
      const key = i < QUOTA ? keyA : keyB;
      const t = performance.now();
      const answer = await call(key, `/v1/sandboxes/${ids[i]}/exec`, { method: 'POST', body: { argv: ['echo', `sandbox ${i}`] } });
      return { ...answer, ms: performance.now() - t };
    });
    expect(execs.filter((e) => e.status !== 200 || e.body.stdout !== `sandbox ${execs.indexOf(e)}\n`).map((e) => e.body)).toEqual([]);
    const sorted = execs.map((e) => e.ms).sort((a, b) => a - b);
    process.stderr.write(`[density e2e] ${ids.length} open: creates ${Math.round(createMs)} ms for ${QUOTA}, full refused in ${Math.round(fullMs)} ms, exec p50 ${Math.round(sorted[50] ?? 0)} ms\n`);

    // All deleted: nothing held, nothing left.
    const deleted = await inParallel(ids.length, 10, async (i) => call(i < QUOTA ? keyA : keyB, `/v1/sandboxes/${ids[i]}`, { method: 'DELETE' }));
    expect(deleted.filter((d) => d.status !== 200 || d.body.state !== 'DESTROYED').map((d) => d.body)).toEqual([]);
    for (const deadline = Date.now() + 20_000; (await reservedSlots()) !== 0 || (await stack.containers()).length > 0; ) {
      if (Date.now() > deadline) throw new Error(`not clean: ${await reservedSlots()} slots held, containers ${JSON.stringify(await stack.containers())}`);
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }, 600_000);
});
