/**
 * PostgreSQL's COPY text format: one line per row, columns separated by tabs, `\N` for NULL, and
 * backslash, newline, carriage return and tab escaped inside values.
 */
const NEEDS_ESCAPE = /[\\\n\r\t]/;
const ESCAPES: Readonly<Record<string, string>> = { '\\': '\\\\', '\n': '\\n', '\r': '\\r', '\t': '\\t' };

export const COPY_NULL = '\\N';

export function copyText(value: string | null): string {
  if (value === null) return COPY_NULL;
  return NEEDS_ESCAPE.test(value) ? value.replace(/[\\\n\r\t]/g, (c) => ESCAPES[c] ?? c) : value;
}

export function copyNumber(value: number | null): string {
  return value === null ? COPY_NULL : String(value);
}

export function copyBoolean(value: boolean): string {
  return value ? 't' : 'f';
}

/** bytea in hex form; its leading backslash is itself escaped for the text format. */
export function copyBytea(value: Uint8Array): string {
  return `\\\\x${Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString('hex')}`;
}

export function copyLine(columns: readonly string[]): string {
  return `${columns.join('\t')}\n`;
}
