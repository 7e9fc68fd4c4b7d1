import { describe, expect, it } from 'vitest';
import { COPY_NULL, copyBoolean, copyBytea, copyLine, copyNumber, copyText } from './copy-text.encoder.js';

describe('COPY text format', () => {
  it('escapes backslash, newline, carriage return and tab, and nothing else', () => {
    expect(copyText('{"a":"x\\"y"}')).toBe('{"a":"x\\\\"y"}');
    expect(copyText('a\nb\rc\td')).toBe('a\\nb\\rc\\td');
    expect(copyText('plain é ✓')).toBe('plain é ✓');
  });

  it('writes NULL, numbers, booleans and bytea as COPY reads them', () => {
    expect(copyText(null)).toBe(COPY_NULL);
    expect(copyNumber(null)).toBe('\\N');
    expect(copyNumber(0.1)).toBe('0.1');
    expect(copyBoolean(true)).toBe('t');
    expect(copyBytea(new Uint8Array([0, 255]))).toBe('\\\\x00ff');
    expect(copyLine(['1', 'a'])).toBe('1\ta\n');
  });
});
