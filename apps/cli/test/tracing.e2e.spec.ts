import { readFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestStack } from './stack.harness.js';
import type { RunOutcome } from './stack.harness.js';

/*
 * One run is one trace (ADR 0031): a stack whose every process exports OTLP/HTTP (JSON) to a
 * receiver of this test's own on loopback, one `cairn run --wait`, and the trace that `cairn run`
 * began holds spans of every service that handled the run — correctly parented, one root — while
 * no receipt holds the trace context and the chain verifies; the trace id REST and `cairn status`
 * show for the run is that trace's. The batch timer is an hour and a batch as large as the queue: a
 * span arrives only through the flush each process makes on its way out (`cairn run` as it exits,
 * every service on `cairn down`'s SIGTERM). The gateways' server spans are named by route.
 */

interface ReceivedSpan {
  service: string;
  instance: string;
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  kind: number;
  attributes: Record<string, unknown>;
}

const spans: ReceivedSpan[] = [];
let badRequests = 0;
let receiver: Server;
let stack: TestStack;
let mcpUrl = '';

/** OTLP/JSON ids are hex; a base64 one (protobuf-style JSON) is turned into hex. */
function hexId(value: unknown): string {
  if (typeof value !== 'string' || value === '') return '';
  return /^[0-9a-f]+$/i.test(value) && (value.length === 32 || value.length === 16) ? value.toLowerCase() : Buffer.from(value, 'base64').toString('hex');
}

function attributesOf(list: unknown): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const entry of Array.isArray(list) ? (list as { key: string; value: Record<string, unknown> }[]) : []) {
    out[entry.key] = Object.values(entry.value ?? {})[0];
  }
  return out;
}

function collect(body: unknown): void {
  for (const resourceSpans of (body as { resourceSpans?: unknown[] }).resourceSpans ?? []) {
    const { resource, scopeSpans } = resourceSpans as { resource?: { attributes?: unknown }; scopeSpans?: { spans?: unknown[] }[] };
    const resourceAttributes = attributesOf(resource?.attributes);
    for (const scope of scopeSpans ?? []) {
      for (const raw of scope.spans ?? []) {
        const span = raw as { traceId: string; spanId: string; parentSpanId?: string; name: string; kind?: number; attributes?: unknown };
        spans.push({
          service: String(resourceAttributes['service.name']),
          instance: String(resourceAttributes['service.instance.id'] ?? resourceAttributes['service.name']),
          traceId: hexId(span.traceId),
          spanId: hexId(span.spanId),
          parentSpanId: hexId(span.parentSpanId),
          name: span.name,
          kind: span.kind ?? 0,
          attributes: attributesOf(span.attributes),
        });
      }
    }
  }
}

async function startReceiver(): Promise<string> {
  receiver = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      try {
        if (request.method !== 'POST' || request.url !== '/v1/traces' || !String(request.headers['content-type']).includes('application/json')) throw new Error('not OTLP/JSON');
        collect(JSON.parse(Buffer.concat(chunks).toString('utf8')));
        response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      } catch {
        badRequests += 1;
        response.writeHead(400).end();
      }
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
}

/** The services every run goes through, each its own process (the CLI began the trace). */
const HANDLERS = ['cairn-cli', 'cairn-gateway', 'cairn-intake', 'cairn-policy', 'cairn-scheduler', 'cairn-runtime', 'cairn-kernel', 'cairn-verifier', 'cairn-grader', 'cairn-projector'];

beforeAll(async () => {
  const endpoint = await startReceiver();
  stack = await TestStack.create('tracing', {
    OTEL_TRACES_EXPORTER: 'otlp',
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
    OTEL_EXPORTER_OTLP_ENDPOINT: endpoint,
    // Nothing is sent before a process exits: no timer fires, no batch fills.
    OTEL_BSP_SCHEDULE_DELAY: '3600000',
    OTEL_BSP_MAX_QUEUE_SIZE: '100000',
    OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '100000',
  });
  // Named once for the whole stack by `cairn up`'s caller: each process must still name itself.
  stack.env.OTEL_SERVICE_NAME = 'not-the-name-of-any-process';
  const up = (await stack.up()) as { mcpUrl?: string | null };
  mcpUrl = up.mcpUrl ?? '';
  delete stack.env.OTEL_SERVICE_NAME;
}, 240_000);

