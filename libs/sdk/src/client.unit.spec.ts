import { createHash } from 'node:crypto';
import { createServer } from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { API_ROUTES, isCairnError } from '@cairn/contracts';
import type { Run } from '@cairn/contracts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Cairn, readNdjson, routePath, SDK_OPERATIONS, statusOf } from './client.js';
import type { CairnOptions } from './client.js';

const sha = (bytes: Uint8Array | string) => createHash('sha256').update(bytes).digest('hex');
const b64 = (text: string) => Buffer.from(text).toString('base64');

async function collect<T>(source: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of source) out.push(item);
  return out;
}

function stream(...parts: (string | Uint8Array)[]): ReadableStream<Uint8Array> {
  return new ReadableStream<Uint8Array>({
    start(controller) {
      for (const part of parts) controller.enqueue(typeof part === 'string' ? new TextEncoder().encode(part) : part);
      controller.close();
    },
  });
}

interface Asked {
  method: string;
  url: string;
  headers: Record<string, string>;
  body: unknown;
}

/** A client whose every request is answered by `answer` (no network), recording what was asked. */
function canned(answer: (asked: Asked, n: number) => Response, options: Partial<CairnOptions> = {}): { cairn: Cairn; asked: Asked[] } {
  const asked: Asked[] = [];
  const fetcher = (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const entry: Asked = { method: init?.method ?? 'GET', url: input instanceof Request ? input.url : input.toString(), headers: { ...(init?.headers as Record<string, string>) }, body: init?.body };
    asked.push(entry);
    return Promise.resolve(answer(entry, asked.length));
  };
  return { cairn: new Cairn({ url: 'http://gw.test/', apiKey: 'cairn_testtest_key', fetch: fetcher, ...options }), asked };
}

const json = (body: unknown, status = 200, headers: Record<string, string> = {}) => new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json', ...headers } });

const RUN: Run = {
  runId: 'run_a1',
  tenant: 'acme',
  name: 'hello',
  state: 'SEALED',
  errorCode: null,
  verdict: 'SUPPORTS',
  score: 1,
  maxScore: 1,
  upperBound: 1,
  createdAt: '2026-01-01T00:00:00.000Z',
  updatedAt: '2026-01-01T00:00:01.000Z',
  eventCount: 12,
  headHash: 'c'.repeat(64),
  sealed: true,
};

const SUMMARY = {
  execId: 'exec_1',
  exitCode: 3,
  stdoutBytes: 6,
  stderrBytes: 4,
  stdoutSha256: 'a'.repeat(64),
  stderrSha256: 'b'.repeat(64),
  truncated: false,
  durationMs: 12,
  limitHit: null,
  errorCode: null,
  seq: 7,
  sandboxState: 'READY',
};

function ndjson(lines: unknown[], split = 5): Response {
  const text = lines.map((line) => `${JSON.stringify(line)}\n`).join('');
  const pieces: string[] = [];
  for (let i = 0; i < text.length; i += split) pieces.push(text.slice(i, i + split));
  return new Response(stream(...pieces), { status: 200, headers: { 'content-type': 'application/x-ndjson' } });
}

describe('the route table and the client', () => {
  it('serves every route of the REST contract with a method that exists', () => {
    const cairn = new Cairn({ url: 'http://gw.test', apiKey: null });
    expect(Object.keys(SDK_OPERATIONS).sort()).toEqual(Object.keys(API_ROUTES).sort());
    for (const [routeName, method] of Object.entries(SDK_OPERATIONS)) {
      const [area, name] = method.split('.') as [string, string];
      const api = (cairn as unknown as Record<string, Record<string, unknown>>)[area];
      expect(typeof api?.[name], `${routeName} → ${method}`).toBe('function');
    }
  });

  it('fills paths from the table, each segment encoded; an artifact path after /artifacts/', () => {
    expect(routePath(API_ROUTES.getRun, { id: 'run_a' })).toBe('/v1/runs/run_a');
    expect(routePath(API_ROUTES.revokeSecretGrant, { name: 'TOKEN', grantee: 'key:k1' })).toBe('/v1/secrets/TOKEN/grants/key%3Ak1');
    expect(routePath(API_ROUTES.getRunArtifact, { id: 'run_a', path: '/out/a b/ré%.json' })).toBe('/v1/runs/run_a/artifacts/out/a%20b/r%C3%A9%25.json');
    expect(() => routePath(API_ROUTES.getRun)).toThrow(/needs id/);
  });
});

