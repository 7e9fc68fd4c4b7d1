import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { createServer, request as httpRequest } from 'node:http';
import type { Server as HttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isolatedNames } from '@cairn/config';
import { testNatsUrl, uniqueName } from '@cairn/testing';
import { jetstream } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CAIRN_BIN } from './cli.harness.js';
import { TestStack } from './stack.harness.js';

/*
 * The MCP gateway end to end, driven by the MCP SDK's own Client over both transports, against
 * one isolated stack (`cairn up`, which also serves MCP over Streamable HTTP; `cairn mcp` for
 * stdio) on the real Docker engine, NATS and PostgreSQL. Then the official conformance suite
 * against the HTTP endpoint, through a test-only proxy that adds the key (the suite sends none).
 */

const MCP_MAIN = fileURLToPath(new URL('../../mcp-gateway/dist/main.js', import.meta.url));
const CONFORMANCE = fileURLToPath(new URL('../../../node_modules/@modelcontextprotocol/conformance/dist/index.js', import.meta.url));
const SMALL = { wallSeconds: 20, memoryMiB: 32, pids: 32, diskMiB: 8, cpus: 0.5 };
const ECHO = { name: 'mcp echo', image: 'cairn/sandbox-busybox:1', steps: [{ argv: ['echo', 'hello from mcp'] }], caps: SMALL, network: 'none' };

let stack: TestStack;
let mcpUrl: string;
/** A key of another tenant, minted straight into the stack's key table (only its hash is stored). */
let otherTenantKey: string;

/** A key of the right form that the stack never issued. */
function unknownKey(): string {
  return `cairn_zzzzzzzz_${randomBytes(32).toString('base64url')}`;
}

async function httpClient(key: string): Promise<Client> {
  const client = new Client({ name: 'cairn-e2e', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(mcpUrl), { requestInit: { headers: { authorization: `Bearer ${key}` } } }));
  return client;
}

/** `cairn mcp` as an agent starts it: the CLI from this repository, over stdin/stdout. */
async function stdioClient(key?: string): Promise<{ client: Client; stderr: () => string }> {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [CAIRN_BIN, 'mcp'],
    env: { PATH: process.env.PATH ?? '', ...stack.env, ...(key === undefined ? {} : { CAIRN_API_KEY: key }) },
    stderr: 'pipe',
  });
  const chunks: Buffer[] = [];
  transport.stderr?.on('data', (chunk: Buffer) => chunks.push(chunk));
  const client = new Client({ name: 'cairn-e2e', version: '1.0.0' });
  await client.connect(transport);
  return { client, stderr: () => Buffer.concat(chunks).toString('utf8') };
}

function structured(result: Awaited<ReturnType<Client['callTool']>>): Record<string, unknown> {
  const value = (result as CallToolResult).structuredContent;
  if (value === undefined) throw new Error(`no structured content: ${JSON.stringify(result)}`);
  return value;
}

async function call(client: Client, name: string, args: Record<string, unknown>): Promise<CallToolResult> {
  return (await client.callTool({ name, arguments: args })) as CallToolResult;
}

