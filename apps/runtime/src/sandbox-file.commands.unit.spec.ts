import { describe, expect, it } from 'vitest';
import { FILE_EXIT, fileCommandError, getFileCommand, putFileCommand } from './sandbox-file.commands.js';

describe('the sandbox-side file commands', () => {
  it('pass the path as an argument, never inside the script (I-3), and the mode in octal', () => {
    const path = '/work/a b/$(rm -rf).txt';
    const put = putFileCommand(path, 0o640);
    expect(put.slice(0, 2)).toEqual(['sh', '-c']);
    expect(put.slice(3)).toEqual(['cairn-put-file', path, '640']);
    expect(put[2]).not.toContain(path);
    const get = getFileCommand(path, 100);
    expect(get.slice(3)).toEqual(['cairn-get-file', path, '100', '101']);
    expect(get[2]).not.toContain(path);
    // Every component up to the mount is tested for a link, in both.
    for (const script of [put[2]!, get[2]!]) expect(script).toContain('[ -L "$d" ] && exit 4');
  });

  it('maps each refusal to its code', () => {
    const refusal = (exitCode: number) => fileCommandError('/work/x', { exitCode, stderr: new Uint8Array(Buffer.from('tar: boom')) });
    expect(refusal(FILE_EXIT.notFound)).toMatchObject({ code: 'E_NOT_FOUND' });
    expect(refusal(FILE_EXIT.symlink)).toMatchObject({ code: 'E_INPUT', message: expect.stringContaining('symbolic link') as string });
    expect(refusal(FILE_EXIT.outsideMounts)).toMatchObject({ code: 'E_INPUT' });
    expect(refusal(FILE_EXIT.notRegular)).toMatchObject({ code: 'E_INPUT', message: expect.stringContaining('not a regular file') as string });
    expect(refusal(FILE_EXIT.tooLarge)).toMatchObject({ code: 'E_TOO_LARGE' });
    expect(refusal(1)).toMatchObject({ code: 'E_INPUT', message: expect.stringContaining('tar: boom') as string });
  });

  it('sizes a file before sending it, and never sends more than one byte past the bound', () => {
    const script = getFileCommand('/out/x')[2]!;
    expect(script.indexOf('stat -c %s')).toBeLessThan(script.indexOf('head -c'));
    expect(script).toContain('exit 7');
    expect(script).not.toContain('cat "$p"');
  });
});