describe('errors', () => {
  it("are CairnErrors with the gateway's code, details and status; a body that is not the contract's is E_INTERNAL naming the status", async () => {
    const { cairn } = canned((asked) =>
      asked.url.endsWith('run_gone') ? json({ code: 'E_NOT_FOUND', message: 'no run run_gone', details: { runId: 'run_gone' } }, 404) : new Response('bad gateway', { status: 502 }),
    );
    await expect(cairn.runs.get('run_gone')).rejects.toMatchObject({ code: 'E_NOT_FOUND', message: 'no run run_gone', details: { runId: 'run_gone', status: 404 } });
    await expect(cairn.runs.get('run_broken')).rejects.toMatchObject({ code: 'E_INTERNAL', message: expect.stringContaining('HTTP 502') as string });
  });

  it('refuse bad input before any request (E_INPUT naming the field)', async () => {
    const { cairn, asked } = canned(() => json({}));
    await expect(cairn.runs.get('not a run')).rejects.toMatchObject({ code: 'E_INPUT' });
    await expect(cairn.runs.submit({ name: 'x', steps: [{ argv: 'echo hi' }] })).rejects.toMatchObject({ code: 'E_INPUT', details: { issues: [{ path: 'steps[0].argv' }] } });
    await expect(cairn.sandboxes.exec('sbx_a', { argv: ['ls'], workdir: '/proc/self' })).rejects.toMatchObject({ code: 'E_INPUT' });
    await expect(cairn.sandboxes.readFile('sbx_a', '/work/../etc/passwd')).rejects.toMatchObject({ code: 'E_INPUT' });
    await expect(cairn.secrets.put('lower', 'a value long enough')).rejects.toMatchObject({ code: 'E_INPUT' });
    await expect(cairn.keys.create({ scopes: [] })).rejects.toMatchObject({ code: 'E_INPUT' });
    expect(asked).toEqual([]);
  });

  it("tell the HTTP status a gateway answered with (statusOf), none for an error no gateway answered", async () => {
    const { cairn } = canned((asked) => (asked.url.includes('/v1/sandboxes') ? new Response('Cannot GET /v1/sandboxes', { status: 404 }) : json({ code: 'E_FORBIDDEN', message: 'lacks admin' }, 403)));
    const forbidden: unknown = await cairn.tenants.list().catch((error: unknown) => error);
    expect(forbidden).toMatchObject({ code: 'E_FORBIDDEN' });
    expect(statusOf(forbidden)).toBe(403);
    // A route the gateway does not serve, answered without the contract's body: still its status.
    const absent: unknown = await cairn.sandboxes.list().catch((error: unknown) => error);
    expect(absent).toMatchObject({ code: 'E_INTERNAL' });
    expect(statusOf(absent)).toBe(404);
    expect(statusOf(await cairn.runs.get('not a run').catch((error: unknown) => error))).toBeUndefined();
    expect(statusOf(new Error('plain'))).toBeUndefined();
  });

  it('calls onError with each error answer (a page signs out on E_UNAUTHORIZED)', async () => {
    const seen: string[] = [];
    const { cairn } = canned(() => json({ code: 'E_UNAUTHORIZED', message: 'unknown key' }, 401), { onError: (error) => seen.push(error.code) });
    await expect(cairn.runs.list()).rejects.toMatchObject({ code: 'E_UNAUTHORIZED' });
    expect(seen).toEqual(['E_UNAUTHORIZED']);
  });
});

