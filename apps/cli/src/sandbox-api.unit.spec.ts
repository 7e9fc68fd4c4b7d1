import { isCairnError } from '@cairn/contracts';
import { describe, expect, it } from 'vitest';
import { chainPath, GatewayClient } from './gateway-client.js';
import type { RequestOptions } from './gateway-client.js';
import { parseExecRequest, parseNdjson, parseSandboxFilePath, parseSandboxId, SandboxApi, sha256Hex } from './sandbox-api.js';

async function* chunks(...parts: string[]): AsyncGenerator<Uint8Array> {
  for (const part of parts) {
    await Promise.resolve();
    yield new TextEncoder().encode(part);
  }
}

async function* toAsync(parts: Uint8Array[]): AsyncGenerator<Uint8Array> {
  for (const part of parts) {
    await Promise.resolve();
    yield part;
  }
}

async function collect<T>(source: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of source) out.push(item);
  return out;
}

/** A client whose every request is answered by `answer` (no network), recording what was asked. */
class CannedClient extends GatewayClient {
  readonly asked: { path: string; options: RequestOptions }[] = [];
  constructor(private readonly answer: (path: string, options: RequestOptions) => Response) {
    super('http://127.0.0.1:9', 'cairn_test_key');
  }
  override fetch(path: string, options: RequestOptions = {}): Promise<Response> {
    this.asked.push({ path, options });
    return Promise.resolve(this.answer(path, options));
  }
}

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
  // Cut into small pieces so lines arrive split across chunks.
  const pieces: string[] = [];
  for (let i = 0; i < text.length; i += split) pieces.push(text.slice(i, i + split));
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      for (const piece of pieces) controller.enqueue(new TextEncoder().encode(piece));
      controller.close();
    },
  });
  return new Response(body, { status: 200, headers: { 'content-type': 'application/x-ndjson' } });
}

const b64 = (text: string) => Buffer.from(text).toString('base64');

describe('parseNdjson', () => {
  it('yields one value per line across chunk boundaries, skips blank lines, takes a last line without a newline', async () => {
    expect(await collect(parseNdjson(chunks('{"a":', '1}\n\n{"b"', ':2}\r\n', '{"c":3}')))).toEqual([{ a: 1 }, { b: 2 }, { c: 3 }]);
  });

  it('a line that is not JSON is E_INTERNAL', async () => {
    await expect(collect(parseNdjson(chunks('{"a":1}\nnot json\n')))).rejects.toMatchObject({ code: 'E_INTERNAL' });
  });

  it('splits on "\\n" only: raw U+2028, U+2029 and a lone "\\r" are inside a line (a U+2028 cut across chunks too)', async () => {
    const message = 'no such file a\u2028b\u2029c\rd';
    const text = `{"type":"error","code":"E_INPUT","message":"${message.replace('\r', '\\r')}"}\n{"m":"x\\ry"}\n`;
    const encoded = new TextEncoder().encode(text);
    const cut = encoded.indexOf(0xe2) + 1; // inside U+2028's three bytes
    const twoChunks = [encoded.subarray(0, cut), encoded.subarray(cut)];
    expect(await collect(parseNdjson(toAsync(twoChunks)))).toEqual([{ type: 'error', code: 'E_INPUT', message }, { m: 'x\ry' }]);
    // A raw "\r" inside a line is not a break (JSON then refuses it inside a string: E_INTERNAL names the line, not half of it).
    await expect(collect(parseNdjson(chunks('{"a":"x\ry"}\n')))).rejects.toMatchObject({ code: 'E_INTERNAL', message: expect.stringContaining('{"a":"x\ry"}') as string });
  });

  it('a line longer than its limit is E_INTERNAL before it is held whole', async () => {
    await expect(collect(parseNdjson(chunks('{"a":1}\n', `{"b":"${'x'.repeat(64)}`), 32))).rejects.toMatchObject({ code: 'E_INTERNAL', message: 'the exec stream carried a line longer than 32 characters', details: { line: 2 } });
    expect(await collect(parseNdjson(chunks(`{"b":"${'x'.repeat(24)}"}\n`), 32))).toEqual([{ b: 'x'.repeat(24) }]);
  });
});

describe('chainPath', () => {
  it('puts a run under /v1/runs and a sandbox session under /v1/sandboxes', () => {
    expect(chainPath('run_abc')).toBe('/v1/runs/run_abc');
    expect(chainPath('sbx_abc')).toBe('/v1/sandboxes/sbx_abc');
  });
});

describe('input checks before any request', () => {
  it('sandbox ids: sbx_… only', () => {
    expect(parseSandboxId('sbx_abc123')).toBe('sbx_abc123');
    for (const bad of ['run_abc', 'sbx_ABC', 'sbx_\u0430bc', 'sbx_a\nb', '']) expect(() => parseSandboxId(bad)).toThrow(/invalid sandbox id/);
  });

  it('file paths: absolute, below /work, /out or /tmp, normalised', () => {
    expect(parseSandboxFilePath('/work/a/b.txt')).toBe('/work/a/b.txt');
    expect(parseSandboxFilePath('/tmp/x')).toBe('/tmp/x');
    for (const bad of ['/etc/passwd', 'work/a', '/work', '/work/../etc/passwd', '/work/./a', '/work//a', '/work/a\u0000b', '/workx/a', '/work/a/']) {
      expect(() => parseSandboxFilePath(bad), bad).toThrow(/invalid sandbox path/);
    }
  });

  it('exec requests: argv an array with a program, env names, workdir', () => {
    expect(parseExecRequest({ argv: ['ls', '-la'], workdir: '/tmp', env: { A_B: '1' } })).toMatchObject({ argv: ['ls', '-la'] });
    expect(() => parseExecRequest({ argv: [] })).toThrow(/argv/);
    expect(() => parseExecRequest({ argv: [''] })).toThrow(/argv/);
    expect(() => parseExecRequest({ argv: ['sh', 'a\u0000b'] })).toThrow(/argv\[1\]/);
    expect(() => parseExecRequest({ argv: ['ls'], workdir: '/etc' })).toThrow(/workdir/);
    expect(() => parseExecRequest({ argv: ['ls'], env: { 'lower-case': 'x' } })).toThrow(/env/);
  });
});

