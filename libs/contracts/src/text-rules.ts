import { z } from 'zod';

/** Text with no control characters at all (C0, DEL, C1): names, paths, labels. */
export const NO_CONTROL_CHARS = /^\P{Cc}*$/u;

/** NUL cannot cross exec, C strings or PostgreSQL text; every other character may. */
export function hasNoNul(text: string): boolean {
  return !text.includes('\u0000');
}

/**
 * What in `text` no receipt can carry, or null: a NUL (PostgreSQL's text and jsonb refuse it, so
 * the projector would poison the receipt and every later one of its chain) or a lone surrogate
 * (canonical JSON refuses it, so the append fails).
 */
export function unstorableText(text: string): 'NUL (U+0000)' | 'a lone surrogate' | null {
  if (!hasNoNul(text)) return 'NUL (U+0000)';
  if (!text.isWellFormed()) return 'a lone surrogate';
  return null;
}

/**
 * The one rule for free text that ends up in a receipt or a projection: `<what> may not contain
 * NUL (U+0000)` (or a lone surrogate), then `hint`. Fields with a grammar of their own (ids, names,
 * paths) refuse NUL through it already. Bytes that hold NUL travel base64-encoded instead.
 */
export function storableText(what: string, hint = '') {
  return z.superRefine<string>((text, ctx) => {
    const problem = unstorableText(text);
    if (problem !== null) ctx.addIssue({ code: 'custom', message: `${what} may not contain ${problem}${hint}` });
  });
}

/** The bytes `text` takes as UTF-8 (a lone surrogate counts as U+FFFD's three), without encoding it. */
export function utf8ByteLength(text: string): number {
  let bytes = 0;
  for (let i = 0; i < text.length; i += 1) {
    const unit = text.charCodeAt(i);
    if (unit < 0x80) bytes += 1;
    else if (unit < 0x800) bytes += 2;
    else if (unit >= 0xd800 && unit <= 0xdbff && i + 1 < text.length && (text.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      bytes += 4;
      i += 1;
    } else bytes += 3;
  }
  return bytes;
}