describe('Retry-After', () => {
  const limited = () => json({ code: 'E_RATE_LIMITED', message: 'slow down', details: { retryAfterSeconds: 0 } }, 429, { 'retry-after': '0' });
  const capacity = () => json({ code: 'E_UNAVAILABLE', message: 'no room now' }, 503, { 'retry-after': '0' });

  it('sends a 429 again after the wait, up to `retries` times, then throws it', async () => {
    const { cairn, asked } = canned((_asked, n) => (n < 3 ? limited() : json(RUN)));
    expect(await cairn.runs.get('run_a1')).toEqual(RUN);
    expect(asked.length).toBe(3);
    const never = canned(() => limited(), { retries: 1 });
    await expect(never.cairn.runs.get('run_a1')).rejects.toMatchObject({ code: 'E_RATE_LIMITED', details: { retryAfterSeconds: 0, status: 429 } });
    expect(never.asked.length).toBe(2);
    const off = canned(() => limited(), { retries: 0 });
    await expect(off.cairn.runs.get('run_a1')).rejects.toMatchObject({ code: 'E_RATE_LIMITED' });
    expect(off.asked.length).toBe(1);
  });

  it('retries a 503 with Retry-After only for a request that is safe to repeat; never a wait longer than allowed', async () => {
    const get = canned((_asked, n) => (n === 1 ? capacity() : json(RUN)));
    expect(await get.cairn.runs.get('run_a1')).toEqual(RUN);
    // A sandbox create with an Idempotency-Key may be sent again (capacity's "come back later")…
    const view = { id: 'sbx_a' };
    const keyed = canned((_asked, n) => (n === 1 ? capacity() : json({ message: 'not a sandbox', ...view }, 400)));
    await expect(keyed.cairn.sandboxes.create({}, { idempotencyKey: 'k-1' })).rejects.toMatchObject({ code: 'E_INTERNAL' });
    expect(keyed.asked.length).toBe(2);
    // …an exec may not: it could have run.
    const exec = canned(() => capacity());
    await expect(exec.cairn.sandboxes.exec('sbx_a', ['true'])).rejects.toMatchObject({ code: 'E_UNAVAILABLE' });
    expect(exec.asked.length).toBe(1);
    const far = canned(() => json({ code: 'E_RATE_LIMITED', message: 'later' }, 429, { 'retry-after': '3600' }));
    await expect(far.cairn.runs.get('run_a1')).rejects.toMatchObject({ code: 'E_RATE_LIMITED' });
    expect(far.asked.length).toBe(1);
  });

  it('surfaces a 503 E_CAPACITY create as it came: at once without a key, after `retries` more tries with one', async () => {
    const full = () => json({ code: 'E_CAPACITY', message: 'no worker has room', details: { resource: 'memory', retryAfterSeconds: 0 } }, 503, { 'retry-after': '0' });
    const once = canned(() => full());
    await expect(once.cairn.sandboxes.create({})).rejects.toMatchObject({ code: 'E_CAPACITY', details: { resource: 'memory', status: 503 } });
    expect(once.asked.length).toBe(1);
    const keyed = canned(() => full());
    await expect(keyed.cairn.sandboxes.create({ waitSeconds: 0 }, { idempotencyKey: 'k-2' })).rejects.toMatchObject({ code: 'E_CAPACITY', details: { resource: 'memory' } });
    expect(keyed.asked.length).toBe(3);
    const off = canned(() => full(), { retries: 0 });
    await expect(off.cairn.sandboxes.create({}, { idempotencyKey: 'k-3' })).rejects.toMatchObject({ code: 'E_CAPACITY' });
    expect(off.asked.length).toBe(1);
  });
});

describe('answers held to the contracts', () => {
  it('drops fields a newer gateway adds (tolerant, the default) and refuses them when strict', async () => {
    const newer = { ...RUN, priority: 'high' };
    expect(await canned(() => json(newer)).cairn.runs.get('run_a1')).toEqual(RUN);
    await expect(canned(() => json(newer), { validation: 'strict' }).cairn.runs.get('run_a1')).rejects.toMatchObject({
      code: 'E_INTERNAL',
      message: expect.stringContaining('unknown field priority') as string,
    });
  });

  it('refuses an answer whose known fields are wrong: a state the contracts do not name, a missing field', async () => {
    await expect(canned(() => json({ ...RUN, state: 'DONE' })).cairn.runs.get('run_a1')).rejects.toMatchObject({ code: 'E_INTERNAL', message: expect.stringContaining('state') as string });
    const { headHash: _gone, ...missing } = RUN;
    await expect(canned(() => json(missing)).cairn.runs.get('run_a1')).rejects.toMatchObject({ code: 'E_INTERNAL', message: expect.stringContaining('headHash') as string });
  });

  it('passes receipts through as the very objects that came (their hashes still verify), checking their envelope', async () => {
    const receipt = { v: 1, seq: 1, run_id: 'run_a1', tenant: 'acme', type: 'run.made_up', actor: 'intake', ts: '2026-01-01T00:00:00.000Z', causation: null, extra: { b: 2, a: 1 }, prev_hash: '0'.repeat(64), hash: 'd'.repeat(64) };
    const page = await canned(() => json({ items: [receipt], nextAfter: null })).cairn.runs.events('run_a1');
    expect(JSON.stringify(page.items[0])).toBe(JSON.stringify(receipt));
    await expect(canned(() => json({ items: [{ ...receipt, hash: 'nope' }], nextAfter: null })).cairn.runs.events('run_a1')).rejects.toMatchObject({ code: 'E_INTERNAL' });
    // Strict: a receipt must also match its type's contract.
    await expect(canned(() => json({ items: [receipt], nextAfter: null }), { validation: 'strict' }).cairn.runs.events('run_a1')).rejects.toMatchObject({ code: 'E_INTERNAL' });
  });
});

