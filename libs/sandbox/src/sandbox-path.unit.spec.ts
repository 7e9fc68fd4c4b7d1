import { isCairnError } from '@cairn/contracts';
import { describe, expect, it } from 'vitest';
import { assertSandboxPath, parentDirectories, tarEntryName } from './sandbox-path.js';

const refused = (path: string, allowRoot = false) => {
  try {
    assertSandboxPath(path, { allowRoot });
  } catch (error) {
    return isCairnError(error) && error.code === 'E_INPUT';
  }
  return false;
};

describe('assertSandboxPath', () => {
  it('accepts normalised paths under the file roots', () => {
    for (const p of ['/work/a', '/work/dir/b.txt', '/out/report.json', '/tmp/x', '/work/with space', '/work/.hidden']) {
      expect(assertSandboxPath(p)).toBe(p);
    }
    expect(assertSandboxPath('/out', { allowRoot: true })).toBe('/out');
  });

  it('refuses anything outside, unnormalised or odd', () => {
    for (const p of ['/etc/passwd', '/', 'work/a', '/work', '/workx/a', '/work/../etc/passwd', '/work/./a', '/work//a', '/work/a/', '/work/a\nb', '/work/a\\b', '/dev/shm/x']) {
      expect(refused(p)).toBe(true);
    }
    expect(refused('/out', true)).toBe(false);
    expect(refused(`/work/${'a'.repeat(1100)}`)).toBe(true);
  });
});

describe('tar helpers', () => {
  it('names entries relative to /', () => {
    expect(tarEntryName('/work/a/b')).toBe('work/a/b');
  });

  it('lists the directories between the root and the file', () => {
    expect(parentDirectories('/work/a/b/c.txt')).toEqual(['/work/a', '/work/a/b']);
    expect(parentDirectories('/work/c.txt')).toEqual([]);
  });
});