/** Polls run_status through MCP until the run is sealed. */
async function untilSealed(client: Client, runId: string, timeoutMs = 90_000): Promise<Record<string, unknown>> {
  const deadline = Date.now() + timeoutMs;
  let last: Record<string, unknown> = {};
  while (Date.now() < deadline) {
    const result = await call(client, 'run_status', { runId });
    expect(result.isError).toBeFalsy();
    last = structured(result);
    if (last.sealed === true) return last;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  throw new Error(`run ${runId} not sealed in ${timeoutMs} ms; last ${JSON.stringify(last)}\n${await stack.logs()}`);
}

async function runCount(): Promise<number> {
  const response = await stack.api('/v1/runs?limit=200');
  expect(response.status).toBe(200);
  return ((await response.json()) as { items: unknown[] }).items.length;
}

/** One raw HTTP request with any Host header (fetch does not let a test set Host). */
function rawPost(url: string, headers: Record<string, string>, body: unknown): Promise<{ status: number; body: string }> {
  const target = new URL(url);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      { host: target.hostname, port: target.port, path: target.pathname, method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
      },
    );
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

const ALL_TOOLS = [
  'keys_list',
  'run_artifact',
  'run_events',
  'run_outputs',
  'run_regrade',
  'run_status',
  'run_submit',
  'run_verify',
  'sandbox_create',
  'sandbox_destroy',
  'sandbox_exec',
  'sandbox_list',
  'sandbox_read_file',
  'sandbox_verify',
  'sandbox_write_file',
  'tlog_checkpoint',
  'tlog_consistency_proof',
  'tlog_inclusion_proof',
];

/**
 * The sandbox session the issue asks for, on one connected client: create a sandbox, write a
 * file, run a program on it, read the result, destroy it — every step a receipt on the
 * sandbox's chain, which verifies (here through the tool, and from the evidence log offline).
 */
async function sandboxSession(client: Client, label: string): Promise<void> {
  const created = await call(client, 'sandbox_create', { image: 'cairn/sandbox-busybox:1', caps: { memoryMiB: 64, cpus: 0.5 }, network: 'none', ttlSeconds: 600, idempotencyKey: `${label}-${uniqueName('s')}` });
  expect(created.isError, JSON.stringify(created)).toBeFalsy();
  const { id } = structured(created) as { id: string };
  expect(id).toMatch(/^sbx_/);
  expect(structured(created)).toMatchObject({ state: 'READY' });
  expect(JSON.parse((created.content[0] as { text: string }).text)).toMatchObject({ id, state: 'READY' });

  const input = 'banana\napple\ncherry\n';
  const written = await call(client, 'sandbox_write_file', { sandboxId: id, path: '/work/fruit.txt', content: input });
  expect(written.isError, JSON.stringify(written)).toBeFalsy();
  expect(structured(written)).toMatchObject({ path: '/work/fruit.txt', bytes: input.length, sha256: createHash('sha256').update(input).digest('hex') });
  const script = await call(client, 'sandbox_write_file', { sandboxId: id, path: '/work/sort.sh', content: '#!/bin/sh\nsort "$1" > /out/sorted.txt\necho "sorted $(wc -l < "$1") lines"\n', mode: '0755' });
  expect(script.isError).toBeFalsy();

  const ran = await call(client, 'sandbox_exec', { sandboxId: id, argv: ['/work/sort.sh', '/work/fruit.txt'], env: { LC_ALL: 'C' } });
  expect(ran.isError, JSON.stringify(ran)).toBeFalsy();
  expect(structured(ran)).toMatchObject({ exitCode: 0, stdout: 'sorted 3 lines\n', stderr: '', limitHit: null, sandboxState: 'READY' });
  const failing = structured(await call(client, 'sandbox_exec', { sandboxId: id, argv: ['sh', '-c', 'echo nope >&2; exit 7'] }));
  expect(failing).toMatchObject({ exitCode: 7, stderr: 'nope\n' });

  const read = await call(client, 'sandbox_read_file', { sandboxId: id, path: '/out/sorted.txt' });
  expect(read.isError, JSON.stringify(read)).toBeFalsy();
  expect(structured(read)).toMatchObject({ encoding: 'utf8', content: 'apple\nbanana\ncherry\n', bytes: 20 });

  // Bad input is E_INPUT naming the field, and nothing reaches the sandbox.
  const outside = await call(client, 'sandbox_write_file', { sandboxId: id, path: '/etc/passwd', content: 'x' });
  expect(structured(outside)).toMatchObject({ error: { code: 'E_INPUT', message: expect.stringContaining('path') as string } });
  const shell = await call(client, 'sandbox_exec', { sandboxId: id, argv: 'rm -rf /work' });
  expect(structured(shell)).toMatchObject({ error: { code: 'E_INPUT', message: expect.stringContaining('argv') as string } });
  const missing = await call(client, 'sandbox_read_file', { sandboxId: id, path: '/work/none.txt' });
  expect(structured(missing)).toMatchObject({ error: { code: 'E_NOT_FOUND' } });

  const listed = structured(await call(client, 'sandbox_list', { state: 'READY' })) as { items: { id: string }[] };
  expect(listed.items.map((s) => s.id)).toContain(id);

  // Another tenant's key sees none of it.
  const other = label === 'http' ? await httpClient(otherTenantKey) : (await stdioClient(otherTenantKey)).client;
  try {
    for (const [name, args] of [
      ['sandbox_exec', { sandboxId: id, argv: ['true'] }],
      ['sandbox_read_file', { sandboxId: id, path: '/out/sorted.txt' }],
      ['sandbox_destroy', { sandboxId: id }],
      ['sandbox_verify', { sandboxId: id }],
    ] as const) {
      const refused = await call(other, name, args);
      expect(refused.isError, name).toBe(true);
      expect(structured(refused), name).toMatchObject({ error: { code: 'E_NOT_FOUND' } });
    }
  } finally {
    await other.close();
  }

  const destroyed = await call(client, 'sandbox_destroy', { sandboxId: id });
  expect(structured(destroyed)).toMatchObject({ id, state: 'DESTROYED' });
  const after = await call(client, 'sandbox_exec', { sandboxId: id, argv: ['true'] });
  expect(structured(after)).toMatchObject({ error: { code: 'E_CONFLICT' } });

  // Every step is on the chain, sealed (the grader seals behind the destroy), and the chain verifies.
  let verified = await call(client, 'sandbox_verify', { sandboxId: id });
  for (const end = Date.now() + 15_000; (structured(verified) as { sealed?: boolean }).sealed === false && Date.now() < end; ) {
    await new Promise((resolve) => setTimeout(resolve, 200));
    verified = await call(client, 'sandbox_verify', { sandboxId: id });
  }
  expect(verified.isError, JSON.stringify(verified)).toBeFalsy();
  expect(structured(verified)).toMatchObject({ ok: true, sandboxId: id, sealed: true });
  const response = await stack.api(`/v1/sandboxes/${id}/events?after=0&limit=1000`);
  const types = ((await response.json()) as { items: { type: string }[] }).items.map((r) => r.type);
  expect(types[0]).toBe('sandbox.requested');
  expect(types.filter((t) => t === 'sandbox.file.written')).toHaveLength(2);
  expect(types.filter((t) => t === 'sandbox.exec.completed')).toHaveLength(2);
  expect(types.filter((t) => t === 'sandbox.file.read')).toHaveLength(1);
  expect(types.slice(-2)).toEqual(['sandbox.destroyed', 'run.sealed']);
  expect(structured(verified)).toMatchObject({ count: types.length });
  await stack.expectCleanAndVerifiable(id);
}

const INITIALIZE = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } };

