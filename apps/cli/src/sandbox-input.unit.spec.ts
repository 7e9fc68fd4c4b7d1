import { describe, expect, it } from 'vitest';
import { parseExecRequest, parseSandboxFilePath, parseSandboxId } from './sandbox-input.js';

describe('input checks before any request', () => {
  it('sandbox ids: sbx_… only', () => {
    expect(parseSandboxId('sbx_abc123')).toBe('sbx_abc123');
    for (const bad of ['run_abc', 'sbx_ABC', 'sbx_\u0430bc', 'sbx_a\nb', '']) expect(() => parseSandboxId(bad)).toThrow(/invalid sandbox id/);
  });

  it('file paths: absolute, below /work, /out or /tmp, normalised', () => {
    expect(parseSandboxFilePath('/work/a/b.txt')).toBe('/work/a/b.txt');
    expect(parseSandboxFilePath('/tmp/x')).toBe('/tmp/x');
    for (const bad of ['/etc/passwd', 'work/a', '/work', '/work/../etc/passwd', '/work/./a', '/work//a', '/work/a\u0000b', '/workx/a', '/work/a/']) {
      expect(() => parseSandboxFilePath(bad), bad).toThrow(/invalid sandbox path/);
    }
  });

  it('exec requests: argv an array with a program, env names, workdir', () => {
    expect(parseExecRequest({ argv: ['ls', '-la'], workdir: '/tmp', env: { A_B: '1' } })).toMatchObject({ argv: ['ls', '-la'] });
    expect(() => parseExecRequest({ argv: [] })).toThrow(/argv/);
    expect(() => parseExecRequest({ argv: [''] })).toThrow(/argv/);
    expect(() => parseExecRequest({ argv: ['sh', 'a\u0000b'] })).toThrow(/argv\[1\]/);
    expect(() => parseExecRequest({ argv: ['ls'], workdir: '/etc' })).toThrow(/workdir/);
    expect(() => parseExecRequest({ argv: ['ls'], env: { 'lower-case': 'x' } })).toThrow(/env/);
  });
});
