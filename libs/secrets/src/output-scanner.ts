import { KEY_PATTERNS } from './key-patterns.js';
import type { KeyPattern } from './key-patterns.js';

/*
 * Redaction before hashing (PRODUCT.md): output is scanned, and what a scan finds is replaced by a
 * marker before anything is stored, hashed or appended. Pure: bytes in, redacted bytes and what was
 * found (pattern, secret name, count — never the text) out.
 *
 * Bytes are scanned as latin1, one character per byte, so binary output is scanned and rebuilt byte
 * for byte, and a UTF-8 value is found as its UTF-8 bytes.
 */

/** A secret of the run, by name, with its value. */
export interface ScannedSecret {
  readonly name: string;
  readonly value: Uint8Array;
}

/** How a secret's value was spelled where it was found. */
export const SECRET_ENCODINGS = ['plain', 'base64', 'base64url', 'hex', 'url', 'json', 'line'] as const;
export type SecretEncoding = (typeof SECRET_ENCODINGS)[number];

/** One kind of thing a scan found, and how often. */
export interface Finding {
  /** `secret.<encoding>` for a secret of the run; a key pattern's id (`github-token`, …) otherwise. */
  readonly pattern: string;
  /** The secret's name when the finding is one of the run's secrets; null for a key pattern. */
  readonly secret: string | null;
  readonly count: number;
}

export interface ScanOutcome {
  /** The input itself when nothing was found; otherwise the input with every finding replaced. */
  readonly bytes: Uint8Array;
  readonly findings: readonly Finding[];
}

/** What replaces a finding: `[REDACTED:API_TOKEN]`, `[REDACTED:github-token]`. */
export function redactionMarker(label: string): string {
  return `[REDACTED:${label}]`;
}

/** Spellings shorter than this are not looked for: they would match ordinary output. */
const MIN_NEEDLE_CHARS = 8;

/**
 * The part of base64(prefix ‖ value) that depends on the value alone, for each of the three
 * alignments the value can have in a longer base64 stream: the characters whose six bits all come
 * from the value's bytes.
 */
function base64Spellings(value: Uint8Array, alphabet: 'base64' | 'base64url'): string[] {
  const out: string[] = [];
  for (let offset = 0; offset < 3; offset++) {
    const encoded = Buffer.concat([Buffer.alloc(offset), value]).toString(alphabet).replace(/=+$/, '');
    const first = Math.ceil((8 * offset) / 6);
    const end = Math.floor((8 * (offset + value.length)) / 6);
    out.push(encoded.slice(first, end));
  }
  return out;
}

/** One spelling of a secret, looked for as a literal (latin1, one character per byte). */
interface Needle {
  readonly text: string;
  readonly secret: string;
  readonly encoding: SecretEncoding;
  /** Encoders (base64, hex) wrap long lines: a line break may fall between any two characters. */
  readonly wraps: boolean;
}

function needlesOf(secret: ScannedSecret): Needle[] {
  const bytes = Buffer.from(secret.value.buffer, secret.value.byteOffset, secret.value.byteLength);
  const text = bytes.toString('utf8');
  const needles: Needle[] = [];
  const add = (encoding: SecretEncoding, spelling: string, wraps: boolean) => {
    if (spelling.length < MIN_NEEDLE_CHARS || needles.some((n) => n.text === spelling)) return;
    needles.push({ text: spelling, secret: secret.name, encoding, wraps });
  };
  const spellAll = (value: Buffer) => {
    const valueText = value.toString('utf8');
    add('plain', value.toString('latin1'), false);
    for (const spelling of base64Spellings(value, 'base64')) add('base64', spelling, true);
    for (const spelling of base64Spellings(value, 'base64url')) add('base64url', spelling, true);
    add('hex', value.toString('hex'), true);
    add('hex', value.toString('hex').toUpperCase(), true);
    // As a URL or a JSON string would carry it; each as UTF-8 bytes seen as latin1, like the output.
    add('url', Buffer.from(encodeURIComponent(valueText), 'utf8').toString('latin1'), false);
    add('json', Buffer.from(JSON.stringify(valueText).slice(1, -1), 'utf8').toString('latin1'), false);
  };
  spellAll(bytes);
  // `echo $(cat /run/secrets/X)` prints the value without the whitespace around it (a stored
  // "tok\n", a PEM's last line break): the trimmed value is looked for in every spelling too.
  const trimmed = text.trim();
  if (trimmed !== text) spellAll(Buffer.from(trimmed, 'utf8'));
  // One line of a multi-line secret (a PEM's body) printed alone is the secret seen as well.
  const lines = text.split(/\r?\n/);
  if (lines.length > 1) for (const line of lines) add('line', Buffer.from(line.trim(), 'utf8').toString('latin1'), false);
  return needles;
}