/** The whole agent session the brief asks for, on one connected client. */
async function agentSession(client: Client, label: string): Promise<void> {
  const { tools } = await client.listTools();
  expect(tools.map((t) => t.name).sort()).toEqual(ALL_TOOLS);

  const key = `${label}-${uniqueName('k')}`;
  const submitted = await call(client, 'run_submit', { spec: { ...ECHO, name: `mcp echo over ${label}` }, idempotencyKey: key });
  expect(submitted.isError).toBeFalsy();
  const { runId } = structured(submitted) as { runId: string };
  expect(runId).toMatch(/^run_/);
  // The same key and spec: the same run, nothing new.
  const again = structured(await call(client, 'run_submit', { spec: { ...ECHO, name: `mcp echo over ${label}` }, idempotencyKey: key }));
  expect(again).toMatchObject({ runId, duplicate: true });

  const status = await untilSealed(client, runId);
  expect(status).toMatchObject({ runId, state: 'SEALED', sealed: true, verdict: expect.any(String) as string });

  const all = structured(await call(client, 'run_events', { runId, after: 0, limit: 1000 })) as { items: { seq: number; type: string; argv?: string[] }[]; nextAfter: number | null };
  expect(all.items[0]).toMatchObject({ seq: 1, type: 'run.submitted' });
  expect(all.items.at(-1)?.type).toBe('run.sealed');
  expect(all.items.map((r) => r.seq)).toEqual(all.items.map((_, i) => i + 1));
  expect(all.items.find((r) => r.type === 'step.completed')?.argv).toEqual(['echo', 'hello from mcp']);
  const page = structured(await call(client, 'run_events', { runId, after: 2, limit: 2 })) as { items: { seq: number }[] };
  expect(page.items.map((r) => r.seq)).toEqual([3, 4]);

  const verified = await call(client, 'run_verify', { runId });
  expect(verified.isError).toBeFalsy();
  expect(structured(verified)).toMatchObject({ ok: true, runId, count: all.items.length, headHash: status.headHash, sealed: true });

  // A sealed run is graded once: run_regrade is refused with the REST gateway's code.
  const regrade = await call(client, 'run_regrade', { runId, reason: 'over mcp' });
  expect(regrade.isError).toBe(true);
  expect(structured(regrade)).toMatchObject({ error: { code: 'E_SEALED' } });

  // Bad input: E_INPUT naming the field, and no run is created.
  const before = await runCount();
  const invalid = await call(client, 'run_submit', { spec: { ...ECHO, steps: [{ argv: 'echo hello' }] }, idempotencyKey: `${key}-bad` });
  expect(invalid.isError).toBe(true);
  expect(structured(invalid)).toMatchObject({ error: { code: 'E_INPUT', message: expect.stringContaining('steps') as string } });
  expect(invalid.content[0]).toMatchObject({ type: 'text', text: expect.stringMatching(/^E_INPUT: /) as string });
  const unknownTool = await call(client, 'run_delete', { runId });
  expect(structured(unknownTool)).toMatchObject({ error: { code: 'E_INPUT' } });
  expect(await runCount()).toBe(before);

  // Another tenant's key sees none of it, over the same transport.
  const other = label === 'http' ? await httpClient(otherTenantKey) : (await stdioClient(otherTenantKey)).client;
  try {
    for (const [name, args] of [
      ['run_status', { runId }],
      ['run_events', { runId }],
      ['run_verify', { runId }],
      ['run_regrade', { runId }],
    ] as const) {
      const refused = await call(other, name, args);
      expect(refused.isError, name).toBe(true);
      expect(structured(refused), name).toMatchObject({ error: { code: 'E_NOT_FOUND' } });
    }
  } finally {
    await other.close();
  }
  await stack.expectCleanAndVerifiable(runId);
}

