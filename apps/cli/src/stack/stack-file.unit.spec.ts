import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { apiKeyPath, ensureHome, newApiKey, readApiKey, readStackFile, removeStackFile, stackFilePath, withStackLock, writeApiKey, writeStackFile } from './stack-file.js';
import type { StackFile } from './stack-file.js';

let home: string;

beforeEach(async () => {
  home = join(await mkdtemp(join(tmpdir(), 'cairn-stack-file-')), 'home');
  await ensureHome(home);
});

afterEach(async () => {
  await rm(join(home, '..'), { recursive: true, force: true });
});

const stack = (): StackFile => ({
  version: 1,
  stackId: 'default',
  url: 'http://127.0.0.1:7410',
  home,
  keyFile: apiKeyPath(home),
  startedAt: '2026-01-01T00:00:00.000Z',
  config: { CAIRN_HOME: home },
  services: { gateway: { pid: 42, main: '/x/apps/gateway/dist/main.js', log: join(home, 'logs/gateway.log'), startedAt: '2026-01-01T00:00:00.000Z' } },
});

const mode = async (path: string) => (await stat(path)).mode & 0o777;

describe('the state directory', () => {
  it('is private: the directory 0700, the stack file and the key 0600', async () => {
    await writeStackFile(home, stack());
    await writeApiKey(home, 'cairn_abcdefgh_x');
    expect(await mode(home)).toBe(0o700);
    expect(await mode(stackFilePath(home))).toBe(0o600);
    expect(await mode(apiKeyPath(home))).toBe(0o600);
  });

  it('reads back what it wrote, and null when there is no stack', async () => {
    expect(await readStackFile(home)).toBeNull();
    await writeStackFile(home, stack());
    expect(await readStackFile(home)).toEqual(stack());
    await removeStackFile(home);
    expect(await readStackFile(home)).toBeNull();
    expect(await readApiKey(home)).toBeNull();
    await writeApiKey(home, 'cairn_abcdefgh_x');
    expect(await readApiKey(home)).toBe('cairn_abcdefgh_x');
  });

  it('refuses a stack file it cannot read, saying what to do', async () => {
    await writeFile(stackFilePath(home), '{"version": 7}');
    await expect(readStackFile(home)).rejects.toMatchObject({ code: 'E_INPUT', message: expect.stringContaining('cairn down') as string });
  });
});

describe('newApiKey', () => {
  it('makes keys of the gateway’s form, each different', () => {
    const a = newApiKey();
    expect(a).toMatch(/^cairn_[a-z2-7]{8}_[A-Za-z0-9_-]{43}$/);
    expect(newApiKey()).not.toBe(a);
  });
});

describe('withStackLock', () => {
  it('lets one holder in at a time and takes over a lock whose holder is gone', async () => {
    const inside = withStackLock(home, () => true, async () => {
      await expect(withStackLock(home, () => true, () => Promise.resolve('second'))).rejects.toMatchObject({ code: 'E_CONFLICT' });
      return 'first';
    });
    expect(await inside).toBe('first');
    await writeFile(join(home, 'up.lock'), '999999');
    expect(await withStackLock(home, () => false, () => Promise.resolve('taken over'))).toBe('taken over');
    await expect(readFile(join(home, 'up.lock'))).rejects.toMatchObject({ code: 'ENOENT' });
  });
});