/** Characters of every bounded key shape (KEY_PATTERNS), and a bound on how long one is. */
const KEY_CHAR = /[A-Za-z0-9_\-+/=.:%]/;
const KEY_SPAN = 512;
/** The start of a private key's armour line at the end of a text, and a bound on its length. */
const ARMOUR_TAIL = /-[-A-Z0-9 ]*$/;
const ARMOUR_SPAN = 80;
/** A private key block (the `private-key` key pattern) whose END line has not come yet, or not all of it. */
const OPEN_KEY_BLOCK = /-----BEGIN[A-Z0-9 ]{0,40} PRIVATE KEY(?: BLOCK)?-----(?:[^-]|-(?!----END))*(?:-----END[^\n]{0,80})?$/;

/**
 * The length of the longest proper prefix of `needle` that `text` ends with, looked for only
 * above `atLeast` (a longer hold is all that matters to the caller); 0 when none.
 */
function partialAtEnd(text: string, needle: string, atLeast: number): number {
  for (let k = Math.min(needle.length - 1, text.length); k > atLeast; k--) {
    if (text.endsWith(needle.slice(0, k))) return k;
  }
  return 0;
}

/** A stretch of the scanned text to replace. */
interface Hit {
  readonly start: number;
  readonly end: number;
  readonly needle: Needle;
}

/** Every occurrence of `needle` in `text` (String.indexOf: a fast substring search). */
function occurrences(text: string, needle: string): [number, number][] {
  const out: [number, number][] = [];
  for (let at = text.indexOf(needle); at !== -1; at = text.indexOf(needle, at + needle.length)) out.push([at, at + needle.length]);
  return out;
}

/**
 * `text` without its line breaks, and how to find a position of it in `text` again: for a wrapped
 * encoding, the value's spelling is looked for in the unwrapped text.
 */
class Unwrapped {
  readonly text: string;
  /** For each removed character, where it sat in the unwrapped text (non-decreasing). */
  private readonly removedAt: Int32Array;

  constructor(original: string) {
    let removed = 0;
    for (let i = 0; i < original.length; i++) {
      const c = original.charCodeAt(i);
      if (c === 10 || c === 13) removed++;
    }
    this.removedAt = new Int32Array(removed);
    let n = 0;
    for (let i = 0; i < original.length; i++) {
      const c = original.charCodeAt(i);
      if (c === 10 || c === 13) {
        this.removedAt[n] = i - n;
        n++;
      }
    }
    this.text = removed === 0 ? original : original.replace(/[\r\n]/g, '');
  }

  /** The position in the original text of the character at `index` of the unwrapped one. */
  originalIndex(index: number): number {
    let low = 0;
    let high = this.removedAt.length;
    while (low < high) {
      const mid = (low + high) >>> 1;
      if ((this.removedAt[mid] ?? 0) <= index) low = mid + 1;
      else high = mid;
    }
    return index + low;
  }
}

/** The combined key patterns, each alternative a capture group, and which group is which. */
interface KeyAlternation {
  readonly regex: RegExp;
  readonly patterns: readonly KeyPattern[];
}

/**
 * Finds a run's secrets (plain, base64 and base64url at every alignment, hex in either case,
 * URL-encoded, JSON-escaped; base64 and hex also across line breaks) and the key patterns in
 * output, and replaces each with its marker. Build one per run; `scan` is pure and reusable.
 */
export class OutputScanner {
  private readonly needles: readonly Needle[];
  private readonly keys: KeyAlternation | null;

  constructor(secrets: readonly ScannedSecret[], patterns: readonly KeyPattern[] = KEY_PATTERNS) {
    this.needles = secrets.flatMap(needlesOf);
    this.keys = patterns.length === 0 ? null : { regex: new RegExp(patterns.map((p) => `(${p.regex.source})`).join('|'), 'g'), patterns };
  }

