import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';

/*
 * A process's way out flushes its traces (ADR 0031), for at most 3 s: real processes on the built
 * libraries (`npm run build` first, as for every spawned process), the real SDK exporting OTLP/JSON to
 * a receiver of this test's own. The batch timer is an hour: a span arrives only if the exit flushed it.
 */

const ROOT = fileURLToPath(new URL('../../..', import.meta.url));

interface ReceivedSpan {
  service: string;
  traceId: string;
  spanId: string;
  name: string;
  kind: number;
  attributes: Record<string, unknown>;
}

function attributesOf(list: unknown): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const entry of Array.isArray(list) ? (list as { key: string; value: Record<string, unknown> }[]) : []) out[entry.key] = Object.values(entry.value ?? {})[0];
  return out;
}

function spansOf(body: unknown): ReceivedSpan[] {
  const out: ReceivedSpan[] = [];
  for (const resourceSpans of (body as { resourceSpans?: unknown[] }).resourceSpans ?? []) {
    const { resource, scopeSpans } = resourceSpans as { resource?: { attributes?: unknown }; scopeSpans?: { spans?: unknown[] }[] };
    const service = String(attributesOf(resource?.attributes)['service.name']);
    for (const scope of scopeSpans ?? []) {
      for (const raw of scope.spans ?? []) {
        const span = raw as { traceId: string; spanId: string; name: string; kind?: number; attributes?: unknown };
        out.push({ service, traceId: span.traceId, spanId: span.spanId, name: span.name, kind: span.kind ?? 0, attributes: attributesOf(span.attributes) });
      }
    }
  }
  return out;
}

/** An OTLP/HTTP receiver: `answer: false` takes every request and never answers it (a collector that hangs). */
async function receiver(answer: boolean): Promise<{ url: string; spans: ReceivedSpan[]; requests: () => number; close(): Promise<void> }> {
  const spans: ReceivedSpan[] = [];
  const sockets = new Set<Socket>();
  let requests = 0;
  const server: Server = createServer((request: IncomingMessage, response: ServerResponse) => {
    requests += 1;
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      if (!answer) return;
      spans.push(...spansOf(JSON.parse(Buffer.concat(chunks).toString('utf8'))));
      response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    spans,
    requests: () => requests,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/*
 * The probe: tracing first, then one span with a log line in it, then the way out `mode` names —
 * `signal` (exitOnSignals, SIGTERM from the test), `fatal` (exitWithTraces(3)), `http` (a Fastify
 * server with the gateways' hook answering two requests, then exitWithTraces(0)).
 */
const PROBE = `
const { startTracing, inSpan, exitWithTraces, nameServerSpanHook } = await import('@cairn/tracing');
await startTracing('cairn-probe');
const { JsonLogger, exitOnSignals } = await import('@cairn/service-kit');
const logger = new JsonLogger('probe');
const mode = process.argv[1];
await inSpan('probe work', {}, async () => logger.write('info', 'inside the span'));
if (mode === 'signal') {
  exitOnSignals(logger, async () => undefined);
  process.stdout.write('ready\\n');
  setInterval(() => undefined, 1000);
} else if (mode === 'fatal') {
  await exitWithTraces(3);
} else if (mode === 'http') {
  const { default: Fastify } = await import('fastify');
  const app = Fastify();
  app.addHook('onRequest', nameServerSpanHook);
  app.get('/v1/runs/:id', async () => ({ ok: true }));
  const url = await app.listen({ port: 0, host: '127.0.0.1' });
  const { get } = await import('node:http');
  const ask = (path) => new Promise((resolve, reject) => get(url + path, (r) => { r.resume(); r.on('end', () => resolve(r.statusCode)); }).on('error', reject));
  process.stdout.write(JSON.stringify([await ask('/v1/runs/run_abc'), await ask('/nowhere/at/all')]) + '\\n');
  await app.close();
  await exitWithTraces(0);
}
`;

interface Probe {
  stdout: () => string;
  stderr: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>;
  kill(signal: NodeJS.Signals): number;
}

function probe(mode: 'signal' | 'fatal' | 'http', endpoint: string): Probe {
  const child = spawn(process.execPath, ['--input-type=module', '-e', PROBE, mode], {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH ?? '',
      OTEL_TRACES_EXPORTER: 'otlp',
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_EXPORTER_OTLP_ENDPOINT: endpoint,
      // No batch timer: what arrives, the exit flushed. The exporter alone would wait 20 s for an answer.
      OTEL_BSP_SCHEDULE_DELAY: '3600000',
      OTEL_EXPORTER_OTLP_TIMEOUT: '20000',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  return {
    stdout: () => stdout,
    stderr: () => stderr,
    exited: new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal, at: Date.now() }))),
    kill: (signal) => {
      child.kill(signal);
      return Date.now();
    },
  };
}

async function until(what: () => boolean, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  while (!what() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
}

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
});

