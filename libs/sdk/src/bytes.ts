import { CairnError } from '@cairn/contracts';

/* Bytes in and out, browser-safe: WebCrypto for sha256, no Buffer. */

/** WebCrypto is there (Node, and a browser in a secure context: HTTPS or localhost). */
export function canHash(): boolean {
  return typeof globalThis.crypto !== 'undefined' && typeof globalThis.crypto.subtle !== 'undefined';
}

export async function sha256Hex(bytes: Uint8Array): Promise<string> {
  if (!canHash()) throw new CairnError('E_UNAVAILABLE', 'no WebCrypto here (a browser has it only in a secure context): the bytes cannot be checked');
  // A copy on its own ArrayBuffer: what WebCrypto's types take in every environment.
  const digest = await globalThis.crypto.subtle.digest('SHA-256', new Uint8Array(bytes));
  return Array.from(new Uint8Array(digest), (byte) => byte.toString(16).padStart(2, '0')).join('');
}

const LOSSY = new TextDecoder('utf-8');
const STRICT = new TextDecoder('utf-8', { fatal: true });

/** UTF-8 text, invalid bytes as U+FFFD. */
export function decodeText(bytes: Uint8Array): string {
  return LOSSY.decode(bytes);
}

/** UTF-8 text, or null when the bytes are not UTF-8. */
export function decodeUtf8(bytes: Uint8Array): string | null {
  try {
    return STRICT.decode(bytes);
  } catch {
    return null;
  }
}

export function encodeText(text: string): Uint8Array {
  return new TextEncoder().encode(text);
}

export function toBase64(bytes: Uint8Array): string {
  let binary = '';
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(binary);
}

export function fromBase64(text: string): Uint8Array {
  const binary = atob(text);
  const out = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) out[i] = binary.charCodeAt(i);
  return out;
}
