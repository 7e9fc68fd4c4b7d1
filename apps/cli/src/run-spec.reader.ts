import { readFile } from 'node:fs/promises';
import { extname } from 'node:path';
import { isCairnError, parseRunSpec } from '@cairn/contracts';
import { parse as parseYaml } from 'yaml';
import { usageError } from './exit-codes.js';

/** A RunSpec file is small; anything bigger is a mistake (the gateway refuses > 1 MiB). */
export const MAX_SPEC_BYTES = 1024 * 1024;

function errnoCode(error: unknown): string {
  return typeof error === 'object' && error !== null && 'code' in error && typeof error.code === 'string' ? error.code : 'unreadable';
}

/** Parses a RunSpec document: JSON for `.json`, YAML otherwise (YAML 1.2 reads JSON too). */
export function parseSpecText(text: string, path: string): unknown {
  const json = extname(path).toLowerCase() === '.json';
  try {
    return json ? (JSON.parse(text) as unknown) : (parseYaml(text, { schema: 'core', prettyErrors: true, maxAliasCount: 100 }) as unknown);
  } catch (error) {
    const message = error instanceof Error ? error.message.split('\n')[0] : String(error);
    throw usageError(`${path} is not valid ${json ? 'JSON' : 'YAML'}: ${message}`, { path });
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
    const buffer = await readFile(path);
    if (buffer.length > MAX_SPEC_BYTES) throw usageError(`${path} is larger than ${MAX_SPEC_BYTES} bytes`, { path });
    text = buffer.toString('utf8');
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
