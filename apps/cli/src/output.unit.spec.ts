import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { formatHumanError, formatJsonError, isInteractive, Output, Progress } from './output.js';

function capture(isTTY = false) {
  const stdout = Object.assign(new PassThrough(), { isTTY });
  const stderr = Object.assign(new PassThrough(), { isTTY });
  const read = (stream: PassThrough) => {
    const chunk = stream.read() as Buffer | null;
    return chunk === null ? '' : chunk.toString('utf8');
  };
  return { streams: { stdout, stderr, env: {} }, out: () => read(stdout), err: () => read(stderr) };
}

describe('error formatting', () => {
  it('prints `error E_CODE: message` for people', () => {
    expect(formatHumanError({ code: 'E_NOT_FOUND', message: 'no chain run_x' })).toBe('error E_NOT_FOUND: no chain run_x');
    expect(formatHumanError({ code: 'E_NOT_FOUND', message: 'm' }, true)).toBe('\u001b[31merror\u001b[0m E_NOT_FOUND: m');
  });

  it('prints `{ ok: false, error: { code, message, details } }` for machines, details always an object', () => {
    expect(JSON.parse(formatJsonError({ code: 'E_INPUT', message: 'bad' }))).toEqual({ ok: false, error: { code: 'E_INPUT', message: 'bad', details: {} } });
    expect(JSON.parse(formatJsonError({ code: 'E_CHAIN_BROKEN', message: 'm', details: { firstBadSeq: 2 } }))).toEqual({
      ok: false,
      error: { code: 'E_CHAIN_BROKEN', message: 'm', details: { firstBadSeq: 2 } },
    });
  });
});

describe('isInteractive', () => {
  it('is true only at a terminal without NO_COLOR or TERM=dumb', () => {
    expect(isInteractive({ isTTY: true }, {})).toBe(true);
    expect(isInteractive({ isTTY: false }, {})).toBe(false);
    expect(isInteractive({}, {})).toBe(false);
    expect(isInteractive({ isTTY: true }, { NO_COLOR: '1' })).toBe(false);
    expect(isInteractive({ isTTY: true }, { NO_COLOR: '' })).toBe(true);
    expect(isInteractive({ isTTY: true }, { TERM: 'dumb' })).toBe(false);
  });
});

describe('Output', () => {
  it('writes human results to stdout and failures to stderr', () => {
    const io = capture();
    const output = new Output(io.streams, false);
    output.result(`${output.okMark()}  done`, { ok: true });
    output.failure({ code: 'E_UNAVAILABLE', message: 'cannot reach NATS' });
    output.note('a note');
    expect(io.out()).toBe('OK  done\n');
    expect(io.err()).toBe('error E_UNAVAILABLE: cannot reach NATS\na note\n');
  });

  it('writes JSON results and JSON failures to stdout with --json, notes still to stderr', () => {
    const io = capture();
    const output = new Output(io.streams, true);
    output.result('ignored', { ok: true, count: 3 });
    output.failure({ code: 'E_INPUT', message: 'bad', details: { path: 'f' } });
    output.note('progress');
    expect(io.out().trim().split('\n').map((line) => JSON.parse(line) as unknown)).toEqual([
      { ok: true, count: 3 },
      { ok: false, error: { code: 'E_INPUT', message: 'bad', details: { path: 'f' } } },
    ]);
    expect(io.err()).toBe('progress\n');
  });

  it('writes --json lines with U+2028/U+2029 escaped, so a line reader sees one line each', () => {
    const io = capture();
    const output = new Output(io.streams, true);
    output.result('ignored', { ok: true, name: 'a\u2028b' });
    output.failure({ code: 'E_INPUT', message: 'bad\u2029name' });
    const text = io.out();
    expect(text).toBe('{"ok":true,"name":"a\\u2028b"}\n{"ok":false,"error":{"code":"E_INPUT","message":"bad\\u2029name","details":{}}}\n');
    expect(text.split('\n').filter((line) => line !== '').map((line) => JSON.parse(line) as unknown)).toEqual([
      { ok: true, name: 'a\u2028b' },
      { ok: false, error: { code: 'E_INPUT', message: 'bad\u2029name', details: {} } },
    ]);
  });

  it('colours only at a terminal', () => {
    const io = capture(true);
    expect(new Output(io.streams, false).okMark()).toBe('\u001b[32mOK\u001b[0m');
    expect(new Output({ ...io.streams, env: { NO_COLOR: '1' } }, false).okMark()).toBe('OK');
  });
});

describe('Progress', () => {
  it('prints nothing for quick work and a plain line every two seconds when not interactive', () => {
    const stderr = new PassThrough();
    let now = 1_000;
    const progress = new Progress(stderr, false, () => now);
    progress.update('1 receipts');
    now += 1_999;
    progress.update('2 receipts');
    now += 1;
    progress.update('3 receipts');
    progress.done();
    expect((stderr.read() as Buffer).toString('utf8')).toBe('3 receipts\n');
  });

  it('redraws one line at a terminal and clears it when done', () => {
    const stderr = new PassThrough();
    let now = 0;
    const progress = new Progress(stderr, true, () => now);
    now = 100;
    progress.update('a');
    now = 150;
    progress.update('b');
    now = 200;
    progress.update('c');
    progress.done();
    expect((stderr.read() as Buffer).toString('utf8')).toBe('\ra\u001b[K\rc\u001b[K\r\u001b[K');
  });
});
