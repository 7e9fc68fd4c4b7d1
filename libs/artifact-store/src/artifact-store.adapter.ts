import { CairnError, isCairnError, Sha256HexSchema } from '@cairn/contracts';
import { createHash, randomBytes } from 'node:crypto';
import { link, mkdir, open, readFile, rm, stat } from 'node:fs/promises';
import type { FileHandle } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { DigestCheck } from './digest-check.js';

/** What `verify` found: the bytes hash to their name, are missing, or do not (tampered, rotten). */
export type ArtifactState = 'ok' | 'missing' | 'corrupt';

/**
 * An artifact opened for serving: its bytes were read through once and hash to its name. `chunks()`
 * reads them again from the same open file, hashing as it goes, and throws E_INTERNAL instead of
 * finishing if they changed in between; `close()` releases the file (also after `chunks()` ends).
 */
export interface VerifiedArtifact {
  readonly sha256: string;
  readonly bytes: number;
  /** The bytes are well-formed UTF-8 (so they may be served as text). */
  readonly utf8: boolean;
  chunks(): AsyncGenerator<Uint8Array>;
  close(): Promise<void>;
}

/** Bytes read from the file at a time: what a served artifact holds in memory. */
const READ_CHUNK_BYTES = 64 * 1024;

function corrupt(sha256: string, actual: string): CairnError {
  return new CairnError('E_INTERNAL', `artifact ${sha256} is corrupt: its bytes hash to ${actual}`, { sha256, actual, reason: 'artifact_corrupt' });
}

/** Content-addressed storage for the files a run produced; artifacts are named by their sha256. */
export interface ArtifactStore {
  /** Stores `bytes` (once: equal bytes are one artifact) and returns their sha256 (hex). */
  put(bytes: Uint8Array): Promise<string>;
  /** The bytes, re-hashed on the way out: `E_NOT_FOUND` if absent, `E_INTERNAL` if they no longer match. */
  get(sha256: string): Promise<Uint8Array>;
  has(sha256: string): Promise<boolean>;
  /** Its size in bytes as stored, or null when it is not there. */
  sizeOf(sha256: string): Promise<number | null>;
  /** Re-hashes what is stored. */
  verify(sha256: string): Promise<ArtifactState>;
  /** Checks an artifact through once, then serves it re-hashing (see `VerifiedArtifact`); E_TOO_LARGE past `maxBytes`. */
  openVerified(sha256: string, options: { maxBytes: number }): Promise<VerifiedArtifact>;
}

const sha256Hex = (bytes: Uint8Array): string => createHash('sha256').update(bytes).digest('hex');

/**
 * The artifact store on a local file system: `<root>/sha256/<ab>/<rest of the hash>` — what stacks
 * before the object store (docs/adr/0021) kept in CAIRN_ARTIFACT_DIR, now read only by the runtime's
 * import of such a directory (`importArtifactDir`). Written to
 * a temporary file, synced, then hard-linked into place — so a reader never sees a half-written
 * artifact, a crash leaves at most a stray temporary file, and two writers of the same bytes
 * cannot clobber each other (the second link finds the first).
 */
export class FsArtifactStore implements ArtifactStore {
  constructor(private readonly root: string) {}

  /** Where an artifact lives (the hash is checked first: no path can be smuggled in). */
  pathOf(sha256: string): string {
    if (!Sha256HexSchema.safeParse(sha256).success) throw new CairnError('E_INPUT', `not a lower-case hex sha256: ${JSON.stringify(sha256)}`);
    return join(this.root, 'sha256', sha256.slice(0, 2), sha256.slice(2));
  }

  async put(bytes: Uint8Array): Promise<string> {
    const sha256 = sha256Hex(bytes);
    const target = this.pathOf(sha256);
    if (await this.has(sha256)) return sha256;
    const tmpDir = join(this.root, 'tmp');
    await Promise.all([mkdir(dirname(target), { recursive: true }), mkdir(tmpDir, { recursive: true })]);
    const temporary = join(tmpDir, `${sha256}.${randomBytes(6).toString('hex')}`);
    try {
      const file = await open(temporary, 'wx', 0o444);
      try {
        await file.writeFile(bytes);
        await file.sync();
      } finally {
        await file.close();
      }
      try {
        await link(temporary, target);
      } catch (error) {
        // Someone stored the same bytes first: theirs is as good as ours.
        if ((error as { code?: unknown }).code !== 'EEXIST') throw error;
      }
      await syncDirectory(dirname(target));
    } finally {
      await rm(temporary, { force: true });
    }
    return sha256;
  }

