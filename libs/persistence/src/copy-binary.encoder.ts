/**
 * PostgreSQL's binary COPY format: a signature and a header, then per row a 16-bit field count
 * and each field as a 32-bit byte length (-1 for NULL) and its bytes in network order, then a
 * -1 trailer. The server skips parsing every column from text (a third of its work per receipt
 * row here), and a receipt goes in as the very bytes read from the stream, never re-encoded.
 * Rows may span chunks: COPY data is a byte stream.
 */
const SIGNATURE = Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1');
const TWO_32 = 2 ** 32;
/** 2000-01-01T00:00:00Z, PostgreSQL's timestamp epoch, in Unix milliseconds. */
const PG_EPOCH_MS = Date.UTC(2000, 0, 1);

export class CopyBinaryEncoder {
  private chunk: Buffer;
  private at = 0;
  private readonly full: Buffer[] = [];

  constructor(private readonly chunkBytes = 256 * 1024) {
    this.chunk = Buffer.allocUnsafe(Math.max(chunkBytes, SIGNATURE.length + 8));
    SIGNATURE.copy(this.chunk, 0);
    this.chunk.writeInt32BE(0, SIGNATURE.length); // flags: no OIDs
    this.chunk.writeInt32BE(0, SIGNATURE.length + 4); // no header extension
    this.at = SIGNATURE.length + 8;
  }

  /** Whether whole chunks are waiting to be taken. */
  get hasFullChunks(): boolean {
    return this.full.length > 0;
  }

  /** The chunks filled so far (the one being filled stays). */
  takeFullChunks(): Buffer[] {
    return this.full.splice(0);
  }

  /** The trailer and everything not yet taken; the encoder is done after this. */
  end(): Buffer[] {
    this.room(2);
    this.at = this.chunk.writeInt16BE(-1, this.at);
    this.full.push(this.chunk.subarray(0, this.at));
    return this.takeFullChunks();
  }

  row(fields: number): void {
    this.room(2);
    this.at = this.chunk.writeInt16BE(fields, this.at);
  }

  null(): void {
    this.room(4);
    this.at = this.chunk.writeInt32BE(-1, this.at);
  }

  int4(value: number): void {
    this.room(8);
    this.chunk.writeInt32BE(4, this.at);
    this.at = this.chunk.writeInt32BE(value, this.at + 4);
  }

  /** A bigint column from a non-negative safe integer (stream sequences). */
  int8(value: number): void {
    if (!Number.isSafeInteger(value) || value < 0) throw new RangeError(`int8 expects a non-negative safe integer, got ${value}`);
    this.room(12);
    this.chunk.writeInt32BE(8, this.at);
    this.chunk.writeUInt32BE(Math.floor(value / TWO_32), this.at + 4);
    this.at = this.chunk.writeUInt32BE(value >>> 0, this.at + 8);
  }

  /** text (and json, whose binary form is its text), from a string. */
  text(value: string): void {
    // UTF-8 takes at most 3 bytes per UTF-16 unit.
    this.room(4 + 3 * value.length);
    const length = this.chunk.write(value, this.at + 4, 'utf8');
    this.chunk.writeInt32BE(length, this.at);
    this.at += 4 + length;
  }

  /** text or json from bytes that are already UTF-8. */
  utf8(bytes: Uint8Array): void {
    this.room(4 + bytes.byteLength);
    this.chunk.writeInt32BE(bytes.byteLength, this.at);
    this.chunk.set(bytes, this.at + 4);
    this.at += 4 + bytes.byteLength;
  }

  /**
   * timestamptz from `YYYY-MM-DDTHH:MM:SS.mmmZ` (checked before): microseconds since 2000-01-01 UTC
   * as a 64-bit integer, written as two 32-bit halves so that no step leaves exact integers.
   */
  timestamptz(iso: string): void {
    const ms = Date.parse(iso) - PG_EPOCH_MS;
    if (!Number.isSafeInteger(ms)) throw new RangeError(`not a timestamp: ${iso}`);
    const high = Math.floor(ms / TWO_32);
    const lowMicros = (ms - high * TWO_32) * 1000;
    const carry = Math.floor(lowMicros / TWO_32);
    this.room(12);
    this.chunk.writeInt32BE(8, this.at);
    this.chunk.writeInt32BE(high * 1000 + carry, this.at + 4);
    this.at = this.chunk.writeUInt32BE(lowMicros - carry * TWO_32, this.at + 8);
  }

  /** Makes room for `bytes` more, moving the current chunk to the full ones if it lacks it. */
  private room(bytes: number): void {
    if (this.at + bytes <= this.chunk.length) return;
    if (this.at > 0) this.full.push(this.chunk.subarray(0, this.at));
    this.chunk = Buffer.allocUnsafe(Math.max(this.chunkBytes, bytes));
    this.at = 0;
  }
}
