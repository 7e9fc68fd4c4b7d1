import { KERNEL_LIMITS } from './kernel-limits.constants.js';

export type TextDecoding = { ok: true; text: string } | { ok: false; reason: string };

const strictUtf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/**
 * Bytes as UTF-8 text, exactly (a BOM is kept; invalid UTF-8 is refused, not replaced), so a text
 * comparison never passes on bytes that are not what they seem.
 */
export function decodeUtf8(bytes: Uint8Array, maxBytes: number = KERNEL_LIMITS.maxTextBytes): TextDecoding {
  if (bytes.byteLength > maxBytes) return { ok: false, reason: `${bytes.byteLength} bytes is more than the ${maxBytes}-byte limit` };
  try {
    return { ok: true, text: strictUtf8.decode(bytes) };
  } catch {
    return { ok: false, reason: 'not valid UTF-8' };
  }
}

/** Bytes as text for reports and listings: invalid sequences become U+FFFD instead of failing. */
export function decodeUtf8Lenient(bytes: Uint8Array): string {
  return new TextDecoder('utf-8', { fatal: false, ignoreBOM: false }).decode(bytes);
}

export type TextContains = { ok: true; contains: boolean } | { ok: false; reason: string };

/** Whether `needle` occurs in `text` (code-unit exact, case-sensitive). */
export function textContains(text: string, needle: string): TextContains {
  if (text.length > KERNEL_LIMITS.maxTextBytes) return { ok: false, reason: `the text is longer than ${KERNEL_LIMITS.maxTextBytes} characters` };
  return { ok: true, contains: text.includes(needle) };
}