  scan(input: Uint8Array): ScanOutcome {
    const tally = new Map<string, Finding>();
    const found = (pattern: string, secret: string | null) => {
      const key = `${pattern}\u0000${secret ?? ''}`;
      tally.set(key, { pattern, secret, count: (tally.get(key)?.count ?? 0) + 1 });
    };
    const original = Buffer.from(input.buffer, input.byteOffset, input.byteLength).toString('latin1');
    // The run's own secrets first: a key the store holds is named by its secret, not its shape.
    let text = this.redactSecrets(original, (needle) => found(`secret.${needle.encoding}`, needle.secret));
    if (this.keys !== null) {
      const { regex, patterns } = this.keys;
      regex.lastIndex = 0;
      text = text.replace(regex, (match: string, ...groups: unknown[]) => {
        const pattern = patterns[groups.slice(0, patterns.length).findIndex((g) => g !== undefined)];
        if (pattern === undefined) return match;
        found(pattern.id, null);
        return redactionMarker(pattern.id);
      });
    }
    if (tally.size === 0) return { bytes: input, findings: [] };
    const findings = [...tally.values()].sort((a, b) => (a.secret ?? '').localeCompare(b.secret ?? '') || a.pattern.localeCompare(b.pattern));
    return { bytes: new Uint8Array(Buffer.from(text, 'latin1')), findings };
  }

  /**
   * `scan` of a string (its UTF-8 bytes): what a receipt field, a log line or an error message
   * would carry. Returns the string itself when nothing was found.
   */
  scanText(text: string): { text: string; findings: readonly Finding[] } {
    const scanned = this.scan(new TextEncoder().encode(text));
    if (scanned.findings.length === 0) return { text, findings: [] };
    return { text: new TextDecoder().decode(scanned.bytes), findings: scanned.findings };
  }

  /**
   * For output scanned while it streams: how many characters at the end of `text` (latin1, one per
   * byte) could be the start of something `scan` replaces once more output follows — a spelling of
   * one of the secrets (base64 and hex across line breaks too), a key's shape, a private key's
   * armour. A streaming caller holds those back until it has seen what follows (or the end).
   */
  heldTail(text: string): number {
    let hold = 0;
    const wrapped: Needle[] = [];
    for (const needle of this.needles) {
      if (needle.wraps) wrapped.push(needle);
      else hold = Math.max(hold, partialAtEnd(text, needle.text, hold));
    }
    if (wrapped.length > 0) {
      // The tail without its line breaks, long enough for any wrapped spelling but its last character.
      const longest = Math.max(...wrapped.map((n) => n.text.length));
      const at: number[] = [];
      for (let i = text.length - 1; i >= 0 && at.length < longest - 1; i--) {
        const c = text.charCodeAt(i);
        if (c !== 10 && c !== 13) at.push(i);
      }
      at.reverse();
      const unwrapped = at.map((i) => text[i]).join('');
      for (const needle of wrapped) {
        const k = partialAtEnd(unwrapped, needle.text, 0);
        if (k > 0) hold = Math.max(hold, text.length - (at[at.length - k] ?? 0));
      }
    }
    if (this.keys !== null) {
      // Every bounded key shape is made of these characters and is shorter than KEY_SPAN: a run of
      // them at the end may be a key still being written.
      let run = 0;
      while (run < KEY_SPAN && run < text.length && KEY_CHAR.test(text[text.length - 1 - run]!)) run++;
      hold = Math.max(hold, run);
      // A private key's armour (`-----BEGIN … PRIVATE KEY-----`) has spaces in it.
      const armour = ARMOUR_TAIL.exec(text.slice(-ARMOUR_SPAN));
      if (armour !== null) hold = Math.max(hold, armour[0].length);
      // A private key block not closed yet is replaced up to the end of the text: hold all of it.
      const open = OPEN_KEY_BLOCK.exec(text);
      if (open !== null) hold = Math.max(hold, text.length - open.index);
    }
    return Math.min(hold, text.length);
  }

  private redactSecrets(text: string, found: (needle: Needle) => void): string {
    if (this.needles.length === 0) return text;
    const hits: Hit[] = [];
    let unwrapped: Unwrapped | null = null;
    for (const needle of this.needles) {
      if (!needle.wraps) {
        for (const [start, end] of occurrences(text, needle.text)) hits.push({ start, end, needle });
        continue;
      }
      unwrapped ??= new Unwrapped(text);
      for (const [start, end] of occurrences(unwrapped.text, needle.text)) {
        hits.push({ start: unwrapped.originalIndex(start), end: unwrapped.originalIndex(end - 1) + 1, needle });
      }
    }
    if (hits.length === 0) return text;
    // Earliest first, the longest of those; an overlapping later hit is already covered.
    hits.sort((a, b) => a.start - b.start || b.end - a.end);
    const pieces: string[] = [];
    let at = 0;
    for (const hit of hits) {
      if (hit.start < at) continue;
      pieces.push(text.slice(at, hit.start), redactionMarker(hit.needle.secret));
      found(hit.needle);
      at = hit.end;
    }
    pieces.push(text.slice(at));
    return pieces.join('');
  }
}
