import { FsArtifactStore } from '@cairn/artifact-store';
import { sha256Hex } from '@cairn/evidence';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ArtifactLoader } from './artifact.loader.js';

// The loader on a real content-addressed store in a temporary directory (removed afterwards).
let dir: string;
let store: FsArtifactStore;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'cairn-artifact-loader-'));
  store = new FsArtifactStore(dir);
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const bytes = (text: string) => new TextEncoder().encode(text);

describe('ArtifactLoader', () => {
  it('reads intact bytes, and names missing and corrupt ones instead of throwing', async () => {
    const intact = await store.put(bytes('intact\n'));
    const rotten = await store.put(bytes('rotten\n'));
    await chmod(store.pathOf(rotten), 0o644);
    await writeFile(store.pathOf(rotten), 'tampered\n');
    const absent = sha256Hex('never stored');
    const loaded = await new ArtifactLoader(store, { maxArtifactBytes: 1024, maxRunBytes: 4096 }).load([intact, rotten, absent, intact]);
    expect([...loaded.keys()]).toEqual([intact, rotten, absent]);
    expect(loaded.get(intact)).toEqual({ state: 'ok', bytes: bytes('intact\n') });
    expect(loaded.get(rotten)).toEqual({ state: 'corrupt', actual: sha256Hex('tampered\n') });
    expect(loaded.get(absent)).toEqual({ state: 'missing' });
  });

  it('leaves unread what passes the per-artifact bound or what is left of the per-run bound, in the order given', async () => {
    const big = await store.put(bytes('x'.repeat(100)));
    const first = await store.put(bytes('a'.repeat(30)));
    const second = await store.put(bytes('b'.repeat(30)));
    const loaded = await new ArtifactLoader(store, { maxArtifactBytes: 50, maxRunBytes: 50 }).load([big, first, second]);
    expect(loaded.get(big)).toEqual({ state: 'too_large', bytes: 100 });
    expect(loaded.get(first)).toMatchObject({ state: 'ok' });
    expect(loaded.get(second)).toEqual({ state: 'too_large', bytes: 30 });
  });
});