describe('a process exits with its traces flushed', () => {
  it('on SIGTERM through exitOnSignals: exit 0, its span exported before it exits, the log line inside it carrying its ids', async () => {
    const collector = await receiver(true);
    closers.push(collector.close);
    const process_ = probe('signal', collector.url);
    await until(() => process_.stdout().includes('ready'), 20_000);
    expect(process_.stdout(), process_.stderr()).toContain('ready');
    expect(collector.requests()).toBe(0);
    process_.kill('SIGTERM');
    const exit = await process_.exited;
    expect(exit, process_.stderr()).toMatchObject({ code: 0, signal: null });
    const work = collector.spans.find((s) => s.name === 'probe work');
    expect(work, JSON.stringify(collector.spans)).toMatchObject({ service: 'cairn-probe' });
    // The log line written inside the span names it (ADR 0031, item 7): trace_id and span_id of the active span.
    const line = process_
      .stderr()
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .find((l) => l['msg'] === 'inside the span');
    expect(line, process_.stderr()).toMatchObject({ service: 'probe', trace_id: work!.traceId.toLowerCase(), span_id: work!.spanId.toLowerCase() });
    expect(process_.stderr()).toContain('"msg":"stopped"');
  });

  it('on a fatal error through exitWithTraces: its own exit code, its span exported', async () => {
    const collector = await receiver(true);
    closers.push(collector.close);
    const process_ = probe('fatal', collector.url);
    const exit = await process_.exited;
    expect(exit, process_.stderr()).toMatchObject({ code: 3, signal: null });
    expect(collector.spans.map((s) => s.name)).toEqual(['probe work']);
  });

  it('at most 3 s when the collector takes the spans and never answers: the exit is not held', async () => {
    const collector = await receiver(false);
    closers.push(collector.close);
    const process_ = probe('signal', collector.url);
    await until(() => process_.stdout().includes('ready'), 20_000);
    expect(process_.stdout(), process_.stderr()).toContain('ready');
    const signalled = process_.kill('SIGTERM');
    const exit = await process_.exited;
    expect(exit, process_.stderr()).toMatchObject({ code: 0, signal: null });
    // The flush was tried (the export reached the collector) and given up on at the bound, not the exporter's 20 s.
    expect(collector.requests()).toBeGreaterThanOrEqual(1);
    const waited = exit.at - signalled;
    expect(waited).toBeGreaterThanOrEqual(2_900);
    expect(waited).toBeLessThan(6_000);
  }, 30_000);

  it('names a Fastify server span by its route with the gateways’ hook: `GET /v1/runs/:id` and http.route; an unmatched one by its method', async () => {
    const collector = await receiver(true);
    closers.push(collector.close);
    const process_ = probe('http', collector.url);
    const exit = await process_.exited;
    expect(exit, process_.stderr()).toMatchObject({ code: 0, signal: null });
    expect(process_.stdout().trim()).toBe('[200,404]');
    const served = collector.spans.filter((s) => s.kind === 2);
    expect(served.map((s) => s.name).sort()).toEqual(['GET', 'GET /v1/runs/:id']);
    const routed = served.find((s) => s.name === 'GET /v1/runs/:id')!;
    expect(routed.attributes).toMatchObject({ 'http.route': '/v1/runs/:id', 'http.request.method': 'GET' });
    expect(Number(routed.attributes['http.response.status_code'])).toBe(200);
    const unmatched = served.find((s) => s.name === 'GET')!;
    expect(unmatched.attributes).not.toHaveProperty('http.route');
    // Never the raw URL in a name.
    expect(served.map((s) => s.name).join(' ')).not.toContain('run_abc');
  });
});
