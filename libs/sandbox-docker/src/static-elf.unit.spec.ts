import { describe, expect, it } from 'vitest';
import { elfNeedsLoader } from './static-elf.js';

/** A minimal ELF64 little-endian header with the given program header types. */
function elf64(types: number[]): Uint8Array {
  const phoff = 64;
  const bytes = new Uint8Array(phoff + types.length * 56);
  const view = new DataView(bytes.buffer);
  bytes.set([0x7f, 0x45, 0x4c, 0x46, 2, 1], 0);
  view.setBigUint64(0x20, BigInt(phoff), true);
  view.setUint16(0x36, 56, true);
  view.setUint16(0x38, types.length, true);
  types.forEach((type, i) => view.setUint32(phoff + i * 56, type, true));
  return bytes;
}

describe('elfNeedsLoader', () => {
  it('is true when a PT_INTERP header asks for a dynamic loader', () => {
    expect(elfNeedsLoader(elf64([6, 3, 1]))).toBe(true);
  });

  it('is false for a static binary', () => {
    expect(elfNeedsLoader(elf64([1, 1, 4]))).toBe(false);
  });

  it('refuses what is not ELF, or is cut short', () => {
    expect(() => elfNeedsLoader(new TextEncoder().encode('#!/bin/sh\necho not an elf file at all, really not'))).toThrow(RangeError);
    expect(() => elfNeedsLoader(elf64([1, 3]).subarray(0, 70))).toThrow(RangeError);
  });
});
