import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestStack } from './stack.harness.js';
import type { ApiKeyScope } from '@cairn/contracts';

/*
 * Requests are rate-limited per API key, on REST and on MCP, on one isolated stack whose limits are
 * tuned small (a burst of 20 REST requests and 8 MCP requests per key, one token back every 5 s):
 * a key past its burst is answered 429 E_RATE_LIMITED with Retry-After — by the REST gateway, by
 * the MCP endpoint, and inside an MCP tool call that the REST gateway refused — while every other
 * key goes on as before, and the limited key is served again once Retry-After has passed.
 */

const REST_BURST = 20;
const MCP_BURST = 8;
const PER_SECOND = 0.2;

let stack: TestStack;
let mcpUrl = '';

/** The one place this suite mints keys (see secrets-governance.e2e.spec.ts). */
function mintKey(scopes: ApiKeyScope[]): Promise<{ id: string; key: string }> {
  return stack.mintScopedKey('default', scopes);
}

const READ_WRITE: ApiKeyScope[] = ['runs:read', 'runs:write'];
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function get(key: string, path: string): Promise<{ status: number; retryAfter: string | null; body: Record<string, unknown> }> {
  const response = await fetch(`${stack.url}${path}`, { headers: { authorization: `Bearer ${key}` } });
  return { status: response.status, retryAfter: response.headers.get('retry-after'), body: (await response.json()) as Record<string, unknown> };
}

const INITIALIZE = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } };

/** One JSON-RPC message to the MCP endpoint, as a client without the SDK sends it. */
async function mcpPost(key: string, message: unknown, sessionId?: string): Promise<{ status: number; retryAfter: string | null; sessionId: string | null; text: string }> {
  const response = await fetch(mcpUrl, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${key}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      ...(sessionId === undefined ? {} : { 'mcp-session-id': sessionId, 'mcp-protocol-version': '2025-06-18' }),
    },
    body: JSON.stringify(message),
  });
  return { status: response.status, retryAfter: response.headers.get('retry-after'), sessionId: response.headers.get('mcp-session-id'), text: await response.text() };
}

beforeAll(async () => {
  stack = await TestStack.create('rate-limit', {
    CAIRN_GATEWAY_RATE_LIMIT_BURST: String(REST_BURST),
    CAIRN_GATEWAY_RATE_LIMIT_PER_SECOND: String(PER_SECOND),
    CAIRN_MCP_RATE_LIMIT_BURST: String(MCP_BURST),
    CAIRN_MCP_RATE_LIMIT_PER_SECOND: String(PER_SECOND),
  });
  const up = await stack.cairn(['up', '--no-setup', '--json', '--timeout', '90']);
  if (up.code !== 0) throw new Error(`cairn up failed (${up.code}):\n${up.stdout}\n${up.stderr}\n${await stack.logs()}`);
  const result = JSON.parse(up.stdout) as { url: string; apiKey: string; mcpUrl: string | null };
  stack.url = result.url;
  stack.apiKey = result.apiKey;
  mcpUrl = result.mcpUrl ?? '';
  expect(mcpUrl).toMatch(/\/mcp$/);
});

afterAll(async () => {
  await stack?.dispose();
});

