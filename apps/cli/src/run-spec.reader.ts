import { constants } from 'node:fs';
import { open } from 'node:fs/promises';
import { extname } from 'node:path';
import { checkJsonText, isCairnError, parseRunSpec } from '@cairn/contracts';
import { parseDocument } from 'yaml';
import { usageError } from './exit-codes.js';

/** A RunSpec file is small; anything bigger is a mistake (the gateway refuses > 1 MiB). */
export const MAX_SPEC_BYTES = 1024 * 1024;
/** Bad bytes are refused, never decoded loosely into U+FFFD. */
const UTF8 = new TextDecoder('utf-8', { fatal: true });

function errnoCode(error: unknown): string {
  return typeof error === 'object' && error !== null && 'code' in error && typeof error.code === 'string' ? error.code : 'unreadable';
}

function parseYamlStrictly(text: string): unknown {
  // Duplicate keys and a second document are errors; a tag the core schema does not know is a
  // warning that `parse` would print and then read as a plain string: refused here instead.
  // (`parseDocument` prints nothing; a `logLevel` of 'silent' would drop the second-document error.)
  const document = parseDocument(text, { schema: 'core', prettyErrors: true, uniqueKeys: true });
  const problem = document.errors[0] ?? document.warnings[0];
  if (problem !== undefined) throw problem;
  return document.toJS({ maxAliasCount: 100 }) as unknown;
}

/**
 * Parses a RunSpec document: JSON for `.json`, YAML otherwise (YAML 1.2 reads JSON too). Either
 * way a key given twice is refused (`JSON.parse` would keep the last one silently), as is JSON
 * nested deeper than any spec needs.
 */
export function parseSpecText(text: string, path: string): unknown {
  const json = extname(path).toLowerCase() === '.json';
  let document: unknown;
  try {
    document = json ? (JSON.parse(text) as unknown) : parseYamlStrictly(text);
  } catch (error) {
    const message = error instanceof Error ? error.message.split('\n')[0] : String(error);
    throw usageError(`${path} is not valid ${json ? 'JSON' : 'YAML'}: ${message}`, { path });
  }
  if (json) {
    try {
      checkJsonText(text);
    } catch (error) {
      if (isCairnError(error)) throw usageError(`${path}: ${error.message}`, { path, ...error.details });
      throw error;
    }
  }
  return document;
}

/**
 * The bytes of a regular file of at most `maxBytes`: a FIFO or a device (`/dev/zero`) would block
 * or never end, so it is refused before anything is read. Also used by `cairn sandbox cp`.
 */
export async function readBoundedRegularFile(path: string, maxBytes: number): Promise<Buffer> {
  const file = await open(path, constants.O_RDONLY | constants.O_NONBLOCK);
  try {
    const info = await file.stat();
    if (!info.isFile()) throw usageError(`${path} is not a regular file`, { path });
    const buffer = Buffer.alloc(maxBytes + 1);
    let length = 0;
    while (length < buffer.length) {
      const { bytesRead } = await file.read(buffer, length, buffer.length - length, null);
      if (bytesRead === 0) break;
      length += bytesRead;
    }
    if (length > maxBytes) throw usageError(`${path} is larger than ${maxBytes} bytes`, { path });
    return buffer.subarray(0, length);
  } finally {
    await file.close();
  }
}

/** The file's text, if it is a regular file of at most MAX_SPEC_BYTES of valid UTF-8. */
async function readSpecFile(path: string): Promise<string> {
  const bytes = await readBoundedRegularFile(path, MAX_SPEC_BYTES);
  try {
    return UTF8.decode(bytes);
  } catch {
    throw usageError(`${path} is not valid UTF-8`, { path });
  }
}

/**
 * Reads a RunSpec (YAML or JSON) and checks it against the contracts before anything is sent:
 * a bad spec is E_INPUT naming the field. Returns the document as written (JSON data), which is
 * what the gateway validates again.
 */
export async function readRunSpec(path: string): Promise<unknown> {
  let text: string;
  try {
    text = await readSpecFile(path);
  } catch (error) {
    if (isCairnError(error)) throw error;
    throw usageError(`cannot read ${path}: ${errnoCode(error)}`, { path });
  }
  const document = parseSpecText(text, path);
  try {
    parseRunSpec(document);
  } catch (error) {
    if (isCairnError(error)) throw usageError(`${path}: ${error.message}`, error.details);
    throw error;
  }
  return document;
}
