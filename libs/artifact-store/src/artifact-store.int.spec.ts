import { isCairnError } from '@cairn/contracts';
import { createHash, randomBytes } from 'node:crypto';
import { appendFile, chmod, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FsArtifactStore } from './artifact-store.adapter.js';

let root: string;
let store: FsArtifactStore;

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'cairn-artifacts-'));
  store = new FsArtifactStore(root);
});

afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

const sha = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');

async function codeOf(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
    return 'resolved';
  } catch (error) {
    return isCairnError(error) ? error.code : String(error);
  }
}

describe('FsArtifactStore', () => {
  it('stores bytes under their sha256 and gives them back', async () => {
    const bytes = randomBytes(70_000);
    const id = await store.put(bytes);
    expect(id).toBe(sha(bytes));
    expect(store.pathOf(id)).toBe(join(root, 'sha256', id.slice(0, 2), id.slice(2)));
    expect(await store.has(id)).toBe(true);
    expect(Buffer.from(await store.get(id)).equals(bytes)).toBe(true);
    expect(await store.verify(id)).toBe('ok');
  });

  it('stores equal bytes once, also when written at the same time, and leaves no temporary files', async () => {
    const bytes = randomBytes(10_000);
    const ids = await Promise.all(Array.from({ length: 8 }, () => store.put(bytes)));
    expect(new Set(ids)).toEqual(new Set([sha(bytes)]));
    expect(await readdir(join(root, 'sha256', ids[0]!.slice(0, 2)))).toContain(ids[0]!.slice(2));
    expect(await readdir(join(root, 'tmp'))).toEqual([]);
    expect(await store.put(new Uint8Array())).toBe(sha(new Uint8Array()));
  });

  it('tells missing from corrupt, and never returns bytes that do not match their name', async () => {
    const absent = sha(randomBytes(16));
    expect(await store.has(absent)).toBe(false);
    expect(await store.verify(absent)).toBe('missing');
    expect(await codeOf(store.get(absent))).toBe('E_NOT_FOUND');

    const id = await store.put(new TextEncoder().encode('the original'));
    const path = store.pathOf(id);
    await chmod(path, 0o644);
    await writeFile(path, 'tampered');
    expect(await store.verify(id)).toBe('corrupt');
    expect(await codeOf(store.get(id))).toBe('E_INTERNAL');
  });

  it('refuses anything but a lower-case hex sha256 as a name', async () => {
    for (const bad of ['../../etc/passwd', 'ABC', 'a'.repeat(63), 'A'.repeat(64), `${'a'.repeat(62)}/x`]) {
      expect(await codeOf(store.get(bad))).toBe('E_INPUT');
      expect(await codeOf(store.has(bad))).toBe('E_INPUT');
    }
  });

  describe('openVerified', () => {
    async function served(id: string, maxBytes = 1 << 30): Promise<{ bytes: Buffer; chunks: number; utf8: boolean; size: number }> {
      const artifact = await store.openVerified(id, { maxBytes });
      const parts: Uint8Array[] = [];
      for await (const chunk of artifact.chunks()) parts.push(chunk);
      return { bytes: Buffer.concat(parts), chunks: parts.length, utf8: artifact.utf8, size: artifact.bytes };
    }

    it('serves the exact bytes a chunk at a time, and says whether they are UTF-8 text', async () => {
      const binary = randomBytes(200_000);
      const id = await store.put(binary);
      const out = await served(id);
      expect(out.bytes.equals(binary)).toBe(true);
      expect(out.chunks).toBeGreaterThan(2);
      expect(out.size).toBe(binary.length);
      expect(out.utf8).toBe(false);
      const text = await served(await store.put(new TextEncoder().encode('héllo wörld 😀\n'.repeat(10_000))));
      expect(text.utf8).toBe(true);
      expect((await served(await store.put(new Uint8Array()))).bytes.length).toBe(0);
    });

    it('refuses tampered bytes before serving any, and a file past the bound without reading it', async () => {
      const id = await store.put(new TextEncoder().encode('the original bytes'));
      expect(await codeOf(store.openVerified(id, { maxBytes: 5 }))).toBe('E_TOO_LARGE');
      const path = store.pathOf(id);
      await chmod(path, 0o644);
      await writeFile(path, 'the 0riginal bytes');
      await expect(store.openVerified(id, { maxBytes: 1024 })).rejects.toMatchObject({ code: 'E_INTERNAL', details: { reason: 'artifact_corrupt', sha256: id } });
      expect(await codeOf(store.openVerified(sha(randomBytes(8)), { maxBytes: 1024 }))).toBe('E_NOT_FOUND');
    });

    it('stops serving, with an error, bytes changed between the check and the serving', async () => {
      const id = await store.put(randomBytes(300_000));
      const artifact = await store.openVerified(id, { maxBytes: 1 << 20 });
      const path = store.pathOf(id);
      await chmod(path, 0o644);
      await appendFile(path, 'more');
      const read = async () => {
        for await (const _chunk of artifact.chunks()) {
          // drained
        }
      };
      await expect(read()).rejects.toMatchObject({ code: 'E_INTERNAL' });
    });
  });
});
