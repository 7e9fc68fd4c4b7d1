import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer } from 'node:http';
import type { IncomingHttpHeaders, Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isRunning, TestStack } from './stack.harness.js';

/*
 * Webhooks end to end on one isolated stack: a receiver this test starts on loopback (the stack
 * allows private addresses: CAIRN_WEBHOOKS_ALLOW_PRIVATE=1) gets every event of a run — none
 * missing, none left over once repeats are dropped by event id — each with a valid signature and
 * the receipt exactly as on the chain, although the gateway and then the webhooks service are
 * killed (SIGKILL) in the middle of the run and restarted by `cairn up`. A receiver that keeps
 * failing gets its retries, then the delivery is dead-lettered; a replay sends it again.
 */

const SMALL = { wallSeconds: 20, memoryMiB: 32, pids: 32, diskMiB: 8, cpus: 0.5 };
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
}

/**
 * What a receiver does (README, docs/subscribers.md): recompute v1 over `t.` + the raw body with
 * the secret, compare in constant time, refuse an old t. Written here from the documented format,
 * not with Cairn's own code.
 */
function verifySignatureHeader(secret: string, header: string, body: string): { ok: boolean } {
  const fields = new Map(header.split(',').map((part) => part.split('=', 2) as [string, string]));
  const t = fields.get('t');
  const v1 = fields.get('v1');
  if (t === undefined || v1 === undefined || !/^[0-9a-f]{64}$/.test(v1)) return { ok: false };
  const expected = createHmac('sha256', secret).update(`${t}.${body}`).digest();
  const fresh = Math.abs(Date.now() / 1000 - Number(t)) < 300;
  return { ok: fresh && timingSafeEqual(expected, Buffer.from(v1, 'hex')) };
}

let stack: TestStack;
let receiver: Server;
let receiverUrl = '';
const received: Received[] = [];
/** Paths that answer 500 while listed. */
const failing = new Set<string>(['/fail']);

function webhookLog(): Promise<string> {
  return readFile(join(stack.home, 'logs', 'webhooks.log'), 'utf8').then((text) => text.split('\n').slice(-30).join('\n'), () => '(no webhooks log)');
}

async function register(path: string, events: string[]): Promise<{ id: string; secret: string }> {
  const response = await stack.api('/v1/webhooks', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ url: `${receiverUrl}${path}`, events }) });
  const body = (await response.json()) as { id: string; secret: string };
  expect(response.status, JSON.stringify(body)).toBe(201);
  return body;
}

async function submit(name: string, steps: unknown[]): Promise<string> {
  const spec = { name, image: 'cairn/sandbox-busybox:1', steps, caps: SMALL, network: 'none' };
  const cli = await stack.cairn(['run', await stack.specFile(name.replace(/\W+/g, '-'), spec), '--json']);
  expect(cli.code, cli.stderr).toBe(0);
  return (JSON.parse(cli.stdout) as { runId: string }).runId;
}

async function crash(service: string): Promise<void> {
  const pid = (await stack.stackFile()).services[service]!.pid;
  process.kill(pid, 'SIGKILL');
  await expect.poll(() => isRunning(pid), { timeout: 5_000 }).toBe(false);
}

async function chainOf(runId: string): Promise<Record<string, unknown>[]> {
  const response = await stack.api(`/v1/runs/${runId}/events?after=0&limit=1000`);
  expect(response.status).toBe(200);
  return ((await response.json()) as { items: Record<string, unknown>[] }).items;
}

