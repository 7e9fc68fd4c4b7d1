import { isCairnError } from '@cairn/contracts';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { newApiKey } from './stack-file.js';
import { resolveTarget } from './stack-target.js';

describe('resolveTarget with CAIRN_API_KEY_FILE (a compose stack\'s key)', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'cairn-target-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  const errorOf = (env: NodeJS.ProcessEnv) =>
    resolveTarget(env).then(
      () => null,
      (error: unknown) => error,
    );

  it('given CAIRN_URL and a 0600 key file, when resolved, then the client uses the key in the file', async () => {
    const key = newApiKey();
    await writeFile(join(dir, 'api-key'), `${key}\n`, { mode: 0o600 });
    const target = await resolveTarget({ CAIRN_URL: 'http://127.0.0.1:7420', CAIRN_API_KEY_FILE: join(dir, 'api-key') });
    expect(target.apiKey).toBe(key);
    expect(target.stack).toBeNull();
  });

  it('given a key file others may read, or one without a key, when resolved, then E_INPUT names the variable and not the content', async () => {
    const key = newApiKey();
    await writeFile(join(dir, 'open'), key, { mode: 0o644 });
    const open = await errorOf({ CAIRN_URL: 'http://127.0.0.1:7420', CAIRN_API_KEY_FILE: join(dir, 'open') });
    expect(isCairnError(open) && open.code).toBe('E_INPUT');
    expect(String((open as Error).message)).toMatch(/CAIRN_API_KEY_FILE .* mode 0644/);
    expect(String((open as Error).message)).not.toContain(key);
    await writeFile(join(dir, 'junk'), 'not-a-key', { mode: 0o600 });
    const junk = await errorOf({ CAIRN_URL: 'http://127.0.0.1:7420', CAIRN_API_KEY_FILE: join(dir, 'junk') });
    expect(isCairnError(junk) && junk.code).toBe('E_INPUT');
    expect(String((junk as Error).message)).not.toContain('not-a-key');
  });
});