beforeAll(async () => {
  stack = await TestStack.create('mcp-e2e');
  const up = await stack.cairn(['up', '--no-setup', '--json', '--timeout', '90']);
  if (up.code !== 0) throw new Error(`cairn up failed (${up.code}):\n${up.stdout}\n${up.stderr}\n${await stack.logs()}`);
  const result = JSON.parse(up.stdout) as { url: string; apiKey: string; mcpUrl: string | null };
  stack.url = result.url;
  stack.apiKey = result.apiKey;
  expect(result.mcpUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/mcp$/);
  mcpUrl = result.mcpUrl ?? '';
  otherTenantKey = await stack.mintKey('globex', ['runs:read', 'runs:write']);
});

afterAll(async () => {
  await stack?.dispose();
});

describe('MCP over Streamable HTTP (the endpoint cairn up started)', () => {
  it('an agent session: list tools, submit echo, poll to SEALED, read the receipts, verify; E_INPUT and another tenant’s E_NOT_FOUND', async () => {
    const client = await httpClient(stack.apiKey);
    try {
      await agentSession(client, 'http');
    } finally {
      await client.close();
    }
  });

  it('a sandbox session: create, write a file, run a program on it, read the result, destroy; the chain verifies', async () => {
    const client = await httpClient(stack.apiKey);
    try {
      await sandboxSession(client, 'http');
    } finally {
      await client.close();
    }
  });

  it('run_verify never answers ok for a chain that records its own break: a poison message mid-run is E_CHAIN_BROKEN break_recorded, as cairn verify says', async () => {
    const client = await httpClient(stack.apiKey);
    const nc = await connect({ servers: (stack.env.CAIRN_NATS_URL ?? testNatsUrl()).split(',') });
    try {
      const spec = { ...ECHO, name: 'mcp: a poison message mid-run', steps: [{ argv: ['sleep', '5'] }, { argv: ['echo', 'never'] }] };
      const { runId } = structured(await call(client, 'run_submit', { spec, idempotencyKey: uniqueName('poison') })) as { runId: string };
      const events = async () => (structured(await call(client, 'run_events', { runId, after: 0, limit: 1000 })) as { items: { seq: number; type: string }[] }).items;
      await expect.poll(async () => (await events()).some((r) => r.type === 'step.started'), { timeout: 60_000, interval: 200 }).toBe(true);
      // A message on the run's chain that is no receipt (ADR 0033), from a client that may publish there.
      const subject = `${isolatedNames(stack.stackId).CAIRN_EVIDENCE_SUBJECT_PREFIX}.${runId}.step.completed`;
      const ack = await jetstream(nc).publish(subject, '{"type":"step.completed", not json');
      await untilSealed(client, runId);

      const receipts = await events();
      const alert = receipts.find((r) => r.type === 'alert.raised') as { seq: number; severity?: string; error_code?: string; message?: string } | undefined;
      expect(alert).toMatchObject({ severity: 'critical', error_code: 'E_CHAIN_BROKEN', message: expect.stringContaining(`stream seq ${ack.seq}`) as string });
      const verified = await call(client, 'run_verify', { runId });
      expect(verified.isError, JSON.stringify(verified)).toBe(true);
      expect(structured(verified)).toMatchObject({
        error: { code: 'E_CHAIN_BROKEN', message: expect.stringContaining(`records at seq ${alert!.seq} that it was broken: ${alert!.message}`) as string, details: { runId, firstBadSeq: alert!.seq, reason: 'break_recorded', verified: receipts.length } },
      });
      // The CLI, checking the same bundle on its own, gives the same answer.
      const cli = await stack.cairn(['verify', runId, '--json']);
      expect(cli.code).toBe(1);
      expect(JSON.parse(cli.stdout)).toMatchObject({ ok: false, error: { code: 'E_CHAIN_BROKEN', details: { firstBadSeq: alert!.seq, reason: 'break_recorded' } } });
    } finally {
      await nc.close();
      await client.close();
    }
  });

  it('refuses a missing or unknown key (401), another Host or Origin (403), and another key’s session (404)', async () => {
    const noKey = await rawPost(mcpUrl, {}, INITIALIZE);
    expect(noKey.status).toBe(401);
    expect(JSON.parse(noKey.body)).toMatchObject({ error: { data: { code: 'E_UNAUTHORIZED' } } });
    const badKey = await rawPost(mcpUrl, { authorization: `Bearer ${unknownKey()}` }, INITIALIZE);
    expect(badKey.status).toBe(401);
    await expect(httpClient(unknownKey())).rejects.toThrow();

    const auth = { authorization: `Bearer ${stack.apiKey}` };
    const port = new URL(mcpUrl).port;
    const evilHost = await rawPost(mcpUrl, { ...auth, host: `evil.example.com:${port}` }, INITIALIZE);
    expect(evilHost.status).toBe(403);
    expect(JSON.parse(evilHost.body)).toMatchObject({ error: { data: { code: 'E_FORBIDDEN' } } });
    const evilOrigin = await rawPost(mcpUrl, { ...auth, origin: 'http://evil.example.com' }, INITIALIZE);
    expect(evilOrigin.status).toBe(403);
    const fine = await rawPost(mcpUrl, { ...auth, host: `localhost:${port}`, origin: `http://localhost:${port}` }, INITIALIZE);
    expect(fine.status).toBe(200);

    // A session belongs to the key that opened it.
    const transport = new StreamableHTTPClientTransport(new URL(mcpUrl), { requestInit: { headers: auth } });
    const owner = new Client({ name: 'owner', version: '1' });
    await owner.connect(transport);
    try {
      const sessionId = transport.sessionId ?? '';
      expect(sessionId).not.toBe('');
      const stolen = await rawPost(mcpUrl, { authorization: `Bearer ${otherTenantKey}`, 'mcp-session-id': sessionId, 'mcp-protocol-version': '2025-06-18' }, { jsonrpc: '2.0', id: 2, method: 'tools/list' });
      expect(stolen.status).toBe(404);
      expect((await owner.listTools()).tools).toHaveLength(ALL_TOOLS.length);
    } finally {
      await owner.close();
    }
  });
});