describe('bytes read back', () => {
  const bytes = Uint8Array.from([0, 1, 2, 255, 10]);

  it('are checked against X-Cairn-Sha256 and the sha256 the caller expects', async () => {
    const good = canned(() => new Response(bytes, { headers: { 'x-cairn-sha256': sha(bytes), 'content-length': '5', 'content-type': 'application/octet-stream' } }));
    expect(await good.cairn.runs.stdout('run_a1', 0)).toEqual({ bytes, sha256: sha(bytes), contentType: 'application/octet-stream', seq: null });
    expect(good.asked[0]?.url).toBe('http://gw.test/v1/runs/run_a1/steps/0/stdout');
    await expect(good.cairn.runs.stdout('run_a1', 0, { expectedSha256: 'e'.repeat(64) })).rejects.toMatchObject({ code: 'E_INTERNAL', details: { reason: 'sha256_mismatch' } });
    const lying = canned(() => new Response(bytes, { headers: { 'x-cairn-sha256': 'f'.repeat(64) } }));
    await expect(lying.cairn.runs.artifact('run_a1', '/out/r.bin')).rejects.toMatchObject({ code: 'E_INTERNAL', message: expect.stringContaining('hash to') as string });
    const unnamed = canned(() => new Response(bytes));
    await expect(unnamed.cairn.runs.stderr('run_a1', 1)).rejects.toMatchObject({ code: 'E_INTERNAL' });
  });

  it('are refused past maxBytes, announced or not, before they are held whole', async () => {
    const announced = canned(() => new Response(bytes, { headers: { 'x-cairn-sha256': sha(bytes), 'content-length': '5' } }));
    await expect(announced.cairn.runs.stdout('run_a1', 0, { maxBytes: 4 })).rejects.toMatchObject({ code: 'E_TOO_LARGE' });
    const unannounced = canned(() => new Response(stream(bytes.subarray(0, 3), bytes.subarray(3)), { headers: { 'x-cairn-sha256': sha(bytes) } }));
    await expect(unannounced.cairn.runs.stdout('run_a1', 0, { maxBytes: 4 })).rejects.toMatchObject({ code: 'E_TOO_LARGE' });
  });

  it("a sandbox file: written with its path and mode in the query and checked; read with its receipt's seq", async () => {
    const writer = canned(() => json({ path: '/work/a b', bytes: 5, sha256: sha(bytes), seq: 9 }));
    expect(await writer.cairn.sandboxes.writeFile('sbx_abc', '/work/a b', bytes, 0o755)).toEqual({ path: '/work/a b', bytes: 5, sha256: sha(bytes), seq: 9 });
    expect(writer.asked[0]).toMatchObject({ method: 'PUT', url: 'http://gw.test/v1/sandboxes/sbx_abc/files?path=%2Fwork%2Fa+b&mode=0755', headers: { 'content-type': 'application/octet-stream' } });
    const misrecorded = canned(() => json({ path: '/work/a', bytes: 5, sha256: 'a'.repeat(64), seq: 9 }));
    await expect(misrecorded.cairn.sandboxes.writeFile('sbx_abc', '/work/a', bytes)).rejects.toMatchObject({ code: 'E_INTERNAL' });
    const reader = canned(() => new Response(bytes, { headers: { 'x-cairn-sha256': sha(bytes), 'x-cairn-seq': '10' } }));
    expect(await reader.cairn.sandboxes.readFile('sbx_abc', '/out/r.bin')).toMatchObject({ bytes, sha256: sha(bytes), seq: 10 });
  });
});