  async get(sha256: string): Promise<Uint8Array> {
    const path = this.pathOf(sha256);
    let bytes: Buffer;
    try {
      bytes = await readFile(path);
    } catch (error) {
      if ((error as { code?: unknown }).code === 'ENOENT') throw new CairnError('E_NOT_FOUND', `no artifact ${sha256}`, { sha256 });
      throw error;
    }
    const actual = sha256Hex(bytes);
    if (actual !== sha256) throw corrupt(sha256, actual);
    return new Uint8Array(bytes);
  }

  /** Its size in bytes as stored, or null when it is not there. */
  async sizeOf(sha256: string): Promise<number | null> {
    try {
      return (await stat(this.pathOf(sha256))).size;
    } catch (error) {
      if ((error as { code?: unknown }).code === 'ENOENT') return null;
      throw error;
    }
  }

  /**
   * Opens an artifact to serve it in bounded memory: E_NOT_FOUND when absent, E_TOO_LARGE past
   * `maxBytes` (nothing read), E_INTERNAL (`reason: artifact_corrupt`) when its bytes no longer hash
   * to its name — all before a byte is served. The file stays open until `close()`, so serving reads
   * the inode that was checked even if the name is replaced meanwhile.
   */
  async openVerified(sha256: string, options: { maxBytes: number }): Promise<VerifiedArtifact> {
    const path = this.pathOf(sha256);
    let file: FileHandle;
    try {
      file = await open(path, 'r');
    } catch (error) {
      if ((error as { code?: unknown }).code === 'ENOENT') throw new CairnError('E_NOT_FOUND', `no artifact ${sha256}`, { sha256, reason: 'artifact_missing' });
      throw error;
    }
    let closed = false;
    const close = async () => {
      if (closed) return;
      closed = true;
      await file.close();
    };
    try {
      const { size } = await file.stat();
      if (size > options.maxBytes) {
        throw new CairnError('E_TOO_LARGE', `artifact ${sha256} is ${size} bytes, more than the ${options.maxBytes} served at most`, { sha256, bytes: size, maxBytes: options.maxBytes });
      }
      const check = new DigestCheck();
      for await (const chunk of readChunks(file)) check.update(chunk);
      const { sha256: actual, wellFormed } = check.finish();
      if (actual !== sha256) throw corrupt(sha256, actual);
      return {
        sha256,
        bytes: size,
        utf8: wellFormed,
        close,
        async *chunks() {
          try {
            const again = createHash('sha256');
            let read = 0;
            for await (const chunk of readChunks(file)) {
              again.update(chunk);
              read += chunk.byteLength;
              // A file that grew since it was checked is not served past what was checked.
              if (read > size) throw corrupt(sha256, 'a longer file');
              yield chunk;
            }
            const served = again.digest('hex');
            if (read !== size || served !== sha256) throw corrupt(sha256, served);
          } finally {
            await close();
          }
        },
      };
    } catch (error) {
      await close();
      throw error;
    }
  }

  async has(sha256: string): Promise<boolean> {
    try {
      return (await stat(this.pathOf(sha256))).isFile();
    } catch (error) {
      if ((error as { code?: unknown }).code === 'ENOENT') return false;
      throw error;
    }
  }

  async verify(sha256: string): Promise<ArtifactState> {
    try {
      await this.get(sha256);
      return 'ok';
    } catch (error) {
      if (isCairnError(error) && error.code === 'E_NOT_FOUND') return 'missing';
      if (isCairnError(error) && error.code === 'E_INTERNAL') return 'corrupt';
      throw error;
    }
  }
}

/** The whole file from its start, a fresh buffer per chunk (what is yielded is the reader's to keep). */
async function* readChunks(file: FileHandle): AsyncGenerator<Uint8Array> {
  let position = 0;
  for (;;) {
    const buffer = new Uint8Array(READ_CHUNK_BYTES);
    const { bytesRead } = await file.read(buffer, 0, buffer.byteLength, position);
    if (bytesRead === 0) return;
    position += bytesRead;
    yield bytesRead === buffer.byteLength ? buffer : buffer.subarray(0, bytesRead);
  }
}

/** Makes a new directory entry durable (the rename/link itself, not only the file's bytes). */
async function syncDirectory(path: string): Promise<void> {
  const dir = await open(path, 'r');
  try {
    await dir.sync();
  } finally {
    await dir.close();
  }
}
