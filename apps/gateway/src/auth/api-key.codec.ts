import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

/*
 * API keys (PRODUCT.md): 256-bit random secrets behind a public prefix, `cairn_<prefix>_<secret>`.
 * The prefix finds the row; only the SHA-256 of the whole key is stored, compared in constant time.
 */


const PREFIX_ALPHABET = 'abcdefghijklmnopqrstuvwxyz234567';
const PREFIX_LENGTH = 8;
const SECRET_BYTES = 32;

/** `cairn_` + 8 base32 characters + `_` + 43 base64url characters (32 bytes). */
export const API_KEY_PATTERN = /^cairn_([a-z2-7]{8})_([A-Za-z0-9_-]{43})$/;

export interface GeneratedApiKey {
  prefix: string;
  key: string;
}

/** A fresh key: 40 random bits of public prefix and 256 random bits of secret. */
export function generateApiKey(random: (size: number) => Buffer = randomBytes): GeneratedApiKey {
  const bytes = random(PREFIX_LENGTH);
  // 8 bytes give 8 characters of 5 bits each (the top 3 bits of each byte are dropped).
  const prefix = Array.from(bytes, (byte) => PREFIX_ALPHABET[byte & 31] ?? 'a').join('');
  const secret = random(SECRET_BYTES).toString('base64url');
  return { prefix, key: `cairn_${prefix}_${secret}` };
}

/** A fresh secret behind an existing prefix: a rotation keeps the key's public part. */
export function generateApiKeyFor(prefix: string, random: (size: number) => Buffer = randomBytes): GeneratedApiKey {
  if (!/^[a-z2-7]{8}$/.test(prefix)) throw new Error('an API key prefix is 8 characters of [a-z2-7]');
  return { prefix, key: `cairn_${prefix}_${random(SECRET_BYTES).toString('base64url')}` };
}

/** The last four characters of a key: enough for a person to tell keys apart, never more. */
export function apiKeyLastFour(key: string): string {
  return key.slice(-4);
}

/** The public prefix of a well-formed key, or null. */
export function apiKeyPrefix(text: string): string | null {
  return API_KEY_PATTERN.exec(text)?.[1] ?? null;
}

/** Lower-case hex SHA-256 of the whole key: what the table stores. */
export function apiKeySha256(key: string): string {
  return createHash('sha256').update(key, 'utf8').digest('hex');
}

/** Compares two hex digests in time that does not depend on where they differ. */
export function sameDigest(aHex: string, bHex: string): boolean {
  const a = Buffer.from(aHex, 'hex');
  const b = Buffer.from(bHex, 'hex');
  return a.length === 32 && b.length === 32 && timingSafeEqual(a, b);
}


/** `Authorization: Bearer <key>` → the key text, or null when the header is absent or another scheme. */
export function bearerToken(header: string | string[] | undefined): string | null {
  if (typeof header !== 'string') return null;
  const match = /^Bearer[ ]+(\S+)[ ]*$/i.exec(header);
  return match?.[1] ?? null;
}
