import { CairnError, ExecRequestSchema, ExecResultSchema, ExecStreamLineSchema, GetFileQuerySchema, PutFileQuerySchema } from '@cairn/contracts';
import type { ExecOutcome } from '@cairn/sandbox-sessions';
import type { FastifyReply } from 'fastify';
import { describe, expect, it } from 'vitest';
import { ExecStream } from './exec-stream.js';
import { execResult } from './sandbox-operations.service.js';

const sha = (c: string) => c.repeat(64);

function outcome(more: Partial<ExecOutcome> = {}): ExecOutcome {
  return {
    execId: 'x1',
    exitCode: 0,
    stdout: new TextEncoder().encode('héllo\n'),
    stderr: Uint8Array.from([0x62, 0xff, 0x61]),
    stdoutBytes: 7,
    stderrBytes: 3,
    stdoutSha256: sha('a'),
    stderrSha256: sha('b'),
    truncated: false,
    durationMs: 12,
    limitHit: null,
    errorCode: null,
    seq: 9,
    sandboxDestroyed: false,
    ...more,
  };
}

/** A reply whose raw response records what is written to it. */
function fakeReply() {
  const written: string[] = [];
  const state = { hijacked: false, status: 0, headers: {} as Record<string, string>, ended: false };
  const raw = {
    writableEnded: false,
    destroyed: false,
    writeHead(status: number, headers: Record<string, string>) {
      state.status = status;
      state.headers = headers;
    },
    write(text: string) {
      written.push(text);
      return true;
    },
    end() {
      state.ended = true;
      raw.writableEnded = true;
    },
  };
  const reply = {
    raw,
    hijack() {
      state.hijacked = true;
    },
  } as unknown as FastifyReply;
  return { reply, written, state };
}

describe('sandbox request shapes', () => {
  it.each([
    ['/work/a.txt', true],
    ['/out/report/x.json', true],
    ['/tmp/t', true],
    ['work/a.txt', false],
    ['/work/../etc/passwd', false],
    ['/work/./a', false],
    ['/work', false],
    ['/etc/passwd', false],
    ['/work/a\u0000b', false],
    ['/work//a', false],
    ['/workspace/a', false],
  ])('a file path to write %s is %s', (path, ok) => {
    expect(PutFileQuerySchema.safeParse({ path }).success).toBe(ok);
  });

  it.each([
    ['/work/a.txt', true],
    ['/etc/os-release', true],
    ['/usr/bin/env', true],
    ['work/a.txt', false],
    ['/', false],
    ['/work/../etc/passwd', false],
    ['/work//a', false],
    ['/work/a\u0000b', false],
    ['/proc/self/environ', false],
    ['/sys/kernel', false],
    ['/dev/null', false],
    ['/run/secrets/TOKEN', false],
  ])('a file path to read %s is %s', (path, ok) => {
    expect(GetFileQuerySchema.safeParse({ path }).success).toBe(ok);
  });

  it('reads a mode as octal text and refuses anything else', () => {
    expect(PutFileQuerySchema.parse({ path: '/work/x', mode: '0755' })).toEqual({ path: '/work/x', mode: 0o755 });
    expect(PutFileQuerySchema.parse({ path: '/work/x', mode: '644' })).toEqual({ path: '/work/x', mode: 0o644 });
    for (const mode of ['abc', '999', '-1', '0o644', '17777']) expect(PutFileQuerySchema.safeParse({ path: '/work/x', mode }).success).toBe(false);
    expect(PutFileQuerySchema.safeParse({ path: '/work/x', other: '1' }).success).toBe(false);
  });

  it('takes an argv array only, with optional env, workdir, stdin and timeout', () => {
    expect(ExecRequestSchema.safeParse({ argv: ['echo', 'hi'], env: { A: '1' }, workdir: '/work', stdin: 'x', timeoutSeconds: 5 }).success).toBe(true);
    for (const bad of [{}, { argv: [] }, { argv: 'echo hi' }, { argv: ['echo'], workdir: 'work' }, { argv: ['echo'], shell: true }, { argv: ['a\u0000b'] }]) {
      expect(ExecRequestSchema.safeParse(bad).success).toBe(false);
    }
  });
});

describe('exec answers', () => {
  it('JSON: output as UTF-8 text (bad bytes replaced), the rest as the outcome says', () => {
    const result = execResult(outcome());
    expect(ExecResultSchema.parse(result)).toEqual(result);
    expect(result).toMatchObject({ stdout: 'héllo\n', stderr: 'b\uFFFDa', seq: 9, sandboxState: 'READY', limitHit: null });
    expect(execResult(outcome({ limitHit: 'E_TIMEOUT', errorCode: 'E_TIMEOUT', exitCode: null, sandboxDestroyed: true }))).toMatchObject({
      limitHit: 'E_TIMEOUT',
      errorCode: 'E_TIMEOUT',
      exitCode: null,
      sandboxState: 'DESTROYED',
    });
  });

  it('NDJSON: nothing is sent before the first line; output as base64 bytes, then exactly one result, then the end', () => {
    const { reply, written, state } = fakeReply();
    const stream = new ExecStream(reply);
    expect(stream.started).toBe(false);
    expect(state.hijacked).toBe(false);
    stream.output('stdout', Uint8Array.from([0x00, 0xff, 0x41]));
    expect(state).toMatchObject({ hijacked: true, status: 200 });
    expect(state.headers['content-type']).toBe('application/x-ndjson; charset=utf-8');
    stream.output('stderr', new TextEncoder().encode('warn'));
    stream.result(outcome());
    expect(state.ended).toBe(true);
    const lines = written.map((text) => {
      expect(text.endsWith('\n')).toBe(true);
      return ExecStreamLineSchema.parse(JSON.parse(text));
    });
    expect(lines.map((line) => line.type)).toEqual(['output', 'output', 'result']);
    expect(lines[0]).toEqual({ type: 'output', stream: 'stdout', data: Buffer.from([0x00, 0xff, 0x41]).toString('base64') });
    expect(lines[2]).not.toHaveProperty('stdout');
    expect(lines[2]).toMatchObject({ type: 'result', execId: 'x1', seq: 9 });
  });

  it('NDJSON: an error after the stream began is its last line', () => {
    const { reply, written, state } = fakeReply();
    const stream = new ExecStream(reply);
    stream.output('stdout', new TextEncoder().encode('partial'));
    stream.error(new CairnError('E_WORKER_LOST', 'the worker went away'));
    expect(state.ended).toBe(true);
    expect(JSON.parse(written.at(-1) ?? '')).toEqual({ type: 'error', code: 'E_WORKER_LOST', message: 'the worker went away' });
  });

  it('NDJSON: a line holds no raw line break of any kind (U+2028/U+2029 escaped), and parses to the same message', () => {
    const { reply, written } = fakeReply();
    const message = 'cannot run a\u2028b\u2029c\rd\ne\u0085f';
    new ExecStream(reply).error(new CairnError('E_INPUT', message));
    expect(written).toHaveLength(1);
    const line = written[0]!;
    expect(line.indexOf('\n')).toBe(line.length - 1);
    expect(line).not.toMatch(/[\r\u2028\u2029]/);
    expect(line).toContain('a\\u2028b\\u2029c');
    expect(JSON.parse(line)).toEqual({ type: 'error', code: 'E_INPUT', message });
  });
});