describe('an exec streamed', () => {
  it('hands each output chunk to its stream in order, then answers the result', async () => {
    const { cairn, asked } = canned(() =>
      ndjson([
        { type: 'output', stream: 'stdout', data: b64('hel') },
        { type: 'output', stream: 'stderr', data: b64('oops') },
        { type: 'output', stream: 'stdout', data: b64('lo\n') },
        { type: 'result', ...SUMMARY },
      ]),
    );
    const seen: [string, string][] = [];
    const summary = await cairn.sandboxes.execStream('sbx_abc', ['sh', '-c', 'x'], (which, chunk) => void seen.push([which, new TextDecoder().decode(chunk)]));
    expect(seen).toEqual([
      ['stdout', 'hel'],
      ['stderr', 'oops'],
      ['stdout', 'lo\n'],
    ]);
    expect(summary).toEqual(SUMMARY);
    expect(asked[0]).toMatchObject({ method: 'POST', url: 'http://gw.test/v1/sandboxes/sbx_abc/exec', headers: { accept: 'application/x-ndjson' } });
  });

  it('an error line is a CairnError with its code; a stream that ends without a result, or a line off the contract, is E_INTERNAL', async () => {
    const failing = canned(() => ndjson([{ type: 'output', stream: 'stdout', data: b64('x') }, { type: 'error', code: 'E_WORKER_LOST', message: 'the worker went away' }]));
    const error = await failing.cairn.sandboxes.execStream('sbx_abc', ['true'], () => undefined).catch((e: unknown) => e);
    expect(isCairnError(error) && error.code).toBe('E_WORKER_LOST');
    const cut = canned(() => ndjson([{ type: 'output', stream: 'stdout', data: b64('x') }]));
    await expect(cut.cairn.sandboxes.execStream('sbx_abc', ['true'], () => undefined)).rejects.toMatchObject({ code: 'E_INTERNAL', message: expect.stringContaining('ended before its result') as string });
    const odd = canned(() => ndjson([{ type: 'output', stream: 'stdin', data: 'x' }]));
    await expect(odd.cairn.sandboxes.execStream('sbx_abc', ['true'], () => undefined)).rejects.toMatchObject({ code: 'E_INTERNAL' });
    const refused = canned(() => json({ code: 'E_CONFLICT', message: 'sandbox sbx_abc is DESTROYED', details: { state: 'DESTROYED' } }, 409));
    await expect(refused.cairn.sandboxes.execStream('sbx_abc', ['true'], () => undefined)).rejects.toMatchObject({ code: 'E_CONFLICT', details: { state: 'DESTROYED', status: 409 } });
  });

  it('reads NDJSON with the shared JSON Lines reader: "\\n" only, blank lines skipped, long lines refused', async () => {
    expect(await collect(readNdjson(stream('{"a":', '1}\n\n{"b"', ':2}\r\n', '{"c":3}'), 'x'))).toEqual([{ a: 1 }, { b: 2 }, { c: 3 }]);
    expect(await collect(readNdjson(stream('{"m":"a\u2028b"}\n'), 'x'))).toEqual([{ m: 'a\u2028b' }]);
    await expect(collect(readNdjson(stream('{"a":1}\nnot json\n'), 'x'))).rejects.toMatchObject({ code: 'E_INTERNAL' });
    await expect(collect(readNdjson(stream('{"a":1}\n', `{"b":"${'x'.repeat(64)}`), 'x', 32))).rejects.toMatchObject({ code: 'E_INTERNAL', details: { line: 2 } });
  });
});

describe('a sandbox session', () => {
  it('is destroyed once when its `await using` scope ends', async () => {
    const view = {
      id: 'sbx_s1',
      tenant: 'acme',
      state: 'READY',
      image: 'cairn/sandbox-busybox:1',
      imageId: null,
      caps: null,
      network: 'none',
      workerId: null,
      createdAt: '2026-01-01T00:00:00.000Z',
      readyAt: null,
      expiresAt: null,
      idleSeconds: null,
      lastActivityAt: '2026-01-01T00:00:00.000Z',
      operations: 0,
      destroyReason: null,
      errorCode: null,
      headSeq: 3,
      headHash: 'a'.repeat(64),
      sealed: false,
    };
    const { cairn, asked } = canned((a) => json(a.method === 'DELETE' ? { ...view, state: 'DESTROYED', destroyReason: 'deleted', sealed: true } : view));
    {
      await using sandbox = await cairn.sandboxes.create({ ttlSeconds: 60 });
      expect(sandbox.id).toBe('sbx_s1');
      await sandbox.destroy();
    }
    expect(asked.map((a) => a.method)).toEqual(['POST', 'DELETE']);
  });
});

