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
    // What a caller (Inspect's provider) tells apart: a directory, and the sandbox user's own file modes.
    expect(refusal(FILE_EXIT.directory)).toMatchObject({ code: 'E_INPUT', message: '/work/x is a directory, not a file', details: { path: '/work/x', reason: 'directory' } });
    expect(refusal(FILE_EXIT.permission)).toMatchObject({ code: 'E_FORBIDDEN', message: expect.stringContaining('permission denied') as string, details: { path: '/work/x', reason: 'permission' } });
  });

  it('refuses a directory and an unwritable or unreadable file before touching it', () => {
    const put = putFileCommand('/work/x', 0o644)[2]!;
    expect(put.indexOf('[ -d "$p" ] && exit 8')).toBeLessThan(put.indexOf('cat > "$p"'));
    expect(put.indexOf('[ ! -w "$p" ] && exit 9')).toBeLessThan(put.indexOf('cat > "$p"'));
    const get = getFileCommand('/work/x')[2]!;
    expect(get.indexOf('[ -d "$p" ] && exit 8')).toBeLessThan(get.indexOf('head -c'));
    expect(get.indexOf('[ -r "$p" ] || exit 9')).toBeLessThan(get.indexOf('head -c'));
  });

  it('lets a read name a path of the image (no mount refusal), and keeps the link walk below the mounts', () => {
    const get = getFileCommand('/etc/os-release')[2]!;
    expect(get).not.toContain('exit 3');
    expect(get).toContain('/work/*|/out/*|/tmp/*)');
    expect(putFileCommand('/etc/x', 0o644)[2]).toContain('exit 3');
  });

  it('sizes a file before sending it, and never sends more than one byte past the bound', () => {
    const script = getFileCommand('/out/x')[2]!;
    expect(script.indexOf('stat -c %s')).toBeLessThan(script.indexOf('head -c'));
    expect(script).toContain('exit 7');
    expect(script).not.toContain('cat "$p"');
  });
});
