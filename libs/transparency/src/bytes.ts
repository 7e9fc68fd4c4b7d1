import { CairnError } from '@cairn/contracts';

/*
 * Bytes, hex and base64 without Node's Buffer, and SHA-256 through WebCrypto: this library runs
 * unchanged in a browser (the dashboard's verification) and in Node 24 (globalThis.crypto).
 */

export type Bytes = Uint8Array<ArrayBuffer>;

const encoder = new TextEncoder();

export function utf8(text: string): Bytes {
  return encoder.encode(text);
}

export function concatBytes(...parts: readonly Uint8Array[]): Bytes {
  const out = new Uint8Array(parts.reduce((sum, part) => sum + part.length, 0));
  let offset = 0;
  for (const part of parts) {
    out.set(part, offset);
    offset += part.length;
  }
  return out;
}

export function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a[i]! ^ b[i]!;
  return diff === 0;
}

export function toHex(bytes: Uint8Array): string {
  return Array.from(bytes, (byte) => byte.toString(16).padStart(2, '0')).join('');
}

export function fromHex(hex: string, what = 'hex'): Bytes {
  if (hex.length % 2 !== 0 || !/^[0-9a-f]*$/.test(hex)) throw new CairnError('E_INPUT', `${what} is not lower-case hex of whole bytes`);
  const out = new Uint8Array(hex.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = Number.parseInt(hex.slice(i * 2, i * 2 + 2), 16);
  return out;
}

/** Standard base64 (RFC 4648 §4), padded. */
export function toBase64(bytes: Uint8Array): string {
  let binary = '';
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary);
}

/** Standard base64 (RFC 4648 §4) in its one canonical form: padded, no whitespace, zero pad bits. */
export function fromBase64(text: string, what = 'base64'): Bytes {
  if (text.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(text)) throw new CairnError('E_INPUT', `${what} is not standard padded base64`);
  const binary = atob(text);
  const out = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) out[i] = binary.charCodeAt(i);
  if (toBase64(out) !== text) throw new CairnError('E_INPUT', `${what} is not canonical base64`);
  return out;
}

export async function sha256(data: Uint8Array<ArrayBuffer>): Promise<Bytes> {
  return new Uint8Array(await crypto.subtle.digest('SHA-256', data));
}
