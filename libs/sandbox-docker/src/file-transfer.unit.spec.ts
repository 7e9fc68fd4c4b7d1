import { isCairnError } from '@cairn/contracts';
import tar from 'tar-stream';
import { describe, expect, it } from 'vitest';
import {
  archiveCommand,
  checkFilesIn,
  checkMeasure,
  entriesFor,
  MAX_TRANSFER_ENTRIES,
  packFiles,
  packSecrets,
  parseMeasure,
  tarBytes,
  TarFileCollector,
} from './file-transfer.js';

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

async function collect(archive: Buffer, maxBytes: number, chunkSize = 1000, entries: readonly string[] = ['work', 'out']) {
  const collector = new TarFileCollector({ maxBytes, entries });
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

  it('answers E_BUDGET past maxBytes, from the headers', async () => {
    const archive = await packFiles(files, owner);
    await expect(collect(archive, 5011)).rejects.toMatchObject({ cairnErrorCode: 'E_BUDGET' });
    await expect(collect(archive, 5012)).resolves.toHaveLength(3);
  });

  it('returns nothing for an empty stream, and E_INTERNAL for garbage', async () => {
    await expect(collect(Buffer.alloc(0), 10)).resolves.toEqual([]);
    await expect(collect(Buffer.alloc(1024, 0x41), 10)).rejects.toMatchObject({ cairnErrorCode: 'E_INTERNAL' });
  });
});

/** A tar stream with exactly these entries, as a hostile sandbox could send it. */
type HostileEntry = Partial<tar.Header> & { name: string; content?: string };

function hostile(entries: HostileEntry[]): Promise<Buffer> {
  return tarBytes((pack) => {
    for (const { content, ...header } of entries) {
      const full = { mode: 0o644, mtime: new Date(0), ...header };
      if (content === undefined) pack.entry(full);
      else pack.entry(full, Buffer.from(content));
    }
  });
}

/** Feeds `archive` to a collector; the error (code and message) or the paths kept, and whether the sender was stopped. */
async function verdict(archive: Buffer, entries: readonly string[] = ['out'], maxBytes = 1 << 20, maxEntries?: number) {
  let stopped = 0;
  const collector = new TarFileCollector({ maxBytes, entries, onRefused: () => stopped++, ...(maxEntries === undefined ? {} : { maxEntries }) });
  for (let i = 0; i < archive.length; i += 512) collector.write(archive.subarray(i, i + 512));
  try {
    return { paths: (await collector.finish()).map((f) => f.path), stopped };
  } catch (error) {
    return { code: isCairnError(error) ? error.code : String(error), message: error instanceof Error ? error.message : '', stopped };
  }
}

