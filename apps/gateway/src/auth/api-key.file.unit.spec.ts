import { isCairnError } from '@cairn/contracts';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { generateApiKey } from './api-key.codec.js';
import { readApiKeyFile } from './api-key.file.js';

describe('readApiKeyFile (CAIRN_API_KEY_FILE)', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'cairn-api-key-file-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  async function errorOf(path: string): Promise<unknown> {
    return readApiKeyFile(path).then(
      () => null,
      (error: unknown) => error,
    );
  }

  it('given a 0600 file of this user holding one key and a newline, when read, then the key comes back', async () => {
    const { key } = generateApiKey();
    await writeFile(join(dir, 'api-key'), `${key}\n`, { mode: 0o600 });
    expect(await readApiKeyFile(join(dir, 'api-key'))).toBe(key);
  });

  it('given a file others may read, when read, then E_INPUT names its mode and not its content', async () => {
    const { key } = generateApiKey();
    await writeFile(join(dir, 'api-key'), key, { mode: 0o600 });
    await chmod(join(dir, 'api-key'), 0o644);
    const error = await errorOf(join(dir, 'api-key'));
    expect(isCairnError(error) && error.code).toBe('E_INPUT');
    expect(String((error as Error).message)).toMatch(/mode 0644/);
    expect(String((error as Error).message)).not.toContain(key);
  });

  it('given a file holding something else than one key, or no file, when read, then E_INPUT without echoing it', async () => {
    await writeFile(join(dir, 'api-key'), 'hunter2-not-a-key\n', { mode: 0o600 });
    const malformed = await errorOf(join(dir, 'api-key'));
    expect(isCairnError(malformed) && malformed.code).toBe('E_INPUT');
    expect(String((malformed as Error).message)).not.toContain('hunter2');
    const absent = await errorOf(join(dir, 'nothing'));
    expect(isCairnError(absent) && absent.code).toBe('E_INPUT');
  });
});
