import { CairnError } from '@cairn/contracts';
import { LineTooLongError, readLines } from '@cairn/evidence/json-lines';

/*
 * Byte streams of a fetch body, browser-safe: as an async iterable, one JSON value per NDJSON line
 * (the shared JSON Lines reader: "\n" only, bounded lines), and read whole up to a bound.
 */

export async function* chunksOf(body: ReadableStream<Uint8Array>): AsyncGenerator<Uint8Array> {
  const reader = body.getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      yield value;
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}

/** A line of the exec stream is one output chunk as base64 (at most 1 MiB of bytes), a result or an error. */
export const MAX_NDJSON_LINE = 4 * 1024 * 1024;

export async function* readNdjson(body: ReadableStream<Uint8Array>, what: string, maxLineLength = MAX_NDJSON_LINE): AsyncGenerator<unknown> {
  try {
    for await (const line of readLines(chunksOf(body), { maxLineLength })) {
      if (line.trim() === '') continue;
      let value: unknown;
      try {
        value = JSON.parse(line);
      } catch {
        throw new CairnError('E_INTERNAL', `${what}: a line that is not JSON: ${line.slice(0, 80)}`);
      }
      yield value;
    }
  } catch (error) {
    if (error instanceof LineTooLongError) throw new CairnError('E_INTERNAL', `${what}: a line longer than ${maxLineLength} characters`, { line: error.line });
    throw error;
  }
}

/** The whole body, refused (E_TOO_LARGE) as soon as it passes `maxBytes`. */
export async function readAll(body: ReadableStream<Uint8Array> | null, maxBytes: number, what: string): Promise<Uint8Array> {
  if (body === null) return new Uint8Array(0);
  const parts: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of chunksOf(body)) {
    size += chunk.byteLength;
    if (size > maxBytes) throw new CairnError('E_TOO_LARGE', `${what}: more than the ${maxBytes} bytes this client reads at once`, { maxBytes });
    parts.push(chunk);
  }
  const out = new Uint8Array(size);
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.byteLength;
  }
  return out;
}