describe('SandboxApi', () => {
  it('streams an exec: output chunks in order to their streams, then the result', async () => {
    const client = new CannedClient(() =>
      ndjson([
        { type: 'output', stream: 'stdout', data: b64('hel') },
        { type: 'output', stream: 'stderr', data: b64('oops') },
        { type: 'output', stream: 'stdout', data: b64('lo\n') },
        { type: 'result', ...SUMMARY },
      ]),
    );
    const seen: [string, string][] = [];
    const summary = await new SandboxApi(client).execStream('sbx_abc', { argv: ['sh', '-c', 'x'] }, (stream, bytes) => void seen.push([stream, bytes.toString('utf8')]));
    expect(seen).toEqual([
      ['stdout', 'hel'],
      ['stderr', 'oops'],
      ['stdout', 'lo\n'],
    ]);
    expect(summary).toMatchObject({ exitCode: 3, seq: 7 });
    expect(client.asked[0]).toMatchObject({ path: '/v1/sandboxes/sbx_abc/exec', options: { method: 'POST', headers: { accept: 'application/x-ndjson' }, timeoutMs: null } });
  });

  it('an error line is a CairnError with its code; a stream that ends without a result is E_INTERNAL', async () => {
    const failing = new CannedClient(() => ndjson([{ type: 'output', stream: 'stdout', data: b64('x') }, { type: 'error', code: 'E_WORKER_LOST', message: 'the worker went away' }]));
    const error = await new SandboxApi(failing).execStream('sbx_abc', { argv: ['true'] }, () => undefined).catch((e: unknown) => e);
    expect(isCairnError(error) && error.code).toBe('E_WORKER_LOST');
    const unknownCode = new CannedClient(() => ndjson([{ type: 'error', code: 'E_MADE_UP', message: 'x' }]));
    await expect(new SandboxApi(unknownCode).execStream('sbx_abc', { argv: ['true'] }, () => undefined)).rejects.toMatchObject({ code: 'E_INTERNAL' });
    const cut = new CannedClient(() => ndjson([{ type: 'output', stream: 'stdout', data: b64('x') }]));
    await expect(new SandboxApi(cut).execStream('sbx_abc', { argv: ['true'] }, () => undefined)).rejects.toMatchObject({ code: 'E_INTERNAL', message: expect.stringContaining('ended before its result') as string });
    const odd = new CannedClient(() => ndjson([{ type: 'output', stream: 'stdin', data: 'x' }]));
    await expect(new SandboxApi(odd).execStream('sbx_abc', { argv: ['true'] }, () => undefined)).rejects.toMatchObject({ code: 'E_INTERNAL' });
  });

  it('a refused exec (409) keeps the gateway’s code', async () => {
    const client = new CannedClient(() => new Response(JSON.stringify({ code: 'E_CONFLICT', message: 'sandbox sbx_abc is DESTROYED', details: { state: 'DESTROYED' } }), { status: 409 }));
    await expect(new SandboxApi(client).execStream('sbx_abc', { argv: ['true'] }, () => undefined)).rejects.toMatchObject({ code: 'E_CONFLICT', details: { state: 'DESTROYED', status: 409 } });
  });

  it('writes raw bytes with the path and octal mode in the query; reads them back checked against X-Cairn-Sha256', async () => {
    const bytes = Buffer.from([0, 1, 2, 255]);
    const sha = sha256Hex(bytes);
    const writer = new CannedClient(() => new Response(JSON.stringify({ path: '/work/a b', bytes: 4, sha256: sha, seq: 9 }), { status: 200 }));
    expect(await new SandboxApi(writer).writeFile('sbx_abc', '/work/a b', bytes, 0o755)).toEqual({ path: '/work/a b', bytes: 4, sha256: sha, seq: 9 });
    expect(writer.asked[0]?.path).toBe('/v1/sandboxes/sbx_abc/files?path=%2Fwork%2Fa+b&mode=0755');
    expect(writer.asked[0]?.options).toMatchObject({ method: 'PUT', bytes });

    const reader = new CannedClient(() => new Response(bytes, { status: 200, headers: { 'x-cairn-sha256': sha, 'x-cairn-seq': '10' } }));
    const read = await new SandboxApi(reader).readFile('sbx_abc', '/out/r.bin');
    expect(read).toEqual({ bytes, sha256: sha, seq: 10 });
    const lying = new CannedClient(() => new Response(bytes, { status: 200, headers: { 'x-cairn-sha256': 'f'.repeat(64) } }));
    await expect(new SandboxApi(lying).readFile('sbx_abc', '/out/r.bin')).rejects.toMatchObject({ code: 'E_INTERNAL', message: expect.stringContaining('hash to') as string });
  });
});
