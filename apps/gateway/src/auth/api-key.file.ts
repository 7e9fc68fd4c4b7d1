import { readFile } from 'node:fs/promises';
import { CairnError } from '@cairn/contracts';
import { checkKeyFileMode } from '@cairn/secret-store';
import { API_KEY_PATTERN } from './api-key.codec.js';

/**
 * The bootstrap key from CAIRN_API_KEY_FILE (a compose or Kubernetes secret): a regular file only its
 * owner — this process's user — may read, holding one API key and at most a trailing newline. E_INPUT
 * names the file and the problem, never its content.
 */
export async function readApiKeyFile(path: string): Promise<string> {
  await checkKeyFileMode(path, 'API key file (CAIRN_API_KEY_FILE)');
  const text = await readFile(path, 'utf8').catch((error: unknown) => {
    throw new CairnError('E_INPUT', `the API key file ${path} cannot be read: ${(error as NodeJS.ErrnoException).code ?? String(error)}`, { path });
  });
  const key = text.endsWith('\n') ? text.slice(0, -1) : text;
  if (!API_KEY_PATTERN.test(key)) throw new CairnError('E_INPUT', `the API key file ${path} does not hold one API key of the form cairn_<8-char prefix>_<secret>`, { path });
  return key;
}
