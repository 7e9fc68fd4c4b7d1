import { GENESIS_HASH } from '@cairn/contracts';
import { describe, expect, it } from 'vitest';
import { canonicalJson } from './canonical-json.js';
import { escapeLineSeparators, jsonLine, LineSplitter, LineTooLongError, readLines, splitLines } from './json-lines.js';
import { receiptHash, sealReceipt } from './receipt-hash.js';
import { verifyChain } from './verify-chain.js';

// Written out here rather than imported from @cairn/testing: a domain library's tests stay within its boundary.
const CONTROLS = [...Array.from({ length: 0x20 }, (_, i) => String.fromCharCode(i)), '\u007f', ...Array.from({ length: 0x20 }, (_, i) => String.fromCharCode(0x80 + i))];
const AWKWARD = `a${[...CONTROLS, '\u2028', '\u2029', '\r', '\r\n'].join('b')}z`;
/** AWKWARD as raw text on one line: all but "\n". */
const INLINE = AWKWARD.replaceAll('\n', '');

function chunked(text: string, size: number): string[] {
  const chunks: string[] = [];
  for (let i = 0; i < text.length; i += size) chunks.push(text.slice(i, i + size));
  return chunks;
}

function feed(chunks: readonly string[], max?: number): string[] {
  const splitter = new LineSplitter(max);
  const lines = chunks.flatMap((chunk) => splitter.push(chunk));
  const last = splitter.end();
  return last === null ? lines : [...lines, last];
}

async function* bytes(...chunks: Uint8Array[]): AsyncGenerator<Uint8Array> {
  for (const chunk of chunks) {
    await Promise.resolve();
    yield chunk;
  }
}

async function collect(source: AsyncIterable<string>): Promise<string[]> {
  const out: string[] = [];
  for await (const line of source) out.push(line);
  return out;
}

function chain(texts: readonly string[]) {
  let prev = GENESIS_HASH;
  return texts.map((text, i) => {
    const receipt = sealReceipt(prev, { v: 1, seq: i + 1, run_id: 'run_lines', tenant: 'default', type: 'step.completed', actor: 'runtime', ts: '2026-12-01T00:00:00.000Z', causation: null, argv: ['echo', text], name: text });
    prev = receipt.hash;
    return receipt;
  });
}

describe('LineSplitter: lines end at "\\n" only', () => {
  it('keeps U+2028, U+2029, a lone "\\r", VT, FF, NEL and every other control character inside the line', () => {
    const line = `one${'\u2028'}two${'\u2029'}three\rfour\u000bfive\u000csix\u0085seven`;
    expect(splitLines(`${line}\nnext\n`)).toEqual([line, 'next']);
    const everyControl = CONTROLS.filter((c) => c !== '\n').join('');
    expect(splitLines(`${everyControl}\n`)).toEqual([everyControl]);
  });

  it('drops a "\\r" right before "\\n" only: CRLF files read as LF ones, "\\r\\r\\n" keeps one "\\r"', () => {
    expect(splitLines('a\r\nb\r\n')).toEqual(['a', 'b']);
    expect(splitLines('a\r\r\nb')).toEqual(['a\r', 'b']);
    expect(splitLines('\r\n\n')).toEqual(['', '']);
    // A "\r" at the very end, with no "\n" after it, is not a line end: it stays.
    expect(splitLines('a\nb\r')).toEqual(['a', 'b\r']);
  });

  it('gives the last line without a final "\\n", and nothing after one', () => {
    expect(splitLines('a\nb')).toEqual(['a', 'b']);
    expect(splitLines('a\nb\n')).toEqual(['a', 'b']);
    expect(splitLines('')).toEqual([]);
    expect(splitLines('\n')).toEqual(['']);
  });

  it('gives the same lines however the text is cut into chunks (a "\\r\\n" cut between its halves included)', () => {
    const text = `${INLINE}\r\n${INLINE}\n\r\n${'x'.repeat(50)}\u2028\r\nend`;
    const whole = splitLines(text);
    expect(whole).toEqual([INLINE, INLINE, '', `${'x'.repeat(50)}\u2028`, 'end']);
    for (let size = 1; size <= 17; size += 1) expect(feed(chunked(text, size))).toEqual(whole);
  });

  it('refuses a line longer than its limit as soon as it is known, before the "\\n" arrives', () => {
    const splitter = new LineSplitter(10);
    expect(splitter.push('0123456789\nabc')).toEqual(['0123456789']);
    expect(() => splitter.push('defghijk')).toThrow(LineTooLongError);
    // Lines the same text completed before the long one come first; the refusal comes with the next call.
    const after = new LineSplitter(4);
    expect(after.push('ok\n12345')).toEqual(['ok']);
    expect(() => after.push('\n')).toThrow(LineTooLongError);
    expect(() => after.end()).toThrow(expect.objectContaining({ code: 'E_INPUT', line: 2, maxLineLength: 4, message: 'line 2 is longer than 4 characters' }) as Error);
    // Exactly the limit is a line; its "\r" before "\n" counts, the "\n" does not.
    expect(feed(['12', '34\n'], 4)).toEqual(['1234']);
    expect(() => feed(['1234\r\n'], 4)).toThrow(LineTooLongError);
    expect(() => feed(['12345'], 4)).toThrow(LineTooLongError);
  });
});

