import { CairnError } from '@cairn/contracts';

/*
 * JSON Lines as Cairn reads and writes them (a chain file, `cairn events --json`, the exec stream,
 * the services' logs): one JSON value per line, and a line ends at "\n" only. A "\r" right before
 * the "\n" is dropped (CRLF files read the same); a "\r" anywhere else, U+2028 and U+2029 are text
 * inside a line, never a break: JSON.stringify leaves U+2028/U+2029 raw, so a reader that split on
 * them (Node's readline does) would cut a valid receipt in two. Cairn writes them escaped
 * (`\u2028`, `\u2029`), which parses to the same string, so a receipt's hash is the same either way.
 * Pure and browser-safe: strings, TextDecoder, async iteration; no Node modules.
 */

const LINE_SEPARATORS = /[\u2028\u2029]/g;

/**
 * JSON text with U+2028/U+2029 escaped. They can only occur inside strings (JSON whitespace is
 * space, tab, CR and LF), where the escape means the same character.
 */
export function escapeLineSeparators(json: string): string {
  return json.replace(LINE_SEPARATORS, (separator) => (separator === '\u2028' ? '\\u2028' : '\\u2029'));
}

/** One JSON Lines line, its "\n" included: JSON.stringify's text with U+2028/U+2029 escaped. */
export function jsonLine(value: unknown): string {
  const text = JSON.stringify(value) as string | undefined;
  if (text === undefined) throw new CairnError('E_INTERNAL', `${typeof value} is not JSON: it has no JSON Lines line`);
  return `${escapeLineSeparators(text)}\n`;
}

/** A line that grew past the reader's limit before its "\n" came: refused, not buffered on. */
export class LineTooLongError extends CairnError {
  readonly line: number;
  readonly maxLineLength: number;
  constructor(line: number, maxLineLength: number) {
    super('E_INPUT', `line ${line} is longer than ${maxLineLength} characters`, { line, maxLineLength });
    this.name = 'LineTooLongError';
    this.line = line;
    this.maxLineLength = maxLineLength;
  }
}

/**
 * Splits text fed in any chunks into lines at "\n" only (a "\r" right before it dropped). The
 * part of a line not yet ended is held as pieces, at most `maxLineLength` characters (UTF-16
 * code units) of it: a longer line is refused with LineTooLongError as soon as it is known to be
 * longer — thrown at once, or, when the same text completed lines before it, at the next call
 * (those lines come first, so a reader learns where the long line was).
 */
export class LineSplitter {
  private pieces: string[] = [];
  private pending = 0;
  private lineNo = 0;
  private refused: LineTooLongError | null = null;

  constructor(readonly maxLineLength: number = Number.POSITIVE_INFINITY) {}

  /** The lines this text completes, in order, without their "\n" (or "\r\n"). */
  push(text: string): string[] {
    if (this.refused !== null) throw this.refused;
    const lines: string[] = [];
    let start = 0;
    for (;;) {
      const newline = text.indexOf('\n', start);
      const tail = text.slice(start, newline === -1 ? text.length : newline);
      if (this.pending + tail.length > this.maxLineLength) return this.refuse(lines);
      if (newline === -1) {
        if (tail !== '') {
          this.pieces.push(tail);
          this.pending += tail.length;
        }
        return lines;
      }
      const line = this.pieces.length === 0 ? tail : this.pieces.join('') + tail;
      this.pieces = [];
      this.pending = 0;
      this.lineNo += 1;
      lines.push(line.endsWith('\r') ? line.slice(0, -1) : line);
      start = newline + 1;
    }
  }

  /** The last line when the text did not end in "\n" (kept as it is), else null. */
  end(): string | null {
    if (this.refused !== null) throw this.refused;
    if (this.pieces.length === 0) return null;
    const line = this.pieces.join('');
    this.pieces = [];
    this.pending = 0;
    this.lineNo += 1;
    return line;
  }

  private refuse(before: string[]): string[] {
    this.refused = new LineTooLongError(this.lineNo + 1, this.maxLineLength);
    this.pieces = [];
    this.pending = 0;
    if (before.length === 0) throw this.refused;
    return before;
  }
}

/** The lines of a whole text, split as LineSplitter does (no line after a final "\n"). */
export function splitLines(text: string, maxLineLength?: number): string[] {
  const splitter = new LineSplitter(maxLineLength);
  const lines = splitter.push(text);
  const last = splitter.end();
  if (last !== null) lines.push(last);
  return lines;
}

/**
 * The lines of a byte stream (a file read stream, a fetch body) decoded as UTF-8, split by
 * LineSplitter. A byte order mark is kept (the caller decides what it means); bytes that are not
 * UTF-8 become U+FFFD, as Node's own 'utf8' decoding does.
 */
export async function* readLines(source: AsyncIterable<Uint8Array>, options: { maxLineLength?: number } = {}): AsyncGenerator<string> {
  const decoder = new TextDecoder('utf-8', { ignoreBOM: true });
  const splitter = new LineSplitter(options.maxLineLength);
  for await (const chunk of source) yield* splitter.push(decoder.decode(chunk, { stream: true }));
  yield* splitter.push(decoder.decode());
  const last = splitter.end();
  if (last !== null) yield last;
}
