import { isCairnError } from '@cairn/contracts';
import { describe, expect, it } from 'vitest';
import { checkSecretName, checkSecretValue, lastFour, MAX_SECRET_BYTES, withoutTrailingNewline } from './secret-value.js';

const bytes = (text: string) => new Uint8Array(Buffer.from(text, 'utf8'));
function codeOf(run: () => unknown): string {
  try {
    run();
    return 'ok';
  } catch (error) {
    return isCairnError(error) ? error.code : 'not a CairnError';
  }
}

describe('secret values and names', () => {
  it('takes UTF-8 text of 8 bytes up to the maximum, and refuses shorter, larger, binary or NUL values', () => {
    expect(codeOf(() => checkSecretValue(bytes('12345678')))).toBe('ok');
    expect(codeOf(() => checkSecretValue(new Uint8Array(MAX_SECRET_BYTES).fill(0x61)))).toBe('ok');
    expect(codeOf(() => checkSecretValue(bytes('1234567')))).toBe('E_INPUT');
    expect(codeOf(() => checkSecretValue(new Uint8Array(MAX_SECRET_BYTES + 1).fill(0x61)))).toBe('E_TOO_LARGE');
    expect(codeOf(() => checkSecretValue(new Uint8Array([0xff, 0xfe, 0x61, 0x61, 0x61, 0x61, 0x61, 0x61])))).toBe('E_INPUT');
    expect(codeOf(() => checkSecretValue(bytes('abcd\u0000efgh')))).toBe('E_INPUT');
  });

  it('never puts the value in its error', () => {
    expect(() => checkSecretValue(bytes('abc\u0000hunter2-zz'))).toThrow(/NUL/);
    expect(() => checkSecretValue(bytes('abc\u0000hunter2-zz'))).not.toThrow(/hunter2/);
    expect(() => checkSecretValue(bytes('hunter2'))).toThrow(/at least 8 bytes/);
    expect(() => checkSecretValue(bytes('hunter2'))).not.toThrow(/hunter2/);
  });

  it('shows the last four characters, counting code points', () => {
    expect(lastFour(bytes('abcdefgh-1234'))).toBe('1234');
    expect(lastFour(bytes('pässwörd-ünï€'))).toBe('-ünï€'.slice(1));
  });

  it('takes RunSpec secret names and refuses others', () => {
    expect(checkSecretName('API_TOKEN')).toBe('API_TOKEN');
    expect(codeOf(() => checkSecretName('api-token'))).toBe('E_INPUT');
    expect(codeOf(() => checkSecretName('A'.repeat(65)))).toBe('E_INPUT');
  });
});

describe('withoutTrailingNewline', () => {
  const text = (bytes: Uint8Array) => Buffer.from(bytes).toString('utf8');
  it('drops exactly one trailing line break (LF or CRLF), nothing else', () => {
    expect(text(withoutTrailingNewline(Buffer.from('value\n')))).toBe('value');
    expect(text(withoutTrailingNewline(Buffer.from('value\r\n')))).toBe('value');
    expect(text(withoutTrailingNewline(Buffer.from('value\n\n')))).toBe('value\n');
    expect(text(withoutTrailingNewline(Buffer.from('value\r')))).toBe('value\r');
    expect(text(withoutTrailingNewline(Buffer.from('  value  ')))).toBe('  value  ');
  });
});