/* A tiny stand-in for the gateway's stream: the client's reconnection and resume are what is tested. */
let server: Server;
let url: string;
let streamCalls: string[] = [];

function receipt(seq: number, type: string) {
  return { v: 1, seq, run_id: 'run_x', tenant: 'acme', type, actor: 'intake', ts: '2026-01-01T00:00:00.000Z', causation: null, prev_hash: '0'.repeat(64), hash: String(seq).repeat(64).slice(0, 64) };
}

function handle(req: IncomingMessage, res: ServerResponse): void {
  const path = req.url ?? '';
  if (req.headers.authorization !== 'Bearer cairn_testtest_key') {
    res.writeHead(401, { 'content-type': 'application/json' }).end(JSON.stringify({ code: 'E_UNAUTHORIZED', message: 'no key' }));
    return;
  }
  if (path.startsWith('/v1/sandboxes/sbx_quiet/events/stream')) {
    // An open chain with nothing new: heartbeats only, until the client goes.
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write(': heartbeat\n\n');
    req.on('close', () => res.end());
    return;
  }
  if (path.startsWith('/v1/runs/run_x/events/stream')) {
    streamCalls.push(`${path} ${String(req.headers['last-event-id'])}`);
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    const after = Number(new URL(path, 'http://x').searchParams.get('after'));
    const send = (r: ReturnType<typeof receipt>) => res.write(`id: run_x:${r.seq}\nevent: receipt\ndata: ${JSON.stringify(r)}\n\n`);
    res.write(': heartbeat\n\n');
    // The first connection drops after seq 2; the resumed one repeats seq 2 and sends the rest and the seal.
    if (after === 0) {
      send(receipt(1, 'run.submitted'));
      send(receipt(2, 'policy.decided'));
    } else {
      send(receipt(2, 'policy.decided'));
      send(receipt(3, 'run.sealed'));
    }
    res.end();
    return;
  }
  res.writeHead(500).end();
}

beforeAll(async () => {
  server = createServer(handle);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

describe('following a chain', () => {
  it('reads the SSE stream to run.sealed, resuming after the last seq (Last-Event-ID) when it drops, never repeating a receipt', async () => {
    streamCalls = [];
    const statuses: string[] = [];
    const cairn = new Cairn({ url: `${url}/`, apiKey: 'cairn_testtest_key' });
    const seen = await collect(cairn.runs.follow('run_x', { onStatus: (status) => statuses.push(status) }));
    expect(seen.map((r) => [r.seq, r.type])).toEqual([
      [1, 'run.submitted'],
      [2, 'policy.decided'],
      [3, 'run.sealed'],
    ]);
    expect(streamCalls).toEqual(['/v1/runs/run_x/events/stream?after=0 run_x:0', '/v1/runs/run_x/events/stream?after=2 run_x:2']);
    expect(statuses).toEqual(['live', 'reconnecting', 'live']);
  });

  it('is live as soon as the gateway accepts the stream, before any receipt (a quiet sandbox), and stops quietly when aborted', async () => {
    const statuses: string[] = [];
    const abort = new AbortController();
    const cairn = new Cairn({ url, apiKey: 'cairn_testtest_key' });
    const seen = await collect(
      cairn.chains.follow('sbx_quiet', {
        after: 4,
        signal: abort.signal,
        onStatus: (status) => {
          statuses.push(status);
          abort.abort();
        },
      }),
    );
    expect(seen).toEqual([]);
    expect(statuses).toEqual(['live']);
  });

  it('says who it could not reach, with the hint it was given', async () => {
    const closed = new Cairn({ url: 'http://127.0.0.1:1', apiKey: 'k', unreachableHint: 'start the stack with `cairn up`' });
    await expect(closed.runs.get('run_x')).rejects.toMatchObject({ code: 'E_UNAVAILABLE', message: expect.stringMatching(/127\.0\.0\.1:1.*cairn up/) as string });
  });
});
