import { isCairnError, Sha256HexSchema } from '@cairn/contracts';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { FsArtifactStore } from './artifact-store.adapter.js';
import type { NatsArtifactStore } from './nats-artifact-store.adapter.js';

/** What one import of an old artifact directory did. */
export interface ArtifactImport {
  /** Uploaded now. */
  imported: number;
  /** In the object store already (equal bytes are one artifact). */
  present: number;
  /** Files whose bytes do not hash to their name: left where they are, not uploaded. */
  corrupt: string[];
  /** Files under `sha256/` that are not named by a sha256 (a stray temporary file). */
  skipped: number;
}

/** Written into the directory once it was imported: a later start does not walk it again. */
export const IMPORT_MARKER = 'imported-to-object-store.json';

/**
 * Uploads what an older stack's CAIRN_ARTIFACT_DIR holds (`sha256/<aa>/<rest>`) into the object
 * store, each file checked against its name on the way (a corrupt one stays behind, named), then
 * marks the directory imported (docs/adr/0021). Null when there is nothing to import: no such
 * directory, or it was imported before. The files are left for the operator to delete.
 */
export async function importArtifactDir(dir: string, to: NatsArtifactStore): Promise<ArtifactImport | null> {
  const root = join(dir, 'sha256');
  let prefixes: string[];
  try {
    await readFile(join(dir, IMPORT_MARKER));
    return null;
  } catch (error) {
    if ((error as { code?: unknown }).code !== 'ENOENT') throw error;
  }
  try {
    prefixes = await readdir(root);
  } catch (error) {
    if ((error as { code?: unknown }).code === 'ENOENT') return null;
    throw error;
  }
  const from = new FsArtifactStore(dir);
  const result: ArtifactImport = { imported: 0, present: 0, corrupt: [], skipped: 0 };
  for (const prefix of prefixes.sort()) {
    for (const rest of (await readdir(join(root, prefix))).sort()) {
      const sha256 = `${prefix}${rest}`;
      if (!Sha256HexSchema.safeParse(sha256).success) {
        result.skipped++;
        continue;
      }
      if (await to.has(sha256)) {
        result.present++;
        continue;
      }
      try {
        const artifact = await from.openVerified(sha256, { maxBytes: Number.MAX_SAFE_INTEGER });
        try {
          await to.putStream(sha256, artifact.chunks());
        } finally {
          await artifact.close();
        }
        result.imported++;
      } catch (error) {
        if (!isCairnError(error) || error.code !== 'E_INTERNAL' || error.details?.['reason'] !== 'artifact_corrupt') throw error;
        result.corrupt.push(sha256);
      }
    }
  }
  await writeFile(join(dir, IMPORT_MARKER), `${JSON.stringify({ at: new Date().toISOString(), bucket: to.bucket, ...result })}\n`, { mode: 0o600 });
  return result;
}
