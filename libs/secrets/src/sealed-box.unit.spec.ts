import { diffieHellman, generateKeyPairSync } from 'node:crypto';
import { isCairnError } from '@cairn/contracts';
import { describe, expect, it } from 'vitest';
import * as secrets from './index.js';
import {
  boxKeyIdOf,
  boxPrivateKey,
  formatBoxKeyring,
  formatBoxPublicKeys,
  generateBoxKey,
  openSealedBox,
  parseBoxKeyring,
  parseBoxPublicKeys,
  sealToPublicKey,
} from './sealed-box.js';
import type { BoxKeyring, BoxPrivateKey } from './sealed-box.js';

const ref = { tenant: 'acme', name: 'API_TOKEN' };
const value = new Uint8Array(Buffer.from('s3cr3t-value-for-the-box', 'utf8'));

function ring(...keys: BoxPrivateKey[]): BoxKeyring {
  return { current: keys[0]!, keys };
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

describe('sealToPublicKey / openSealedBox', () => {
  it('given a value sealed to a public key, when opened with its private key and the same ref, then the same bytes come back', () => {
    const key = generateBoxKey();
    const sealed = sealToPublicKey(key.publicKey, ref, value);
    expect(Buffer.from(openSealedBox(ring(key), ref, sealed))).toEqual(Buffer.from(value));
    expect(boxKeyIdOf(sealed)).toBe(key.id);
    expect(sealed[0]).toBe(0x02);
  });

  it('given the same value sealed twice, when compared, then the boxes differ (a fresh ephemeral key each time) and neither holds the value', () => {
    const key = generateBoxKey();
    const a = Buffer.from(sealToPublicKey(key.publicKey, ref, value));
    const b = Buffer.from(sealToPublicKey(key.publicKey, ref, value));
    expect(a.equals(b)).toBe(false);
    expect(a.subarray(9, 41).equals(b.subarray(9, 41))).toBe(false);
    expect(a.includes(Buffer.from(value))).toBe(false);
  });

  it('given any byte of a box flipped, when opened, then it is refused E_INTERNAL (tampered or malformed), never other bytes', () => {
    const key = generateBoxKey();
    const sealed = sealToPublicKey(key.publicKey, ref, value);
    for (let i = 0; i < sealed.length; i++) {
      const edited = Uint8Array.from(sealed);
      edited[i] = edited[i]! ^ 0x01;
      const failed = failure(() => openSealedBox(ring(key), ref, edited));
      expect(failed.code).toBe('E_INTERNAL');
      expect(['tampered', 'malformed', 'unknown_key']).toContain(failed.reason);
    }
  });

  it('given a box of one tenant or name, when opened as another (an AAD swap), then it is refused as tampered', () => {
    const key = generateBoxKey();
    const sealed = sealToPublicKey(key.publicKey, ref, value);
    expect(failure(() => openSealedBox(ring(key), { tenant: 'other', name: 'API_TOKEN' }, sealed)).reason).toBe('tampered');
    expect(failure(() => openSealedBox(ring(key), { tenant: 'acme', name: 'OTHER' }, sealed)).reason).toBe('tampered');
    // A tenant/name split moved across the separator is another binding too.
    expect(failure(() => openSealedBox(ring(key), { tenant: 'acme\nAPI', name: 'TOKEN' }, sealed)).reason).toBe('tampered');
  });

  it('given a box sealed to another key, when opened, then it is unknown_key naming the key id, and a truncated box is malformed', () => {
    const key = generateBoxKey();
    const sealed = sealToPublicKey(generateBoxKey().publicKey, ref, value);
    const unknown = failure(() => openSealedBox(ring(key), ref, sealed));
    expect(unknown).toMatchObject({ code: 'E_INTERNAL', reason: 'unknown_key' });
    expect(unknown.message).toContain(boxKeyIdOf(sealed)!);
    expect(failure(() => openSealedBox(ring(key), ref, sealed.subarray(0, 40))).reason).toBe('malformed');
    expect(failure(() => openSealedBox(ring(key), ref, new Uint8Array(80))).reason).toBe('malformed');
  });

  it('given a keyring with a current and an older key, when a box sealed to the older one is opened, then it opens (rotation)', () => {
    const old = generateBoxKey();
    const current = generateBoxKey();
    const sealed = sealToPublicKey(old.publicKey, ref, value);
    expect(Buffer.from(openSealedBox(ring(current, old), ref, sealed))).toEqual(Buffer.from(value));
  });

  it('given an ephemeral key replaced by a low-order point (all zeros), when opened, then it is refused as tampered', () => {
    const key = generateBoxKey();
    const sealed = sealToPublicKey(key.publicKey, ref, value);
    const edited = Uint8Array.from(sealed);
    edited.fill(0, 9, 41);
    expect(failure(() => openSealedBox(ring(key), ref, edited)).reason).toBe('tampered');
  });

  it('given only the public key (what the gateway holds), when everything the library exports is tried, then no function opens a box without a private key', () => {
    const key = generateBoxKey();
    const sealed = sealToPublicKey(key.publicKey, ref, value);
    // The only open path takes a keyring of private keys; a keyring made of public keys is refused.
    const publicOnly = { current: key.publicKey, keys: [key.publicKey] } as unknown as BoxKeyring;
    expect(() => openSealedBox(publicOnly, ref, sealed)).toThrow();
    const openers = Object.keys(secrets).filter((name) => /open/i.test(name));
    expect(openers.sort()).toEqual(['openSealedBox', 'openSecret']);
    // openSecret is the AES store's (symmetric, its own key file): it does not open a box.
    expect(() => secrets.openSecret({ primary: secrets.generateSecretKey(), keys: [] }, ref, sealed)).toThrow();
    // A box is no DH with the public key alone: the ephemeral public and the recipient public give nothing.
    expect(Buffer.from(sealed).includes(Buffer.from(key.publicKey.bytes))).toBe(false);
  });

  it('given a box sealed here, when opened by an independent X25519+HKDF+GCM reading of the format, then it opens (the format is as documented)', async () => {
    const { createDecipheriv, hkdfSync, createPublicKey } = await import('node:crypto');
    const pair = generateKeyPairSync('x25519');
    const d = Buffer.from(String(pair.privateKey.export({ format: 'jwk' }).d), 'base64url');
    const key = boxPrivateKey(d);
    const sealed = Buffer.from(sealToPublicKey(key.publicKey, ref, value));
    const eph = sealed.subarray(9, 41);
    const shared = diffieHellman({ privateKey: pair.privateKey, publicKey: createPublicKey({ key: { kty: 'OKP', crv: 'X25519', x: eph.toString('base64url') }, format: 'jwk' }) });
    const okm = Buffer.from(hkdfSync('sha256', shared, Buffer.concat([eph, key.publicKey.bytes]), 'cairn.secret-box/v1', 44));
    const decipher = createDecipheriv('aes-256-gcm', okm.subarray(0, 32), okm.subarray(32), { authTagLength: 16 });
    decipher.setAAD(Buffer.concat([sealed.subarray(0, 9), Buffer.from('cairn.secret/v2\nacme\nAPI_TOKEN')]));
    decipher.setAuthTag(sealed.subarray(41, 57));
    expect(Buffer.concat([decipher.update(sealed.subarray(57)), decipher.final()]).toString()).toBe('s3cr3t-value-for-the-box');
  });
});

describe('box key files', () => {
  it('given a keyring formatted, when parsed, then the same keys come back in order, the current first', () => {
    const a = generateBoxKey();
    const b = generateBoxKey();
    const parsed = parseBoxKeyring(`# comment\n\n${formatBoxKeyring([a, b])}`);
    expect(parsed.current.id).toBe(a.id);
    expect(parsed.keys.map((k) => k.id)).toEqual([a.id, b.id]);
    expect(parseBoxPublicKeys(formatBoxPublicKeys([a.publicKey, b.publicKey])).map((k) => k.id)).toEqual([a.id, b.id]);
  });

  it('given a private key line in the public key file, when parsed, then it is refused E_INPUT (the gateway may not hold what opens)', () => {
    const key = generateBoxKey();
    const failed = failure(() => parseBoxPublicKeys(formatBoxKeyring([key])));
    expect(failed.code).toBe('E_INPUT');
    expect(failed.message).toContain('private key');
    expect(failed.message).not.toContain(formatBoxKeyring([key]).trim().slice(15));
  });

  it('given malformed, empty or AES-style key files, when parsed, then E_INPUT names the line, not its content', () => {
    const aes = 'a'.repeat(64);
    const failed = failure(() => parseBoxKeyring(`\n${aes}\n`));
    expect(failed).toMatchObject({ code: 'E_INPUT' });
    expect(failed.message).toContain('line 2');
    expect(failed.message).not.toContain(aes);
    expect(failure(() => parseBoxKeyring('# nothing\n')).code).toBe('E_INPUT');
    expect(failure(() => parseBoxPublicKeys(`x25519-public:${'z'.repeat(64)}`)).code).toBe('E_INPUT');
    expect(failure(() => parseBoxPublicKeys('')).code).toBe('E_INPUT');
  });
});
