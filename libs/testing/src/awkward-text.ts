/*
 * Text that line readers trip over, and JSON written by a serialiser that is not Cairn's: for
 * tests that a chain whose strings hold them still verifies wherever it is read (docs/testing.md).
 */

const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => String.fromCharCode(from + i));

/** Every control character: U+0000–U+001F, U+007F and U+0080–U+009F (\p{Cc}). */
export const CONTROL_CHARACTERS: readonly string[] = [...range(0x00, 0x1f), '\u007f', ...range(0x80, 0x9f)];

/** U+2028 LINE SEPARATOR and U+2029 PARAGRAPH SEPARATOR: JSON.stringify leaves them raw; Node's readline splits on them. */
export const LINE_SEPARATORS: readonly string[] = ['\u2028', '\u2029'];

/**
 * One string holding every control character (NUL only when asked: no argv, env value or receipt
 * text may hold it), U+2028, U+2029, a lone "\r" and a "\r\n" pair, each between letters.
 */
export function awkwardText(options: { nul?: boolean } = {}): string {
  const controls = CONTROL_CHARACTERS.filter((char) => options.nul === true || char !== '\u0000');
  return `a${[...controls, ...LINE_SEPARATORS, '\r', '\r\n'].join('b')}z`;
}

/** Only what is not a control character: what a run name or a file name may hold (U+2028 and U+2029 are not Cc). */
export function awkwardName(): string {
  return `sep\u2028ara\u2029tors`;
}

function foreignString(text: string): string {
  let out = '"';
  for (const char of text) {
    const code = char.codePointAt(0)!;
    if (char === '"' || char === '\\') out += `\\${char}`;
    else if (code < 0x20) out += `\\u${code.toString(16).padStart(4, '0')}`;
    else out += char; // U+007F–U+009F, U+2028, U+2029 and the rest stay raw, as JSON allows
  }
  return `${out}"`;
}

/**
 * JSON as another producer might write it, with no JSON.stringify: strings escape only what JSON
 * requires (`"`, `\` and U+0000–U+001F, always as `\u00XX`) and leave U+2028/U+2029 raw; object
 * keys go in reverse order; a space follows every `:` and `,`. It parses to the same value.
 */
export function foreignJson(value: unknown): string {
  if (value === null) return 'null';
  switch (typeof value) {
    case 'string':
      return foreignString(value);
    case 'number':
    case 'boolean':
      return String(value);
    case 'object':
      if (Array.isArray(value)) return `[${value.map(foreignJson).join(', ')}]`;
      return `{${Object.entries(value as Record<string, unknown>)
        .reverse()
        .map(([key, item]) => `${foreignString(key)}: ${foreignJson(item)}`)
        .join(', ')}}`;
    default:
      throw new Error(`foreignJson: ${typeof value} is not JSON`);
  }
}