describe('TarFileCollector against hostile archives', () => {
  const ok = { name: 'out/ok.txt', type: 'file' as const, content: 'fine' };

  it('keeps regular files, passes directories and skips symbolic links (never followed)', async () => {
    const archive = await hostile([{ name: 'out/', type: 'directory' }, ok, { name: 'out/link', type: 'symlink', linkname: '/etc/passwd' }]);
    expect(await verdict(archive)).toEqual({ paths: ['/out/ok.txt'], stopped: 0 });
  });

  it.each([
    ['an absolute name', { name: '/etc/passwd', type: 'file' as const, content: 'x' }, 'absolute'],
    ['a .. component', { name: 'out/../etc/passwd', type: 'file' as const, content: 'x' }, 'plain relative'],
    ['a . component', { name: 'out/./a', type: 'file' as const, content: 'x' }, 'plain relative'],
    ['an empty component', { name: 'out//a', type: 'file' as const, content: 'x' }, 'plain relative'],
    ['a name outside the paths asked for', { name: 'work/a', type: 'file' as const, content: 'x' }, 'outside the paths'],
    ['a look-alike prefix', { name: 'outside/a', type: 'file' as const, content: 'x' }, 'outside the paths'],
    ['a hard link', { name: 'out/hard', type: 'link' as const, linkname: 'out/ok.txt' }, 'hard link'],
    ['a fifo', { name: 'out/pipe', type: 'fifo' as const }, 'fifo'],
    ['a character device', { name: 'out/null', type: 'character-device' as const, devmajor: 1, devminor: 3 }, 'character-device'],
    ['a block device', { name: 'out/sda', type: 'block-device' as const, devmajor: 8, devminor: 0 }, 'block-device'],
  ])('refuses %s (E_INPUT), keeps nothing, and stops the sender', async (_what, entry, says) => {
    const result = await verdict(await hostile([ok, entry, { name: 'out/after.txt', type: 'file', content: 'after' }]));
    expect(result).toMatchObject({ code: 'E_INPUT', stopped: 1 });
    expect(result.message).toContain(says);
  });

  it('refuses a name given twice, and a path archived twice through overlapping entries is never asked for', async () => {
    expect(await verdict(await hostile([ok, { ...ok, content: 'other' }]))).toMatchObject({ code: 'E_INPUT', message: expect.stringContaining('twice') as string });
    expect(entriesFor(['/out/a', '/out', '/work/x/y', '/work/x'])).toEqual(['out', 'work/x']);
  });

  it('tells names apart byte for byte: two that are not UTF-8 are two files, the same bytes twice are refused', async () => {
    // Raw name bytes (0xff, 0xfe) that tar-stream's pack cannot write: patched into the headers.
    const withName = (archive: Buffer, at: number, bytes: number[]) => {
      archive.set(bytes, at + 4);
      archive.fill(0x20, at + 148, at + 156);
      let sum = 0;
      for (let i = at; i < at + 512; i++) sum += archive[i]!;
      archive.write(`${sum.toString(8).padStart(6, '0')}\0 `, at + 148, 'latin1');
      return archive;
    };
    const two = await hostile([{ name: 'out/AA', type: 'file', content: 'a' }, { name: 'out/BB', type: 'file', content: 'b' }]);
    const different = withName(withName(Buffer.from(two), 0, [0xff, 0xfe]), 1024, [0xfe, 0xff]);
    const kept = await verdict(different);
    expect(kept).toEqual({ paths: ['/out/\uFFFD\uFFFD', '/out/\uFFFD\uFFFD'], stopped: 0 });
    const same = withName(withName(Buffer.from(two), 0, [0xff, 0xfe]), 1024, [0xff, 0xfe]);
    expect(await verdict(same)).toMatchObject({ code: 'E_INPUT', message: expect.stringContaining('twice') as string });
    // Valid UTF-8 comes out as text.
    expect(await verdict(await hostile([{ name: 'out/résumé 😀.txt', type: 'file', content: 'x' }]))).toEqual({ paths: ['/out/résumé 😀.txt'], stopped: 0 });
  });

  it('refuses a huge entry from its header, before any of its bytes (E_BUDGET)', async () => {
    // A header claiming 1 TiB, and no content at all: the refusal comes from the header alone.
    const header = tar.pack();
    const chunks: Buffer[] = [];
    header.on('data', (chunk: unknown) => {
      if (Buffer.isBuffer(chunk)) chunks.push(chunk);
    });
    header.entry({ name: 'out/big', type: 'file', size: 2 ** 40, mode: 0o644, mtime: new Date(0) });
    await new Promise((resolve) => setImmediate(resolve));
    const first = Buffer.concat(chunks).subarray(0, 512);
    expect(await verdict(first)).toMatchObject({ code: 'E_BUDGET', stopped: 1, message: expect.stringContaining(String(2 ** 40)) as string });
  });

  it('refuses more entries than it keeps track of (E_BUDGET)', async () => {
    const many = Array.from({ length: 101 }, (_, i) => ({ name: `out/d${i}/`, type: 'directory' as const }));
    expect(await verdict(await hostile(many), ['out'], 1 << 20, 100)).toMatchObject({ code: 'E_BUDGET', stopped: 1 });
    expect(await verdict(await hostile(many.slice(1)), ['out'], 1 << 20, 100)).toEqual({ paths: [], stopped: 0 });
    expect(MAX_TRANSFER_ENTRIES).toBe(65_536);
  });
});

describe('the agent\'s measure', () => {
  const line = (files: number, dirs: number, links: number, others: number, bytes: number, rest = '') =>
    new Uint8Array(Buffer.from(`cairn-measure/1 ${files} ${dirs} ${links} ${others} ${bytes}\n${rest}`, 'latin1'));

  it('refuses before streaming: over the bound (E_BUDGET), another kind of entry (E_INPUT)', () => {
    expect(() => checkMeasure(parseMeasure(line(2, 1, 0, 0, 2 ** 40)), 64 << 20)).toThrow(expect.objectContaining({ cairnErrorCode: 'E_BUDGET' }) as Error);
    const fifo = parseMeasure(line(1, 1, 0, 1, 3, 'fifo\0/out/pipe\0'));
    expect(fifo.other).toEqual({ kind: 'fifo', path: '/out/pipe' });
    expect(() => checkMeasure(fifo, 100)).toThrow(expect.objectContaining({ cairnErrorCode: 'E_INPUT', message: expect.stringContaining('/out/pipe') as string }) as Error);
    expect(() => checkMeasure(parseMeasure(line(3, 2, 5, 0, 100)), 100)).not.toThrow();
  });

  it('is E_INTERNAL when the output is not the agent\'s', () => {
    expect(() => parseMeasure(new Uint8Array(Buffer.from('sh: not found\n')))).toThrow(expect.objectContaining({ cairnErrorCode: 'E_INTERNAL' }) as Error);
  });
});

describe('packSecrets', () => {
  it('frames each secret for the agent as NAME, length, bytes — nothing else', () => {
    const packed = packSecrets([
      { name: 'API_TOKEN', value: bytes('s3cr3t') },
      { name: 'EMPTY', value: bytes('') },
    ]);
    expect(packed.toString('latin1')).toBe('API_TOKEN\u00006\u0000s3cr3tEMPTY\u00000\u0000');
  });

  it('refuses a name that could leave /run/secrets, a name given twice, and a value over 32 KiB (E_INPUT)', () => {
    expect(codeOf(() => packSecrets([{ name: '../x', value: bytes('v') }]))).toBe('E_INPUT');
    expect(codeOf(() => packSecrets([{ name: 'A', value: bytes('v') }, { name: 'A', value: bytes('w') }]))).toBe('E_INPUT');
    expect(codeOf(() => packSecrets([{ name: 'BIG', value: new Uint8Array(32 * 1024 + 1) }]))).toBe('E_INPUT');
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
