import { createServer } from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GatewayClient, parseSse } from './gateway-client.js';

/** The parts as a byte stream, each its own chunk. */
function chunks(...parts: string[]): AsyncIterable<Uint8Array> {
  return Readable.from(parts.map((part) => Buffer.from(part)));
}

async function collect<T>(source: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of source) out.push(item);
  return out;
}

describe('parseSse', () => {
  it('reads events split anywhere across chunks, skipping comments, with CRLF or LF', async () => {
    const events = await collect(parseSse(chunks(': heartbeat\n\nid: run_a:1\nevent: rec', 'eipt\ndata: {"seq":1}\r', '\n\r\ndata: a\ndata: b\n\n', 'data: cut off')));
    expect(events).toEqual([
      { id: 'run_a:1', event: 'receipt', data: '{"seq":1}' },
      { id: 'run_a:1', event: 'message', data: 'a\nb' },
    ]);
  });
});

const receipt = (seq: number, type: string) => ({ seq, type, run_id: 'run_x', hash: String(seq).repeat(64).slice(0, 64) });

/** A tiny stand-in for the gateway's wire format: the client's parsing and error mapping are what is tested. */
let server: Server;
let url: string;
let streamCalls: string[] = [];

function handle(req: IncomingMessage, res: ServerResponse): void {
  const path = req.url ?? '';
  if (req.headers.authorization !== 'Bearer k') {
    res.writeHead(401, { 'content-type': 'application/json' }).end(JSON.stringify({ code: 'E_UNAUTHORIZED', message: 'no key' }));
    return;
  }
  if (path === '/v1/runs/run_gone') {
    res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ code: 'E_NOT_FOUND', message: 'no run run_gone', details: { runId: 'run_gone' } }));
    return;
  }
  if (path === '/v1/runs/run_broken') {
    res.writeHead(502, { 'content-type': 'text/plain' }).end('bad gateway');
    return;
  }
  if (path.startsWith('/v1/runs/run_x/events/stream')) {
    streamCalls.push(`${path} ${String(req.headers['last-event-id'])}`);
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    // The first connection drops after seq 2; the resumed one sends the rest and the seal.
    const after = Number(new URL(path, 'http://x').searchParams.get('after'));
    const send = (r: ReturnType<typeof receipt>) => res.write(`id: run_x:${r.seq}\nevent: receipt\ndata: ${JSON.stringify(r)}\n\n`);
    if (after === 0) {
      send(receipt(1, 'run.submitted'));
      send(receipt(2, 'policy.decided'));
      res.end();
    } else {
      send(receipt(2, 'policy.decided'));
      send(receipt(3, 'run.sealed'));
      res.end();
    }
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

describe('GatewayClient', () => {
  it('turns the gateway’s error bodies into CairnErrors with its code', async () => {
    await expect(new GatewayClient(url, 'k').getRun('run_gone')).rejects.toMatchObject({ code: 'E_NOT_FOUND', details: { runId: 'run_gone', status: 404 } });
    await expect(new GatewayClient(url, 'wrong').getRun('run_gone')).rejects.toMatchObject({ code: 'E_UNAUTHORIZED' });
    await expect(new GatewayClient(url, 'k').getRun('run_broken')).rejects.toMatchObject({ code: 'E_INTERNAL', message: expect.stringContaining('HTTP 502') as string });
  });

  it('says how to start the stack when nothing answers', async () => {
    const closed = new GatewayClient('http://127.0.0.1:1', 'k');
    await expect(closed.getRun('run_x')).rejects.toMatchObject({ code: 'E_UNAVAILABLE', message: expect.stringContaining('cairn up') as string });
  });

  it('follows a run’s stream to run.sealed, resuming after the last seq when it drops', async () => {
    streamCalls = [];
    const seen = await collect(new GatewayClient(`${url}/`, 'k').follow('run_x'));
    expect(seen.map((r) => [r.seq, r.type])).toEqual([
      [1, 'run.submitted'],
      [2, 'policy.decided'],
      [3, 'run.sealed'],
    ]);
    expect(streamCalls).toEqual(['/v1/runs/run_x/events/stream?after=0 run_x:0', '/v1/runs/run_x/events/stream?after=2 run_x:2']);
  });
});
