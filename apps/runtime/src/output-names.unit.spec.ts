import type { SandboxFileOut } from '@cairn/sandbox';
import { describe, expect, it } from 'vitest';
import { recordableOutputs, unrecordableName } from './output-names.js';

const file = (path: string): SandboxFileOut => ({ path, content: new Uint8Array([1]), size: 1, mode: 0o644 });

describe('unrecordableName', () => {
  it('lets through any absolute path a receipt can hold as it is, in any script', () => {
    for (const path of ['/out/a.txt', '/out/dir/b c.json', '/out/résumé ж 漢字 😀.txt', '/out/a\\nb', `/out/${'x'.repeat(1019)}`]) {
      expect(unrecordableName(path), path).toBeNull();
    }
  });

  it('refuses control characters (C0, DEL, C1), names that were not UTF-8, and paths over 1024 characters', () => {
    expect(unrecordableName('/out/a\nb')).toBe('control_character');
    expect(unrecordableName('/out/\u001b[31mred')).toBe('control_character');
    expect(unrecordableName('/out/a\u007f')).toBe('control_character');
    expect(unrecordableName('/out/a\u0085')).toBe('control_character');
    expect(unrecordableName('/out/\uFFFD\uFFFD.bin')).toBe('not_utf8');
    expect(unrecordableName(`/out/${'x'.repeat(1020)}`)).toBe('too_long');
    expect(unrecordableName('out/relative')).toBe('not_a_path');
  });
});

describe('recordableOutputs', () => {
  it('keeps the recordable files in order and counts the rest by reason', () => {
    const { files, skipped } = recordableOutputs([file('/out/ok1'), file('/out/a\nb'), file('/out/\uFFFD'), file('/out/ok2'), file('/out/c\td')]);
    expect(files.map((f) => f.path)).toEqual(['/out/ok1', '/out/ok2']);
    expect(skipped).toEqual({ control_character: 2, not_utf8: 1 });
  });
});
