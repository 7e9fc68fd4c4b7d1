import { createCipheriv, createDecipheriv, createHash, createPrivateKey, createPublicKey, diffieHellman, generateKeyPairSync, hkdfSync } from 'node:crypto';
import type { KeyObject } from 'node:crypto';
import { CairnError } from '@cairn/contracts';
import type { SecretRef } from './secret-cipher.js';

/*
 * Secrets sealed to the workers (ADR 0028): each value sealed on its own to the deployment's X25519
 * public key, HPKE-style — a fresh ephemeral key per seal, HKDF-SHA256 over the shared secret, then
 * AES-256-GCM with the tenant and the name bound as additional data. Whoever holds only the public
 * key (the gateway) can seal and cannot open, not even what it sealed itself; whoever holds a
 * private key (the runtime, and the kernel, verifier and grader that scan with the values) opens.
 *
 *   sealed = 0x02 | key id (8) | ephemeral public key (32) | GCM tag (16) | ciphertext
 *   key ‖ nonce = HKDF-SHA256(ikm = X25519(eph, recipient), salt = eph_pub ‖ recipient_pub,
 *                             info = "cairn.secret-box/v1", 44 bytes)
 *   AAD    = 0x02 | key id | "cairn.secret/v2\n" + tenant + "\n" + name
 *
 * The key id is the first 8 bytes of sha256("cairn.secret-box-key/v1\0" ‖ public key): it names
 * the keypair a value was sealed to (rotation) and says nothing more than the public key does.
 */

export const BOX_VERSION = 0x02;
const KEY_ID_BYTES = 8;
const X25519_BYTES = 32;
const TAG_BYTES = 16;
const HEADER_BYTES = 1 + KEY_ID_BYTES;
const OVERHEAD = HEADER_BYTES + X25519_BYTES + TAG_BYTES;
const INFO = Buffer.from('cairn.secret-box/v1', 'utf8');
/** A private key's line in its file; the public key's. Distinct from the AES key file's bare hex, so neither is taken for the other. */
const PRIVATE_PREFIX = 'x25519-private:';
const PUBLIC_PREFIX = 'x25519-public:';

/** A deployment secrets public key: what the gateway seals to. It opens nothing. */
export interface BoxPublicKey {
  /** 16 lower-case hex characters. */
  readonly id: string;
  /** The raw 32-byte X25519 public key. */
  readonly bytes: Uint8Array;
}

/** A private key with its public half (runtime workers only). */
export interface BoxPrivateKey {
  readonly id: string;
  readonly publicKey: BoxPublicKey;
  /** Node's key object; its raw bytes are never kept elsewhere. */
  readonly key: KeyObject;
}

/** The private keys a worker may open values with: the first is current, the rest older (rotation). */
export interface BoxKeyring {
  readonly current: BoxPrivateKey;
  readonly keys: readonly BoxPrivateKey[];
}

function b64url(bytes: Uint8Array): string {
  return Buffer.from(bytes).toString('base64url');
}

export function boxKeyId(publicKey: Uint8Array): string {
  return createHash('sha256').update('cairn.secret-box-key/v1\u0000').update(publicKey).digest().subarray(0, KEY_ID_BYTES).toString('hex');
}

export function boxPublicKey(bytes: Uint8Array): BoxPublicKey {
  if (bytes.length !== X25519_BYTES) throw new CairnError('E_INPUT', `an X25519 public key is ${X25519_BYTES} bytes, not ${bytes.length}`);
  return { id: boxKeyId(bytes), bytes: Uint8Array.from(bytes) };
}

function publicKeyObject(key: BoxPublicKey): KeyObject {
  return createPublicKey({ key: { kty: 'OKP', crv: 'X25519', x: b64url(key.bytes) }, format: 'jwk' });
}

function privateFromKeyObject(key: KeyObject): BoxPrivateKey {
  const jwk = createPublicKey(key).export({ format: 'jwk' });
  if (typeof jwk.x !== 'string') throw new CairnError('E_INTERNAL', 'an X25519 key without its public half');
  const publicKey = boxPublicKey(Buffer.from(jwk.x, 'base64url'));
  return { id: publicKey.id, publicKey, key };
}

