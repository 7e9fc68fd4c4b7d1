import { isCairnError } from '@cairn/contracts';
import { describe, expect, it } from 'vitest';
import { archiveCommand, checkFilesIn, entriesFor, packFiles, TarFileCollector } from './file-transfer.js';

const bytes = (s: string) => new TextEncoder().encode(s);
const owner = { uid: 1000, gid: 1000 };

function codeOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (error) {
    return isCairnError(error) ? error.code : 'not a CairnError';
  }
  return undefined;
}

async function collect(archive: Buffer, maxBytes: number, chunkSize = 1000) {
  const collector = new TarFileCollector(maxBytes);
  for (let i = 0; i < archive.length; i += chunkSize) collector.write(archive.subarray(i, i + chunkSize));
  return collector.finish();
}

describe('checkFilesIn', () => {
  it('accepts files under the file roots', () => {
    expect(codeOf(() => checkFilesIn([{ path: '/work/a', content: bytes('x'), mode: 0o755 }, { path: '/out/b', content: bytes('') }]))).toBeUndefined();
  });

  it('refuses bad paths, duplicates, special mode bits and a file that is also a directory', () => {
    expect(codeOf(() => checkFilesIn([{ path: '/etc/a', content: bytes('x') }]))).toBe('E_INPUT');
    expect(codeOf(() => checkFilesIn([{ path: '/work/a', content: bytes('x') }, { path: '/work/a', content: bytes('y') }]))).toBe('E_INPUT');
    expect(codeOf(() => checkFilesIn([{ path: '/work/a', content: bytes('x'), mode: 0o4755 }]))).toBe('E_INPUT');
    expect(codeOf(() => checkFilesIn([{ path: '/work/a', content: bytes('x') }, { path: '/work/a/b', content: bytes('y') }]))).toBe('E_INPUT');
  });
});

describe('packFiles and TarFileCollector', () => {
  const files = [
    { path: '/work/src/main.py', content: bytes('print("hi")\n'), mode: 0o755 },
    { path: '/work/a', content: bytes('') },
    { path: '/out/deep/er/x.bin', content: new Uint8Array(5000).fill(7) },
  ];

  it('round-trip files with their modes; directories are made, not returned', async () => {
    const archive = await packFiles(files, owner);
    const back = await collect(archive, 1 << 20);
    expect(back.map((f) => [f.path, f.size, f.mode])).toEqual([
      ['/work/src/main.py', 12, 0o755],
      ['/work/a', 0, 0o644],
      ['/out/deep/er/x.bin', 5000, 0o644],
    ]);
    expect(Buffer.from(back[0]!.content).toString()).toBe('print("hi")\n');
  });

  it('answers E_BUDGET past maxBytes, still reading to the end', async () => {
    const archive = await packFiles(files, owner);
    await expect(collect(archive, 5011)).rejects.toMatchObject({ cairnErrorCode: 'E_BUDGET' });
    await expect(collect(archive, 5012)).resolves.toHaveLength(3);
  });

  it('returns nothing for an empty stream, and E_INTERNAL for garbage', async () => {
    await expect(collect(Buffer.alloc(0), 10)).resolves.toEqual([]);
    await expect(collect(Buffer.alloc(1024, 0x41), 10)).rejects.toMatchObject({ cairnErrorCode: 'E_INTERNAL' });
  });
});

describe('getFiles command', () => {
  it('passes the paths as arguments to a fixed script, never inside it (I-3)', () => {
    const entries = entriesFor(['/out', '/work/a b', '/out']);
    expect(entries).toEqual(['out', 'work/a b']);
    const argv = archiveCommand(entries);
    expect(argv.slice(0, 2)).toEqual(['sh', '-c']);
    expect(argv[2]).not.toContain('a b');
    expect(argv.slice(3)).toEqual(['cairn-get-files', 'out', 'work/a b']);
  });
});
