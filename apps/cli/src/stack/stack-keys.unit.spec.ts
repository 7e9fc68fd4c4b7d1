import { PG_SERVICES } from '@cairn/config';
import { isCairnError } from '@cairn/contracts';
import { chmod, lstat, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ensureStackKeys, STACK_KEY_FILES } from './stack-keys.js';

describe('ensureStackKeys (cairn init-keys)', () => {
  let root: string;
  beforeEach(async () => {
    root = await mkdtemp(join(tmpdir(), 'cairn-stack-keys-'));
  });
  afterEach(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it('given an empty place, when run, then every key file is there, 0600 in 0700 directories of this user, the public keys 0644', async () => {
    const dir = join(root, 'keys');
    const result = await ensureStackKeys(dir, 'cairn/compose-test');
    expect(result.created.sort()).toEqual([STACK_KEY_FILES.apiKey, STACK_KEY_FILES.dbPassword, STACK_KEY_FILES.pgpass, STACK_KEY_FILES.sealKey, STACK_KEY_FILES.secretsKey, STACK_KEY_FILES.secretsBoxKey, ...PG_SERVICES.map((s) => `db-${s}/password`)].sort());
    for (const sub of ['', 'gateway', 'grader', 'store', 'db']) expect({ sub, mode: (await lstat(join(dir, sub))).mode & 0o777 }).toEqual({ sub, mode: 0o700 });
    for (const file of Object.values(STACK_KEY_FILES)) {
      const info = await lstat(join(dir, file));
      expect({ file, mode: info.mode & 0o777, uid: info.uid }).toEqual({ file, mode: file === STACK_KEY_FILES.sealPublicKeys || file === STACK_KEY_FILES.secretsBoxPublic ? 0o644 : 0o600, uid: process.getuid?.() });
    }
    expect((await readFile(join(dir, STACK_KEY_FILES.apiKey), 'utf8')).trim()).toMatch(/^cairn_[a-z2-7]{8}_[A-Za-z0-9_-]{43}$/);
    const password = (await readFile(join(dir, STACK_KEY_FILES.dbPassword), 'utf8')).trim();
    expect(password).toMatch(/^[0-9a-f]{48}$/);
    expect(await readFile(join(dir, STACK_KEY_FILES.pgpass), 'utf8')).toBe(`*:*:*:cairn:${password}\n`);
    expect(await readFile(join(dir, STACK_KEY_FILES.sealPublicKeys), 'utf8')).toContain(result.verifierKey);
    expect(result.verifierKey).toMatch(/^cairn\/compose-test\+/);
  });

  it('given the files there, when run again, then nothing is made and nothing changes', async () => {
    const dir = join(root, 'keys');
    await ensureStackKeys(dir, 'cairn/compose-test');
    const before = await Promise.all(Object.values(STACK_KEY_FILES).map((file) => readFile(join(dir, file), 'utf8')));
    const again = await ensureStackKeys(dir, 'cairn/compose-test');
    expect(again.created).toEqual([]);
    expect(await Promise.all(Object.values(STACK_KEY_FILES).map((file) => readFile(join(dir, file), 'utf8')))).toEqual(before);
  });

  it('given a key directory others may enter, when run, then it is refused naming it, and nothing is made in it', async () => {
    const dir = join(root, 'keys');
    await ensureStackKeys(dir, 'cairn/compose-test');
    await chmod(join(dir, 'grader'), 0o755);
    const error = await ensureStackKeys(dir, 'cairn/compose-test').then(
      () => null,
      (e: unknown) => e,
    );
    expect(isCairnError(error) && error.code).toBe('E_INPUT');
    expect(String((error as Error).message)).toContain(join(dir, 'grader'));
  });
});