/** A private key from its raw 32 bytes. */
export function boxPrivateKey(bytes: Uint8Array): BoxPrivateKey {
  if (bytes.length !== X25519_BYTES) throw new CairnError('E_INPUT', `an X25519 private key is ${X25519_BYTES} bytes, not ${bytes.length}`);
  const d = b64url(bytes);
  // The public half is derived by node from d; x is required by the JWK import, so derive it first.
  const probe = createPrivateKey({ key: { kty: 'OKP', crv: 'X25519', d, x: b64url(new Uint8Array(X25519_BYTES)) }, format: 'jwk' });
  const x = createPublicKey(probe).export({ format: 'jwk' }).x;
  return privateFromKeyObject(createPrivateKey({ key: { kty: 'OKP', crv: 'X25519', d, x: String(x) }, format: 'jwk' }));
}

/** A fresh keypair. */
export function generateBoxKey(): BoxPrivateKey {
  return privateFromKeyObject(generateKeyPairSync('x25519').privateKey);
}

function privateBytes(key: BoxPrivateKey): Buffer {
  const d = key.key.export({ format: 'jwk' }).d;
  if (typeof d !== 'string') throw new CairnError('E_INTERNAL', 'not a private key');
  return Buffer.from(d, 'base64url');
}

/** The private key file's text: one `x25519-private:<hex>` a line, the current first. */
export function formatBoxKeyring(keys: readonly BoxPrivateKey[]): string {
  return `${keys.map((key) => `${PRIVATE_PREFIX}${privateBytes(key).toString('hex')}`).join('\n')}\n`;
}

/** The public key file's text: the public halves, the current first (`x25519-public:<hex>`). */
export function formatBoxPublicKeys(keys: readonly BoxPublicKey[]): string {
  return `${keys.map((key) => `${PUBLIC_PREFIX}${Buffer.from(key.bytes).toString('hex')}`).join('\n')}\n`;
}

function keyLines(text: string): { line: string; number: number }[] {
  return text
    .split(/\r?\n/)
    .map((raw, index) => ({ line: raw.trim(), number: index + 1 }))
    .filter(({ line }) => line !== '' && !line.startsWith('#'));
}

/** The keyring of a private key file; malformed is E_INPUT naming the line, never its content. */
export function parseBoxKeyring(text: string, source = 'the secrets private key file'): BoxKeyring {
  const keys: BoxPrivateKey[] = [];
  for (const { line, number } of keyLines(text)) {
    const hex = line.startsWith(PRIVATE_PREFIX) ? line.slice(PRIVATE_PREFIX.length) : null;
    if (hex === null || !/^[0-9a-f]{64}$/i.test(hex)) {
      throw new CairnError('E_INPUT', `${source}, line ${number}: a key is x25519-private: and 64 hex characters (cairn up makes the file)`, { line: number });
    }
    const key = boxPrivateKey(Buffer.from(hex, 'hex'));
    if (!keys.some((k) => k.id === key.id)) keys.push(key);
  }
  const current = keys[0];
  if (current === undefined) throw new CairnError('E_INPUT', `${source} holds no key`);
  return { current, keys };
}

/**
 * The public keys of a public key file, the current first. A private key line is refused with
 * E_INPUT: the file given to whoever only seals (the gateway) must not hold what opens.
 */
export function parseBoxPublicKeys(text: string, source = 'the secrets public key file'): BoxPublicKey[] {
  const keys: BoxPublicKey[] = [];
  for (const { line, number } of keyLines(text)) {
    if (line.startsWith(PRIVATE_PREFIX)) {
      throw new CairnError('E_INPUT', `${source}, line ${number}: holds a private key; the sealing side gets the public key file only`, { line: number });
    }
    const hex = line.startsWith(PUBLIC_PREFIX) ? line.slice(PUBLIC_PREFIX.length) : null;
    if (hex === null || !/^[0-9a-f]{64}$/i.test(hex)) {
      throw new CairnError('E_INPUT', `${source}, line ${number}: a key is x25519-public: and 64 hex characters (cairn up makes the file)`, { line: number });
    }
    keys.push(boxPublicKey(Buffer.from(hex, 'hex')));
  }
  if (keys.length === 0) throw new CairnError('E_INPUT', `${source} holds no key`);
  return keys;
}

function additionalData(header: Uint8Array, ref: SecretRef): Buffer {
  return Buffer.concat([header, Buffer.from(`cairn.secret/v2\n${ref.tenant}\n${ref.name}`, 'utf8')]);
}

