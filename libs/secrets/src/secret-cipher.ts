import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import { CairnError } from '@cairn/contracts';

/*
 * Secrets at rest: each value sealed on its own with AES-256-GCM under the operator's key, bound to
 * its tenant and name (the additional data), so a ciphertext copied to another row, tenant or name
 * fails to open just as an edited one does.
 *
 *   sealed = 0x01 | key id (8 bytes) | IV (12 bytes) | GCM tag (16 bytes) | ciphertext
 *   AAD    = 0x01 | key id | "cairn.secret/v1\n" + tenant + "\n" + name
 *
 * The key id is the first 8 bytes of sha256("cairn.secret-key/v1\0" ‖ key): it says which key of
 * the keyring sealed a value (rotation) and reveals nothing about the key.
 */

export const SECRET_KEY_BYTES = 32;
const VERSION = 0x01;
const KEY_ID_BYTES = 8;
const IV_BYTES = 12;
const TAG_BYTES = 16;
const HEADER_BYTES = 1 + KEY_ID_BYTES;
const OVERHEAD = HEADER_BYTES + IV_BYTES + TAG_BYTES;

export interface SecretKey {
  /** 16 lower-case hex characters. */
  readonly id: string;
  readonly bytes: Uint8Array;
}

/** The keys a store may open values with; new values are sealed with `primary` (the first). */
export interface SecretKeyring {
  readonly primary: SecretKey;
  readonly keys: readonly SecretKey[];
}

/** Which secret a value belongs to: sealed with it, so it cannot be moved. */
export interface SecretRef {
  readonly tenant: string;
  readonly name: string;
}

export function secretKeyId(key: Uint8Array): string {
  return createHash('sha256').update('cairn.secret-key/v1\u0000').update(key).digest().subarray(0, KEY_ID_BYTES).toString('hex');
}

export function secretKey(bytes: Uint8Array): SecretKey {
  if (bytes.length !== SECRET_KEY_BYTES) throw new CairnError('E_INPUT', `a secret key is ${SECRET_KEY_BYTES} bytes, not ${bytes.length}`);
  return { id: secretKeyId(bytes), bytes: Uint8Array.from(bytes) };
}

/** A fresh random key. */
export function generateSecretKey(): SecretKey {
  return secretKey(randomBytes(SECRET_KEY_BYTES));
}

/**
 * The key file's text: one key per line as 64 hex characters, the first the primary (new values
 * are sealed with it), the rest older keys still accepted for opening (rotation). Blank lines and
 * `#` comments are ignored. A malformed file is E_INPUT naming the line, never its content.
 */
export function parseSecretKeyring(text: string, source = 'the secret key file'): SecretKeyring {
  const keys: SecretKey[] = [];
  text.split(/\r?\n/).forEach((raw, index) => {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) return;
    if (!/^[0-9a-fA-F]{64}$/.test(line)) {
      throw new CairnError('E_INPUT', `${source}, line ${index + 1}: a key is 64 hex characters (32 bytes), e.g. from \`openssl rand -hex 32\``, { line: index + 1 });
    }
    const key = secretKey(Buffer.from(line, 'hex'));
    if (!keys.some((k) => k.id === key.id)) keys.push(key);
  });
  const primary = keys[0];
  if (primary === undefined) throw new CairnError('E_INPUT', `${source} holds no key`);
  return { primary, keys };
}

/** The text of a key file holding `keys`, the first the primary. */
export function formatSecretKeyring(keys: readonly SecretKey[]): string {
  return `${keys.map((key) => Buffer.from(key.bytes).toString('hex')).join('\n')}\n`;
}

function additionalData(header: Uint8Array, ref: SecretRef): Buffer {
  return Buffer.concat([header, Buffer.from(`cairn.secret/v1\n${ref.tenant}\n${ref.name}`, 'utf8')]);
}

/** Seals `plaintext` for `ref` under the keyring's primary key (a fresh random IV each time). */
export function sealSecret(keyring: SecretKeyring, ref: SecretRef, plaintext: Uint8Array): Uint8Array {
  const key = keyring.primary;
  const header = Buffer.concat([Buffer.of(VERSION), Buffer.from(key.id, 'hex')]);
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', key.bytes, iv, { authTagLength: TAG_BYTES });
  cipher.setAAD(additionalData(header, ref));
  const ciphertext = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  return new Uint8Array(Buffer.concat([header, iv, cipher.getAuthTag(), ciphertext]));
}

/** The id of the key a sealed value names, or null when it is not a sealed value. */
export function sealedKeyId(sealed: Uint8Array): string | null {
  if (sealed.length < OVERHEAD || sealed[0] !== VERSION) return null;
  return Buffer.from(sealed.subarray(1, HEADER_BYTES)).toString('hex');
}

/**
 * Opens a value sealed for `ref`. A value that is malformed, sealed under a key the keyring lacks,
 * edited, or moved from another tenant or name is E_INTERNAL (`reason` says which); the message
 * names the secret, never its bytes.
 */
export function openSecret(keyring: SecretKeyring, ref: SecretRef, sealed: Uint8Array): Uint8Array {
  const fail = (reason: 'malformed' | 'unknown_key' | 'tampered', why: string): never => {
    throw new CairnError('E_INTERNAL', `secret ${ref.name} of tenant ${ref.tenant} cannot be opened: ${why}`, { name: ref.name, tenant: ref.tenant, reason });
  };
  const keyId = sealedKeyId(sealed);
  if (keyId === null) return fail('malformed', 'it is not a sealed value of this format');
  const key = keyring.keys.find((k) => k.id === keyId);
  if (key === undefined) return fail('unknown_key', `it was sealed under key ${keyId}, which the key file does not hold`);
  const header = sealed.subarray(0, HEADER_BYTES);
  const iv = sealed.subarray(HEADER_BYTES, HEADER_BYTES + IV_BYTES);
  const tag = sealed.subarray(HEADER_BYTES + IV_BYTES, OVERHEAD);
  const decipher = createDecipheriv('aes-256-gcm', key.bytes, iv, { authTagLength: TAG_BYTES });
  decipher.setAAD(additionalData(header, ref));
  decipher.setAuthTag(tag);
  try {
    return new Uint8Array(Buffer.concat([decipher.update(sealed.subarray(OVERHEAD)), decipher.final()]));
  } catch {
    return fail('tampered', 'its ciphertext fails authentication (edited, or moved from another secret)');
  }
}