async function waitFor<T>(what: string, probe: () => Promise<T | null> | T | null, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const found = await probe();
    if (found !== null) return found;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms\n${await webhookLog()}`);
    await sleep(100);
  }
}

beforeAll(async () => {
  receiver = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const path = req.url ?? '/';
      received.push({ path, headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      res.statusCode = failing.has(path) ? 500 : 200;
      res.end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
  stack = await TestStack.create('webhooks', {
    CAIRN_WEBHOOKS_ALLOW_PRIVATE: '1',
    CAIRN_WEBHOOKS_MAX_ATTEMPTS: '3',
    CAIRN_WEBHOOKS_RETRY_BASE_MS: '300',
    CAIRN_WEBHOOKS_RETRY_MAX_MS: '600',
    CAIRN_WEBHOOKS_TIMEOUT_MS: '3000',
  });
  await stack.up();
});

afterAll(async () => {
  await stack?.dispose();
  await new Promise<void>((resolve) => (receiver === undefined ? resolve() : receiver.close(() => resolve())));
});

describe('webhooks on a whole stack', () => {
  it('cairn up starts the webhooks service with the stack', async () => {
    const services = (await stack.stackFile()).services;
    expect(services.webhooks).toBeDefined();
    expect(isRunning(services.webhooks!.pid)).toBe(true);
  });

  it('delivers every event of a run exactly once after dropping repeats, signed, across a gateway and a webhooks restart mid-run', async () => {
    const all = await register('/all', ['*']);
    const runId = await submit('webhook run', [{ argv: ['echo', 'one'] }, { argv: ['sleep', '4'] }, { argv: ['echo', 'three'] }]);
    await waitFor('step.started', async () => ((await stack.types(runId)).includes('step.started') ? true : null));
    await crash('gateway');
    await sleep(700);
    await crash('webhooks');
    await sleep(1500);
    const up = await stack.up();
    expect(up.outcome).toBe('restarted');
    expect([...up.restarted].sort()).toEqual(['gateway', 'webhooks']);
    await stack.waitForRun(runId, (r) => r.sealed, 60_000);
    const chain = await chainOf(runId);
    const expected = chain.map((r) => `${runId}:${String(r.seq)}`);
    expect(expected.length).toBeGreaterThan(10);

    const mine = () => received.filter((r) => r.path === '/all' && String(r.headers['cairn-event-id']).startsWith(`${runId}:`));
    await waitFor('every event of the run', () => (new Set(mine().map((r) => r.headers['cairn-event-id'])).size >= expected.length ? true : null), 30_000);
    await sleep(1000); // anything late would show up as an extra id
    const byId = new Map<string, Received>();
    for (const delivery of mine()) {
      const id = String(delivery.headers['cairn-event-id']);
      const check = verifySignatureHeader(all.secret, String(delivery.headers['cairn-signature']), delivery.body);
      expect(check, id).toMatchObject({ ok: true });
      const payload = JSON.parse(delivery.body) as { id: string; type: string; chain: string; seq: number; receipt: Record<string, unknown> };
      expect(payload.id).toBe(id);
      expect(delivery.headers['cairn-event-type']).toBe(payload.type);
      expect(delivery.headers['content-type']).toBe('application/json');
      byId.set(id, delivery);
    }
    expect([...byId.keys()].sort()).toEqual([...expected].sort());
    // The receipt as stored: every field, including its hash and prev_hash.
    for (const receipt of chain) {
      const payload = JSON.parse(byId.get(`${runId}:${String(receipt.seq)}`)!.body) as { receipt: unknown };
      expect(payload.receipt).toEqual(receipt);
    }
    const log = await stack.api(`/v1/webhooks/${all.id}/deliveries?limit=500`);
    const items = ((await log.json()) as { items: { eventId: string; status: string; replayOf: string | null }[] }).items.filter((d) => d.eventId.startsWith(`${runId}:`));
    // One first delivery per event, whatever the restarts redelivered to the reactor.
    expect(items.filter((d) => d.replayOf === null).map((d) => d.eventId).sort()).toEqual([...expected].sort());
    expect(items.every((d) => d.status === 'delivered')).toBe(true);
  });

  it('retries a failing receiver with backoff, dead-letters after the limit, and a replay delivers it', async () => {
    const hook = await register('/fail', ['run.sealed']);
    const runId = await submit('webhook failing receiver', [{ argv: ['echo', 'x'] }]);
    await stack.waitForRun(runId, (r) => r.sealed, 60_000);
    const eventId = `${runId}:${String((await chainOf(runId)).length)}`;
    type DeliveryView = { id: string; eventId: string; status: string; attempts: number; lastStatus: number | null; replayOf: string | null; attemptLog: { attempt: number; statusCode: number | null; at: string }[] };
    const deliveries = async (): Promise<DeliveryView[]> => {
      const response = await stack.api(`/v1/webhooks/${hook.id}/deliveries`);
      expect(response.status).toBe(200);
      return ((await response.json()) as { items: DeliveryView[] }).items;
    };
    const dead = await waitFor('a dead delivery', async () => (await deliveries()).find((d) => d.eventId === eventId && d.status === 'dead') ?? null, 30_000);
    expect(dead).toMatchObject({ attempts: 3, lastStatus: 500, replayOf: null });
    expect(dead.attemptLog.map((a) => [a.attempt, a.statusCode])).toEqual([
      [1, 500],
      [2, 500],
      [3, 500],
    ]);
    // Backoff: the waits grow (300 ms, then 600 ms, less at most 20 % jitter).
    const at = dead.attemptLog.map((a) => Date.parse(a.at));
    expect(at[1]! - at[0]!).toBeGreaterThanOrEqual(200);
    expect(at[2]! - at[1]!).toBeGreaterThanOrEqual(450);
    const failedPosts = received.filter((r) => r.path === '/fail' && r.headers['cairn-event-id'] === eventId);
    expect(failedPosts.map((r) => r.headers['cairn-delivery-attempt'])).toEqual(['1', '2', '3']);
    expect(new Set(failedPosts.map((r) => r.body)).size).toBe(1);

    failing.delete('/fail');
    const replay = await stack.api(`/v1/webhooks/${hook.id}/deliveries/${dead.id}/replay`, { method: 'POST' });
    const replayed = (await replay.json()) as DeliveryView;
    expect(replay.status, JSON.stringify(replayed)).toBe(202);
    expect(replayed).toMatchObject({ eventId, replayOf: dead.id, status: 'pending' });
    const delivered = await waitFor('the replay delivered', async () => (await deliveries()).find((d) => d.id === replayed.id && d.status === 'delivered') ?? null, 20_000);
    expect(delivered.attemptLog).toHaveLength(1);
    const last = received.filter((r) => r.path === '/fail' && r.headers['cairn-event-id'] === eventId).at(-1)!;
    expect(last.headers['cairn-delivery-id']).toBe(replayed.id);
    expect(verifySignatureHeader(hook.secret, String(last.headers['cairn-signature']), last.body)).toMatchObject({ ok: true });
    expect(last.body).toBe(failedPosts[0]!.body);
    // The dead one stays dead, on the record.
    expect((await deliveries()).find((d) => d.id === dead.id)?.status).toBe('dead');
  });

  it('the delivery log is not evidence: the run chains hold no webhook event', async () => {
    const runs = (await (await stack.api('/v1/runs')).json()) as { items: { runId: string }[] };
    for (const { runId } of runs.items) {
      for (const receipt of await chainOf(runId)) expect(String(receipt.type)).not.toMatch(/webhook|deliver/);
    }
  });
});
