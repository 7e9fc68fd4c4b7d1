import { describe, expect, it } from 'vitest';
import { CopyBinaryEncoder } from './copy-binary.encoder.js';

const HEADER = Buffer.concat([Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1'), Buffer.alloc(8)]);

function encoded(write: (copy: CopyBinaryEncoder) => void, chunkBytes?: number): Buffer {
  const copy = new CopyBinaryEncoder(chunkBytes);
  write(copy);
  return Buffer.concat(copy.end());
}

/** The 8 bytes of a timestamptz field, worked out with BigInt. */
function micros(iso: string): Buffer {
  const value = BigInt(Date.parse(iso) - Date.UTC(2000, 0, 1)) * 1000n;
  const bytes = Buffer.alloc(8);
  bytes.writeBigInt64BE(value);
  return bytes;
}

describe('CopyBinaryEncoder', () => {
  it('writes the signature, header and trailer around no rows', () => {
    expect(encoded(() => undefined)).toEqual(Buffer.concat([HEADER, Buffer.from([0xff, 0xff])]));
  });

  it('writes each field as its length and its bytes in network order, NULL as -1', () => {
    const out = encoded((copy) => {
      copy.row(5);
      copy.int8(2 ** 40 + 5);
      copy.int4(-2);
      copy.text('é\t');
      copy.null();
      copy.utf8(new Uint8Array([0x7b, 0x7d]));
    });
    const row = Buffer.concat([
      Buffer.from([0, 5]),
      Buffer.from([0, 0, 0, 8, 0, 0, 1, 0, 0, 0, 0, 5]),
      Buffer.from([0, 0, 0, 4, 0xff, 0xff, 0xff, 0xfe]),
      Buffer.from([0, 0, 0, 3, 0xc3, 0xa9, 0x09]),
      Buffer.from([0xff, 0xff, 0xff, 0xff]),
      Buffer.from([0, 0, 0, 2, 0x7b, 0x7d]),
    ]);
    expect(out).toEqual(Buffer.concat([HEADER, row, Buffer.from([0xff, 0xff])]));
  });

  it('writes timestamptz as microseconds since 2000-01-01 UTC, exactly, far from the epoch too', () => {
    for (const iso of ['2000-01-01T00:00:00.000Z', '2026-01-01T00:00:03.123Z', '1999-12-31T23:59:59.999Z', '0001-01-01T00:00:00.000Z', '9999-12-31T23:59:59.999Z', '1970-01-01T00:00:00.001Z']) {
      const out = encoded((copy) => copy.timestamptz(iso));
      expect([iso, out.subarray(HEADER.length, HEADER.length + 12)]).toEqual([iso, Buffer.concat([Buffer.from([0, 0, 0, 8]), micros(iso)])]);
    }
    expect(() => encoded((copy) => copy.timestamptz('not a time'))).toThrow(RangeError);
  });

  it('refuses an int8 it cannot write exactly', () => {
    expect(() => encoded((copy) => copy.int8(-1))).toThrow(RangeError);
    expect(() => encoded((copy) => copy.int8(2 ** 53))).toThrow(RangeError);
  });

  it('hands out full chunks as it goes, the same bytes as one chunk would hold', () => {
    const write = (copy: CopyBinaryEncoder) => {
      for (let i = 0; i < 200; i++) {
        copy.row(2);
        copy.int4(i);
        copy.text('x'.repeat(i));
      }
    };
    const small = new CopyBinaryEncoder(64);
    const taken: Buffer[] = [];
    write(small);
    expect(small.hasFullChunks).toBe(true);
    taken.push(...small.takeFullChunks());
    expect(small.hasFullChunks).toBe(false);
    taken.push(...small.end());
    expect(Buffer.concat(taken)).toEqual(encoded(write));
  });
});