afterAll(async () => {
  await stack?.dispose();
  await new Promise((resolve) => receiver?.close(resolve));
});

describe('one trace per run', () => {
  it('follows a run from `cairn run` through every service to its seal, each span parented, the receipts untouched', async () => {
    const path = await stack.specFile('traced', { name: 'traced', image: 'cairn/sandbox-busybox:1', caps: { wallSeconds: 20, memoryMiB: 32, pids: 32, diskMiB: 8, cpus: 0.5 }, network: 'none', steps: [{ argv: ['echo', 'hi'] }] });
    const cli = await stack.cairn(['run', path, '--wait', '--json']);
    let outcome: RunOutcome;
    try {
      outcome = JSON.parse(cli.stdout) as RunOutcome;
    } catch {
      throw new Error(`cairn run printed no JSON (exit ${cli.code}):\n${cli.stdout}\n${cli.stderr}\n${await stack.logs()}`);
    }
    expect(outcome).toMatchObject({ state: 'SEALED' });
    const runId = outcome.runId;

    // `cairn run` exported its span as it exited (the flush on exit; no timer): it is here already,
    // and nothing of any service yet — they have not exited.
    const root = spans.find((s) => s.service === 'cairn-cli' && s.name === 'cairn run' && s.attributes['cairn.chain_id'] === runId);
    expect(root, `the CLI exported its span before it exited; seen: ${[...new Set(spans.map((s) => `${s.service}:${s.name}`))].slice(0, 60).join(', ')}; cli stderr: ${cli.stderr.slice(0, 2000)}`).toBeDefined();
    const traceId = root!.traceId;
    expect(traceId).toMatch(/^[0-9a-f]{32}$/);
    expect([...new Set(spans.map((s) => s.service))]).toEqual(['cairn-cli']);

    // No receipt body changed: nothing of the trace context is in the chain, and it verifies.
    await stack.expectCleanAndVerifiable(runId);
    const chain = await readFile(join(stack.home, `${runId}.jsonl`), 'utf8');
    expect(chain).not.toContain(traceId);
    expect(chain.toLowerCase()).not.toContain('traceparent');

    // The run's trace id as the projection keeps it is the trace of those spans: REST, the list, `cairn status`.
    expect((await stack.getRun(runId)).traceId).toBe(traceId);
    const list = (await (await stack.api('/v1/runs?limit=50')).json()) as { items: { runId: string; traceId?: string }[] };
    expect(list.items.find((item) => item.runId === runId)?.traceId).toBe(traceId);
    const status = await stack.cairn(['status', runId, '--json']);
    expect(status.code, status.stderr).toBe(0);
    expect(JSON.parse(status.stdout)).toMatchObject({ ok: true, runId, traceId });
    const text = await stack.cairn(['status', runId]);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout.split('\n').filter((line) => line.startsWith('trace'))).toEqual([`trace    ${traceId}`]);

    // An MCP request, for the MCP gateway's server span.
    expect(mcpUrl).toMatch(/\/mcp$/);
    const mcp = await fetch(mcpUrl, {
      method: 'POST',
      headers: { authorization: `Bearer ${stack.apiKey}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'tracing-e2e', version: '1' } } }),
    });
    expect(mcp.status).toBe(200);
    await mcp.body?.cancel();
    expect([...new Set(spans.map((s) => s.service))], 'no service sent a span before it was stopped').toEqual(['cairn-cli']);

    // `cairn down`: every process stops on SIGTERM, and flushes on its way out (at most 3 s each).
    const down = await stack.cairn(['down', '--json', '--timeout', '20']);
    expect(down.code, down.stderr).toBe(0);
    const stopped = (JSON.parse(down.stdout) as { stopped: { service: string; signal: string }[] }).stopped;
    expect(stopped.filter((s) => s.signal !== 'SIGTERM'), 'every process stopped on SIGTERM, none needed SIGKILL').toEqual([]);
    expect(stopped.length).toBeGreaterThanOrEqual(HANDLERS.length);

    // Everything is here now, without waiting: each process sent its spans before it exited.
    const trace = spans.filter((s) => s.traceId === traceId);
    const services = [...new Set(trace.map((s) => s.service))].sort();
    expect(services).toEqual(expect.arrayContaining(HANDLERS));
    expect(services).not.toContain('not-the-name-of-any-process');
    expect(new Set(trace.map((s) => s.instance)).size).toBeGreaterThanOrEqual(9);
    // One root, and every other span's parent is in the trace.
    const ids = new Set(trace.map((s) => s.spanId));
    expect(ids.size).toBe(trace.length);
    expect(trace.filter((s) => s.parentSpanId === '')).toEqual([root]);
    expect(trace.filter((s) => s.parentSpanId !== '' && !ids.has(s.parentSpanId)).map((s) => `${s.service} ${s.name}`)).toEqual([]);
    expect(trace.some((s) => s.name === 'projector project sealed')).toBe(true);

    // A span per hop of each kind the design names.
    const named = (service: string, name: string) => trace.some((s) => s.service === service && s.name === name);
    expect(named('cairn-policy', 'policy handle run.submitted')).toBe(true);
    expect(named('cairn-intake', 'append run.submitted')).toBe(true);
    expect(named('cairn-grader', 'append run.sealed') || named('cairn-grader', 'append batch')).toBe(true);
    expect(named('cairn-runtime', 'docker exec')).toBe(true);
    expect(named('cairn-runtime', 'docker remove')).toBe(true);
    expect(trace.some((s) => s.service === 'cairn-projector' && (s.attributes['db.system.name'] ?? s.attributes['db.system']) === 'postgresql'), 'the projector queried PostgreSQL in the trace').toBe(true);
    // The receipt that caused a reaction is its parent: policy's delivery continues intake's append.
    const appendSubmitted = trace.find((s) => s.service === 'cairn-intake' && s.name === 'append run.submitted')!;
    expect(trace.find((s) => s.name === 'policy handle run.submitted')!.parentSpanId).toBe(appendSubmitted.spanId);
    expect(chain).not.toContain(appendSubmitted.spanId);
    expect(badRequests).toBe(0);

    // The gateways' server spans are named by route (`<METHOD> <template>`, http.route), never by a raw URL:
    // the submit in the run's trace, the reads after it in traces of their own, the MCP request.
    const served = (service: string) => spans.filter((s) => s.service === service && s.kind === 2);
    const inRun = trace.filter((s) => s.service === 'cairn-gateway' && s.kind === 2);
    const submit = inRun.filter((s) => s.name === 'POST /v1/runs');
    expect(submit, `the gateway served the REST submit in the trace; its server spans there: ${inRun.map((s) => s.name).join(', ')}`).toHaveLength(1);
    expect(submit[0]!.attributes).toMatchObject({ 'http.route': '/v1/runs', 'http.request.method': 'POST' });
    expect(Number(submit[0]!.attributes['http.response.status_code'])).toBe(202);
    // What `--wait` asked while it followed the run is named by its route too.
    expect(inRun.filter((s) => !/^[A-Z]+ \/v1\/[a-z/:]+$/.test(s.name)).map((s) => s.name)).toEqual([]);
    const read = served('cairn-gateway').filter((s) => s.name === 'GET /v1/runs/:id');
    expect(read.length).toBeGreaterThanOrEqual(1);
    expect(read[0]!.attributes).toMatchObject({ 'http.route': '/v1/runs/:id' });
    expect(served('cairn-gateway').some((s) => s.name === 'GET /v1/runs' && s.attributes['http.route'] === '/v1/runs')).toBe(true);
    expect(served('cairn-gateway').filter((s) => s.name.includes(runId)).map((s) => s.name)).toEqual([]);
    const mcpSpans = served('cairn-mcp-gateway');
    expect(mcpSpans.map((s) => s.name)).toContain('POST /mcp');
    expect(mcpSpans.find((s) => s.name === 'POST /mcp')!.attributes).toMatchObject({ 'http.route': '/mcp' });
  }, 180_000);
});
