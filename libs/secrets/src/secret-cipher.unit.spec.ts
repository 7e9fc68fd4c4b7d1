import { isCairnError } from '@cairn/contracts';
import { describe, expect, it } from 'vitest';
import { formatSecretKeyring, generateSecretKey, openSecret, parseSecretKeyring, sealedKeyId, sealSecret, secretKeyId } from './secret-cipher.js';
import type { SecretKeyring } from './secret-cipher.js';

const ref = { tenant: 'acme', name: 'API_TOKEN' };
const value = new Uint8Array(Buffer.from('s3cr3t-value-for-the-cipher', 'utf8'));

function ring(...keys: ReturnType<typeof generateSecretKey>[]): SecretKeyring {
  return { primary: keys[0]!, keys };
}

function failure(run: () => unknown): { code: string; reason: unknown; message: string } {
  try {
    run();
  } catch (error) {
    if (isCairnError(error)) return { code: error.code, reason: error.details?.reason, message: error.message };
    throw error;
  }
  throw new Error('expected a CairnError');
}

describe('sealSecret / openSecret', () => {
  it('given a value sealed for a secret, when opened with the same keyring and ref, then the same bytes come back', () => {
    const keys = ring(generateSecretKey());
    const sealed = sealSecret(keys, ref, value);
    expect(Buffer.from(openSecret(keys, ref, sealed))).toEqual(Buffer.from(value));
    expect(sealedKeyId(sealed)).toBe(keys.primary.id);
  });

  it('given the same value sealed twice, when compared, then the ciphertexts differ (a fresh IV each time) and neither holds the value', () => {
    const keys = ring(generateSecretKey());
    const a = Buffer.from(sealSecret(keys, ref, value));
    const b = Buffer.from(sealSecret(keys, ref, value));
    expect(a.equals(b)).toBe(false);
    expect(a.includes(Buffer.from(value))).toBe(false);
  });

  it('given any byte of a sealed value flipped, when opened, then it fails authentication (E_INTERNAL, tampered)', () => {
    const keys = ring(generateSecretKey());
    const sealed = sealSecret(keys, ref, value);
    for (const at of [9, 9 + 12, 9 + 12 + 16, sealed.length - 1]) {
      const edited = Uint8Array.from(sealed);
      edited[at] = (edited[at]! ^ 0x01) & 0xff;
      expect(failure(() => openSecret(keys, ref, edited))).toMatchObject({ code: 'E_INTERNAL', reason: 'tampered' });
    }
  });

  it('given a sealed value moved to another tenant or name, when opened there, then it fails authentication', () => {
    const keys = ring(generateSecretKey());
    const sealed = sealSecret(keys, ref, value);
    expect(failure(() => openSecret(keys, { ...ref, tenant: 'other' }, sealed)).reason).toBe('tampered');
    expect(failure(() => openSecret(keys, { ...ref, name: 'OTHER' }, sealed)).reason).toBe('tampered');
  });

  it('given a keyring without the key that sealed it, when opened, then it names the unknown key; with the old key kept, it opens', () => {
    const old = generateSecretKey();
    const sealed = sealSecret(ring(old), ref, value);
    const fresh = generateSecretKey();
    const failed = failure(() => openSecret(ring(fresh), ref, sealed));
    expect(failed).toMatchObject({ code: 'E_INTERNAL', reason: 'unknown_key' });
    expect(failed.message).toContain(old.id);
    expect(failed.message).not.toContain('s3cr3t');
    expect(Buffer.from(openSecret(ring(fresh, old), ref, sealed)).toString('utf8')).toBe('s3cr3t-value-for-the-cipher');
  });

  it('given bytes that are not a sealed value, when opened, then it is malformed', () => {
    expect(failure(() => openSecret(ring(generateSecretKey()), ref, new Uint8Array([1, 2, 3]))).reason).toBe('malformed');
  });
});

describe('the key file', () => {
  it('given hex keys one per line with comments, when parsed, then the first is primary and the rest stay for opening', () => {
    const a = generateSecretKey();
    const b = generateSecretKey();
    const parsed = parseSecretKeyring(`# rotated 2026-11-30\n${formatSecretKeyring([a, b])}\n`);
    expect(parsed.primary.id).toBe(a.id);
    expect(parsed.keys.map((k) => k.id)).toEqual([a.id, b.id]);
    expect(secretKeyId(a.bytes)).toBe(a.id);
  });

  it('given a line that is not 64 hex characters, or no key at all, when parsed, then E_INPUT names the line and not its content', () => {
    const bad = failure(() => parseSecretKeyring(`${'ab'.repeat(32)}\nnot-a-key-at-all\n`, '/x/secrets.key'));
    expect(bad).toMatchObject({ code: 'E_INPUT' });
    expect(bad.message).toContain('/x/secrets.key, line 2');
    expect(bad.message).not.toContain('not-a-key');
    expect(failure(() => parseSecretKeyring('# nothing\n')).code).toBe('E_INPUT');
    expect(failure(() => parseSecretKeyring('ab'.repeat(31))).code).toBe('E_INPUT');
  });
});