describe('readLines: bytes decoded as UTF-8, then split', () => {
  it('joins a U+2028 whose three bytes arrive in three chunks, and does not split on it', async () => {
    const encoded = new TextEncoder().encode('a\u2028b\nc\u2029d');
    const pieces = Array.from(encoded, (byte) => Uint8Array.of(byte));
    expect(await collect(readLines(bytes(...pieces)))).toEqual(['a\u2028b', 'c\u2029d']);
  });

  it('keeps a byte order mark for the caller, and reads bytes that are not UTF-8 as U+FFFD', async () => {
    const bom = Uint8Array.of(0xef, 0xbb, 0xbf, 0x7b, 0x7d, 0x0a, 0xff, 0x0a);
    expect(await collect(readLines(bytes(bom)))).toEqual(['\ufeff{}', '\ufffd']);
  });

  it('gives the lines before a line past its limit, then throws LineTooLongError (also when both came in one chunk)', async () => {
    const seen: string[] = [];
    const read = async (...chunks: string[]) => {
      for await (const line of readLines(bytes(...chunks.map((c) => new TextEncoder().encode(c))), { maxLineLength: 64 })) seen.push(line);
    };
    await expect(read('short\n', 'x'.repeat(100))).rejects.toMatchObject({ line: 2 });
    await expect(read(`one\ntwo\n${'x'.repeat(100)}\nthree\n`)).rejects.toBeInstanceOf(LineTooLongError);
    expect(seen).toEqual(['short', 'one', 'two']);
  });
});

describe('jsonLine: one line, U+2028/U+2029 escaped, the same value', () => {
  it('writes every control character and both separators so the line splits as one line and parses back unchanged', () => {
    const value = { argv: ['sh', '-c', AWKWARD], [AWKWARD]: AWKWARD, nested: [{ t: '\u2028\u2029' }] };
    const line = jsonLine(value);
    expect(line.endsWith('\n')).toBe(true);
    expect(line).not.toMatch(/[\u2028\u2029\r]/);
    expect(line.indexOf('\n')).toBe(line.length - 1);
    expect(line).toContain('\\u2028');
    expect(line).toContain('\\u2029');
    expect(splitLines(line)).toHaveLength(1);
    expect(JSON.parse(line)).toEqual(value);
  });

  it('escapes only U+2028 and U+2029: otherwise the text is JSON.stringify\'s', () => {
    const value = { a: 'plain', b: '\u0085\u007f', c: 1.5 };
    expect(jsonLine(value)).toBe(`${JSON.stringify(value)}\n`);
    expect(escapeLineSeparators('"x\u2028y\u2029z"')).toBe('"x\\u2028y\\u2029z"');
    expect(() => jsonLine(undefined)).toThrow(/undefined is not JSON/);
  });

  it('leaves the receipt hash as it was: the raw and the escaped forms canonicalise to the same bytes', () => {
    const [receipt] = chain([AWKWARD]);
    const raw = JSON.stringify(receipt);
    expect(raw).toMatch(/\u2028/);
    const escaped = jsonLine(receipt).trimEnd();
    const fromRaw = JSON.parse(raw) as Record<string, unknown>;
    const fromEscaped = JSON.parse(escaped) as Record<string, unknown>;
    const { prev_hash: _p, hash: _h, ...body } = fromEscaped;
    expect(canonicalJson(fromRaw)).toBe(canonicalJson(fromEscaped));
    // RFC 8785 writes U+2028/U+2029 raw: the canonical form is the same as before any escaping.
    expect(canonicalJson(fromEscaped)).toContain('\u2028');
    expect(receiptHash(GENESIS_HASH, body)).toBe(receipt!.hash);
  });

  it('a chain written raw (as JSON.stringify does), escaped (jsonLine), or with CRLF line ends verifies from its lines', () => {
    const receipts = chain([AWKWARD, '\u2028', '\r', 'plain']);
    const head = receipts.at(-1)!.hash;
    const texts = [
      receipts.map((r) => `${JSON.stringify(r)}\n`).join(''),
      receipts.map(jsonLine).join(''),
      receipts.map((r) => `${JSON.stringify(r)}\r\n`).join(''),
    ];
    for (const text of texts) {
      const result = verifyChain(splitLines(text).map((line) => JSON.parse(line) as unknown), { requireNonEmpty: true });
      expect(result).toMatchObject({ ok: true, count: 4, headHash: head });
    }
    // What Node's readline does to the raw form: the chain no longer parses line by line.
    expect(() => texts[0]!.split(/\r?\n|\r|\u2028|\u2029/).filter((l) => l !== '').map((l) => JSON.parse(l) as unknown)).toThrow(SyntaxError);
  });
});
