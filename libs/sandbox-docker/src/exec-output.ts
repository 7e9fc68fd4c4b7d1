/*
 * Reading a step's output without trusting its size: Docker multiplexes stdout and stderr of a
 * non-TTY exec into frames of an 8-byte header (stream, 0, 0, 0, big-endian length) and a
 * payload. The demuxer hands payloads on as they arrive; nothing here grows with the output.
 */

export type OutputStream = 'stdout' | 'stderr';
export type OutputSink = (stream: OutputStream, chunk: Uint8Array) => void;

const HEADER_BYTES = 8;

export class ExecStreamDemuxer {
  private header = new Uint8Array(HEADER_BYTES);
  private headerFill = 0;
  private remaining = 0;
  private current: OutputStream | null = null;

  constructor(private readonly sink: OutputSink) {}

  push(chunk: Uint8Array): void {
    let offset = 0;
    while (offset < chunk.length) {
      if (this.remaining === 0) {
        const take = Math.min(HEADER_BYTES - this.headerFill, chunk.length - offset);
        this.header.set(chunk.subarray(offset, offset + take), this.headerFill);
        this.headerFill += take;
        offset += take;
        if (this.headerFill < HEADER_BYTES) return;
        this.headerFill = 0;
        const kind = this.header[0];
        // 1 is stdout, 2 is stderr; stdin (0) is never sent back; anything else counts as stderr.
        this.current = kind === 1 ? 'stdout' : 'stderr';
        this.remaining = new DataView(this.header.buffer).getUint32(4);
        continue;
      }
      const take = Math.min(this.remaining, chunk.length - offset);
      if (this.current !== null && take > 0) this.sink(this.current, chunk.subarray(offset, offset + take));
      this.remaining -= take;
      offset += take;
    }
  }

  /** True when the stream ended between frames, as a well-formed one does. */
  get atFrameBoundary(): boolean {
    return this.remaining === 0 && this.headerFill === 0;
  }
}

/** Keeps the first `limit` bytes written to it and counts the rest. */
export class BoundedBuffer {
  private readonly chunks: Buffer[] = [];
  private kept = 0;
  private seen = 0;

  constructor(readonly limit: number) {}

  push(chunk: Uint8Array): void {
    this.seen += chunk.length;
    const room = this.limit - this.kept;
    if (room <= 0) return;
    // A copy, so a kept slice never pins a larger chunk in memory.
    const part = Buffer.from(chunk.subarray(0, Math.min(room, chunk.length)));
    this.chunks.push(part);
    this.kept += part.length;
  }

  get total(): number {
    return this.seen;
  }

  get truncated(): boolean {
    return this.seen > this.kept;
  }

  bytes(): Uint8Array {
    return new Uint8Array(Buffer.concat(this.chunks, this.kept));
  }
}