describe('REST: a token bucket per key', () => {
  it('answers a key past its burst 429 E_RATE_LIMITED with Retry-After; another key is served; the first again after Retry-After', async () => {
    const flooder = await mintKey(READ_WRITE);
    const bystander = await mintKey(READ_WRITE);
    const answers = await Promise.all(Array.from({ length: REST_BURST + 10 }, () => get(flooder.key, '/v1/runs?limit=1')));
    const served = answers.filter((a) => a.status === 200);
    const limited = answers.filter((a) => a.status === 429);
    expect(served.length + limited.length).toBe(answers.length);
    // The burst, and at most a token or two refilled while the flood was answered.
    expect(served.length).toBeGreaterThanOrEqual(REST_BURST);
    expect(served.length).toBeLessThanOrEqual(REST_BURST + 2);
    expect(limited.length).toBeGreaterThanOrEqual(8);
    for (const answer of limited) {
      expect(answer.body).toMatchObject({ code: 'E_RATE_LIMITED', details: { retryAfterSeconds: expect.any(Number) as number } });
      const seconds = Number(answer.retryAfter);
      expect(Number.isInteger(seconds) && seconds >= 1 && seconds <= 1 / PER_SECOND).toBe(true);
      expect(answer.body.details).toEqual({ retryAfterSeconds: seconds });
    }

    // Another key, at once: untouched by the first key's flood. Public routes take no key and no token.
    expect((await get(bystander.key, '/v1/runs?limit=1')).status).toBe(200);
    expect((await fetch(`${stack.url}/v1/health`)).status).toBe(200);

    // Told when to come back, and served then.
    const last = await get(flooder.key, '/v1/runs?limit=1');
    expect(last.status).toBe(429);
    await sleep(Number(last.retryAfter) * 1000 + 200);
    expect((await get(flooder.key, '/v1/runs?limit=1')).status).toBe(200);
  });
});

describe('MCP: a token bucket per key at the endpoint, and REST’s limit inside a tool call', () => {
  it('answers a key past its burst 429 E_RATE_LIMITED with Retry-After (JSON-RPC data.code); another key opens its session', async () => {
    const flooder = await mintKey(READ_WRITE);
    const bystander = await mintKey(READ_WRITE);
    const opened = await mcpPost(flooder.key, INITIALIZE);
    expect(opened.status, opened.text).toBe(200);
    const session = opened.sessionId!;
    expect((await mcpPost(flooder.key, { jsonrpc: '2.0', method: 'notifications/initialized' }, session)).status).toBe(202);
    const answers = await Promise.all(Array.from({ length: MCP_BURST + 4 }, (_, i) => mcpPost(flooder.key, { jsonrpc: '2.0', id: 10 + i, method: 'tools/list' }, session)));
    const limited = answers.filter((a) => a.status === 429);
    expect(answers.filter((a) => a.status === 200).length).toBeLessThanOrEqual(MCP_BURST - 2 + 1);
    expect(limited.length).toBeGreaterThanOrEqual(4);
    for (const answer of limited) {
      expect(Number(answer.retryAfter)).toBeGreaterThanOrEqual(1);
      expect(JSON.parse(answer.text)).toMatchObject({ error: { data: { code: 'E_RATE_LIMITED', details: { retryAfterSeconds: Number(answer.retryAfter) } } } });
    }
    const theirs = await mcpPost(bystander.key, INITIALIZE);
    expect(theirs.status, theirs.text).toBe(200);
  });

  it('a tool call the REST gateway refuses for the key’s limit is a tool error E_RATE_LIMITED saying when to retry; a session is not opened on a limited key', async () => {
    const agent = await mintKey(READ_WRITE);
    const client = new Client({ name: 'cairn-e2e', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(mcpUrl), { requestInit: { headers: { authorization: `Bearer ${agent.key}` } } }));
    try {
      // The key's REST budget spent elsewhere (say, by a script sharing it).
      await Promise.all(Array.from({ length: REST_BURST + 2 }, () => get(agent.key, '/v1/runs?limit=1')));
      const result = (await client.callTool({ name: 'run_status', arguments: { runId: 'run_nonesuch' } })) as { isError?: boolean; structuredContent?: { error?: Record<string, unknown> } };
      expect(result.isError).toBe(true);
      expect(result.structuredContent?.error).toMatchObject({ code: 'E_RATE_LIMITED', details: { retryAfterSeconds: expect.any(Number) as number }, hint: expect.stringContaining('retryAfterSeconds') as string });
      // A new session for the same key needs a key check upstream, which the limit refuses too: 429, not an outage.
      const refused = await mcpPost(agent.key, INITIALIZE);
      expect(refused.status, refused.text).toBe(429);
      expect(Number(refused.retryAfter)).toBeGreaterThanOrEqual(1);
      expect(JSON.parse(refused.text)).toMatchObject({ error: { data: { code: 'E_RATE_LIMITED' } } });
    } finally {
      await client.close();
    }
  });
});