function derive(shared: Buffer, ephemeral: Uint8Array, recipient: Uint8Array): { key: Buffer; nonce: Buffer } {
  if (shared.every((byte) => byte === 0)) throw new CairnError('E_INTERNAL', 'X25519 gave an all-zero shared secret (a low-order key)');
  const okm = Buffer.from(hkdfSync('sha256', shared, Buffer.concat([ephemeral, recipient]), INFO, 44));
  return { key: okm.subarray(0, 32), nonce: okm.subarray(32, 44) };
}

/** Seals `plaintext` for `ref` to `recipient` (a fresh ephemeral key each time). Needs no private key of the recipient's, and yields nothing that opens it. */
export function sealToPublicKey(recipient: BoxPublicKey, ref: SecretRef, plaintext: Uint8Array): Uint8Array {
  const ephemeral = generateKeyPairSync('x25519');
  const ephemeralPublic = Buffer.from(String(ephemeral.publicKey.export({ format: 'jwk' }).x), 'base64url');
  const shared = diffieHellman({ privateKey: ephemeral.privateKey, publicKey: publicKeyObject(recipient) });
  const { key, nonce } = derive(shared, ephemeralPublic, recipient.bytes);
  const header = Buffer.concat([Buffer.of(BOX_VERSION), Buffer.from(recipient.id, 'hex')]);
  const cipher = createCipheriv('aes-256-gcm', key, nonce, { authTagLength: TAG_BYTES });
  cipher.setAAD(additionalData(header, ref));
  const ciphertext = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  const sealed = new Uint8Array(Buffer.concat([header, ephemeralPublic, cipher.getAuthTag(), ciphertext]));
  key.fill(0);
  shared.fill(0);
  return sealed;
}

/** The id of the key a sealed box names, or null when it is not a sealed box of this format. */
export function boxKeyIdOf(sealed: Uint8Array): string | null {
  if (sealed.length < OVERHEAD || sealed[0] !== BOX_VERSION) return null;
  return Buffer.from(sealed.subarray(1, HEADER_BYTES)).toString('hex');
}

/**
 * Opens a box sealed for `ref` with the keyring's private keys. Malformed, sealed to a key the
 * keyring lacks, edited, or moved from another tenant or name: E_INTERNAL (`reason` says
 * which); the message names the secret, never its bytes.
 */
export function openSealedBox(keyring: BoxKeyring, ref: SecretRef, sealed: Uint8Array): Uint8Array {
  const fail = (reason: 'malformed' | 'unknown_key' | 'tampered', why: string): never => {
    throw new CairnError('E_INTERNAL', `secret ${ref.name} of tenant ${ref.tenant} cannot be opened: ${why}`, { name: ref.name, tenant: ref.tenant, reason });
  };
  const keyId = boxKeyIdOf(sealed);
  if (keyId === null) return fail('malformed', 'it is not a sealed value of this format');
  const recipient = keyring.keys.find((k) => k.id === keyId);
  if (recipient === undefined) return fail('unknown_key', `it was sealed to key ${keyId}, which the private key file does not hold`);
  const header = sealed.subarray(0, HEADER_BYTES);
  const ephemeralPublic = sealed.subarray(HEADER_BYTES, HEADER_BYTES + X25519_BYTES);
  const tag = sealed.subarray(HEADER_BYTES + X25519_BYTES, OVERHEAD);
  let shared: Buffer;
  try {
    shared = diffieHellman({ privateKey: recipient.key, publicKey: publicKeyObject(boxPublicKey(ephemeralPublic)) });
  } catch {
    return fail('tampered', 'its ephemeral key is not a usable X25519 key');
  }
  let derived: { key: Buffer; nonce: Buffer };
  try {
    derived = derive(shared, ephemeralPublic, recipient.publicKey.bytes);
  } catch {
    return fail('tampered', 'its ephemeral key is a low-order point');
  }
  const decipher = createDecipheriv('aes-256-gcm', derived.key, derived.nonce, { authTagLength: TAG_BYTES });
  decipher.setAAD(additionalData(header, ref));
  decipher.setAuthTag(tag);
  try {
    return new Uint8Array(Buffer.concat([decipher.update(sealed.subarray(OVERHEAD)), decipher.final()]));
  } catch {
    return fail('tampered', 'its ciphertext fails authentication (edited, or moved from another secret)');
  } finally {
    derived.key.fill(0);
    shared.fill(0);
  }
}