describe('MCP over stdio (cairn mcp)', () => {
  it('an agent session: list tools, submit echo, poll to SEALED, read the receipts, verify; E_INPUT and another tenant’s E_NOT_FOUND', async () => {
    const { client, stderr } = await stdioClient();
    try {
      await agentSession(client, 'stdio');
    } catch (error) {
      throw new Error(`${String(error)}\nstderr of cairn mcp:\n${stderr()}`);
    } finally {
      await client.close();
    }
  });

  it('a sandbox session: create, write a file, run a program on it, read the result, destroy; the chain verifies', async () => {
    const { client, stderr } = await stdioClient();
    try {
      await sandboxSession(client, 'stdio');
    } catch (error) {
      throw new Error(`${String(error)}\nstderr of cairn mcp:\n${stderr()}`);
    } finally {
      await client.close();
    }
  });

  it('writes protocol messages only on stdout, and stops when stdin closes', async () => {
    const child = spawn(process.execPath, [CAIRN_BIN, 'mcp'], { env: { PATH: process.env.PATH ?? '', ...stack.env }, stdio: ['pipe', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    child.stdout.on('data', (chunk: Buffer) => out.push(chunk));
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    const lines = [
      INITIALIZE,
      { jsonrpc: '2.0', method: 'notifications/initialized' },
      { jsonrpc: '2.0', id: 2, method: 'tools/list' },
      { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'run_status', arguments: { runId: 'run_nope' } } },
    ];
    child.stdin.write(lines.map((line) => `${JSON.stringify(line)}\n`).join(''));
    const deadline = Date.now() + 20_000;
    while (Buffer.concat(out).toString('utf8').split('\n').filter((l) => l !== '').length < 3 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    child.stdin.end();
    expect(await exited).toBe(0);
    const messages = Buffer.concat(out)
      .toString('utf8')
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => JSON.parse(l) as { jsonrpc: string; id: number; result: Record<string, unknown> });
    expect(messages.map((m) => [m.jsonrpc, m.id])).toEqual([
      ['2.0', 1],
      ['2.0', 2],
      ['2.0', 3],
    ]);
    expect(messages[2]?.result).toMatchObject({ isError: true, structuredContent: { error: { code: 'E_NOT_FOUND' } } });
  });

  it('refuses an unknown key and a missing one before serving anything: exit 1, nothing on stdout', async () => {
    const refused = await runProcess(process.execPath, [CAIRN_BIN, 'mcp'], { ...stack.env, CAIRN_API_KEY: unknownKey() });
    expect(refused.code).toBe(1);
    expect(refused.stdout).toBe('');
    expect(refused.stderr).toContain('E_UNAUTHORIZED');
    // The server itself, with no key at all.
    const missing = await runProcess(process.execPath, [MCP_MAIN], { CAIRN_MCP_TRANSPORT: 'stdio', CAIRN_MCP_UPSTREAM_URL: stack.url });
    expect(missing.code).toBe(1);
    expect(missing.stdout).toBe('');
    expect(missing.stderr).toContain('CAIRN_API_KEY');
  });
});

function runProcess(command: string, args: string[], env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['pipe', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (chunk: Buffer) => out.push(chunk));
    child.stderr.on('data', (chunk: Buffer) => err.push(chunk));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8') }));
  });
}

