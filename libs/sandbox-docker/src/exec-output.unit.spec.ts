import { describe, expect, it } from 'vitest';
import { BoundedBuffer, ExecStreamDemuxer, type OutputStream } from './exec-output.js';

function frame(kind: number, payload: string): Buffer {
  const body = Buffer.from(payload);
  const header = Buffer.alloc(8);
  header[0] = kind;
  header.writeUInt32BE(body.length, 4);
  return Buffer.concat([header, body]);
}

function demux(chunks: Buffer[]): { out: string; err: string; boundary: boolean } {
  const got: Record<OutputStream, string> = { stdout: '', stderr: '' };
  const demuxer = new ExecStreamDemuxer((stream, chunk) => (got[stream] += Buffer.from(chunk).toString()));
  for (const chunk of chunks) demuxer.push(chunk);
  return { out: got.stdout, err: got.stderr, boundary: demuxer.atFrameBoundary };
}

describe('ExecStreamDemuxer', () => {
  const stream = Buffer.concat([frame(1, 'hello '), frame(2, 'oops'), frame(1, 'world'), frame(1, '')]);

  it('splits stdout from stderr', () => {
    expect(demux([stream])).toEqual({ out: 'hello world', err: 'oops', boundary: true });
  });

  it('copes with frames and headers cut anywhere, down to single bytes', () => {
    for (let cut = 1; cut < stream.length; cut++) expect(demux([stream.subarray(0, cut), stream.subarray(cut)])).toEqual(demux([stream]));
    expect(demux([...stream].map((b) => Buffer.from([b])))).toEqual(demux([stream]));
  });

  it('knows when a stream stopped inside a frame', () => {
    expect(demux([stream.subarray(0, 10)]).boundary).toBe(false);
  });
});

describe('BoundedBuffer', () => {
  it('keeps the first bytes up to its limit and counts everything', () => {
    const buffer = new BoundedBuffer(5);
    buffer.push(Buffer.from('abc'));
    buffer.push(Buffer.from('defgh'));
    buffer.push(Buffer.from('ijk'));
    expect(Buffer.from(buffer.bytes()).toString()).toBe('abcde');
    expect([buffer.total, buffer.truncated]).toEqual([11, true]);
  });

  it('is not truncated at exactly its limit, and a zero limit keeps nothing', () => {
    const exact = new BoundedBuffer(3);
    exact.push(Buffer.from('abc'));
    expect(exact.truncated).toBe(false);
    const none = new BoundedBuffer(0);
    none.push(Buffer.from('x'));
    expect([none.bytes().length, none.total, none.truncated]).toEqual([0, 1, true]);
  });

  it('copies what it keeps, so the caller may reuse its chunk', () => {
    const buffer = new BoundedBuffer(10);
    const chunk = Buffer.from('abc');
    buffer.push(chunk);
    chunk.fill(0);
    expect(Buffer.from(buffer.bytes()).toString()).toBe('abc');
  });
});
