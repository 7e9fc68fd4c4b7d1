import type { FsArtifactStore } from '@cairn/artifact-store';
import { isCairnError } from '@cairn/contracts';
import type { LoadedArtifact } from './run-outputs.reader.js';

export type ArtifactReadLimits = {
  /** Largest single artifact read, in bytes. */
  maxArtifactBytes: number;
  /** All of one run's artifacts together, in bytes. */
  maxRunBytes: number;
};

/**
 * Reads a run's artifacts from the content-addressed store, bounded: an artifact past the
 * per-artifact bound, or past what is left of the per-run bound, is not read (`too_large`). Every
 * read re-hashes the bytes (`FsArtifactStore.get`), so `ok` means "hashes to its name"; missing
 * and corrupt bytes are results, not errors. Other IO failures are thrown (the reaction retries).
 */
export class ArtifactLoader {
  constructor(
    private readonly store: FsArtifactStore,
    private readonly limits: ArtifactReadLimits,
  ) {}

  /** Each distinct sha256, in the order given (the order decides which reads the run bound stops). */
  async load(shas: Iterable<string>): Promise<Map<string, LoadedArtifact>> {
    const loaded = new Map<string, LoadedArtifact>();
    let total = 0;
    for (const sha of shas) {
      if (loaded.has(sha)) continue;
      const size = await this.store.sizeOf(sha);
      if (size === null) {
        loaded.set(sha, { state: 'missing' });
        continue;
      }
      if (size > this.limits.maxArtifactBytes || total + size > this.limits.maxRunBytes) {
        loaded.set(sha, { state: 'too_large', bytes: size });
        continue;
      }
      const artifact = await this.read(sha);
      if (artifact.state === 'ok') total += artifact.bytes.byteLength;
      loaded.set(sha, artifact);
    }
    return loaded;
  }

  private async read(sha: string): Promise<LoadedArtifact> {
    try {
      return { state: 'ok', bytes: await this.store.get(sha) };
    } catch (error) {
      if (isCairnError(error) && error.code === 'E_NOT_FOUND') return { state: 'missing' };
      const actual = isCairnError(error) && error.code === 'E_INTERNAL' ? error.details?.actual : undefined;
      if (typeof actual === 'string') return { state: 'corrupt', actual };
      throw error;
    }
  }
}