/**
 * The conformance suite cannot send a key: a loopback proxy adds it and passes everything else
 * through unchanged — the Host and Origin the suite sends included, so the DNS-rebinding
 * scenario still meets the gateway's own checks.
 */
async function keyAddingProxy(target: string, key: string): Promise<{ url: string; server: HttpServer }> {
  const upstream = new URL(target);
  const server = createServer((req, res) => {
    const forward = httpRequest(
      { host: upstream.hostname, port: upstream.port, path: req.url, method: req.method, headers: { ...req.headers, authorization: `Bearer ${key}` } },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    forward.on('error', () => res.destroy());
    res.on('close', () => forward.destroy());
    req.pipe(forward);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}${upstream.pathname}`, server };
}

const SCENARIOS = ['server-initialize', 'ping', 'tools-list', 'tools-call-error', 'dns-rebinding-protection', 'server-sse-multiple-streams'];

describe('the official MCP conformance suite against the HTTP endpoint', () => {
  it.each(SCENARIOS)('%s passes', async (scenario) => {
    const { url, server } = await keyAddingProxy(mcpUrl, stack.apiKey);
    const outDir = await mkdtemp(join(tmpdir(), 'cairn-mcp-conformance-'));
    try {
      const run = await runProcess(process.execPath, [CONFORMANCE, 'server', '--url', url, '--scenario', scenario, '-o', outDir], {});
      const files = await readdir(outDir, { recursive: true });
      const checksFile = files.find((f) => f.endsWith('checks.json'));
      expect(checksFile, `no checks.json:\n${run.stdout}\n${run.stderr}`).toBeDefined();
      const checks = JSON.parse(await readFile(join(outDir, checksFile ?? ''), 'utf8')) as { id: string; status: string; errorMessage?: string }[];
      const failed = checks.filter((c) => c.status === 'FAILURE');
      expect(failed, JSON.stringify(failed)).toEqual([]);
      expect(checks.filter((c) => c.status === 'SUCCESS').length).toBeGreaterThan(0);
      expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);
    } finally {
      await new Promise((resolve) => server.close(resolve));
      await rm(outDir, { recursive: true, force: true });
    }
  });
});
