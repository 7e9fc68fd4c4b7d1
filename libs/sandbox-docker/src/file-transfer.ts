import { CairnError } from '@cairn/contracts';
import { assertSandboxPath, parentDirectories, tarEntryName, type SandboxFileIn, type SandboxFileOut } from '@cairn/sandbox';
import tar from 'tar-stream';

/*
 * Files cross the sandbox boundary as one tar stream over exec: Docker's archive API cannot see
 * tmpfs mounts and refuses a read-only root (STACK.md). Paths are checked before anything moves.
 */

const DEFAULT_FILE_MODE = 0o644;
const DIRECTORY_MODE = 0o755;

/** Validates the files to put (paths, modes, no duplicates); `E_INPUT` on the first problem. */
export function checkFilesIn(files: readonly SandboxFileIn[]): void {
  const seen = new Set<string>();
  for (const file of files) {
    assertSandboxPath(file.path);
    if (seen.has(file.path)) throw new CairnError('E_INPUT', `${file.path} is given twice`, { path: file.path });
    seen.add(file.path);
    // Permission bits only: setuid, setgid and sticky bits have no business in a sandbox.
    if (file.mode !== undefined && (!Number.isInteger(file.mode) || file.mode < 0 || file.mode > 0o777)) {
      throw new CairnError('E_INPUT', `mode of ${file.path} must be permission bits 0..0o777`, { path: file.path });
    }
    if (!(file.content instanceof Uint8Array)) throw new CairnError('E_INPUT', `content of ${file.path} must be bytes`, { path: file.path });
  }
  for (const file of files) {
    const clash = parentDirectories(file.path).find((dir) => seen.has(dir));
    if (clash !== undefined) throw new CairnError('E_INPUT', `${clash} is given as a file and as a directory of ${file.path}`, { path: file.path });
  }
}

/** One tar archive holding `files` (and their directories), to be extracted at `/`. */
export async function packFiles(files: readonly SandboxFileIn[], owner: { uid: number; gid: number }, mtime = new Date()): Promise<Buffer> {
  const directories = new Set<string>();
  for (const file of files) for (const dir of parentDirectories(file.path)) directories.add(dir);
  const common = { uid: owner.uid, gid: owner.gid, mtime };
  return tarBytes((pack) => {
    for (const dir of [...directories].sort()) {
      pack.entry({ ...common, name: tarEntryName(dir), type: 'directory', mode: DIRECTORY_MODE });
    }
    for (const file of files) {
      pack.entry({ ...common, name: tarEntryName(file.path), type: 'file', mode: file.mode ?? DEFAULT_FILE_MODE, size: file.content.length }, Buffer.from(file.content));
    }
  });
}

/** The bytes of one tar archive, its entries written by `fill`. */
export async function tarBytes(fill: (pack: tar.Pack) => void): Promise<Buffer> {
  const pack = tar.pack();
  fill(pack);
  pack.finalize();
  const chunks: Uint8Array[] = [];
  for await (const chunk of pack) if (chunk instanceof Uint8Array) chunks.push(chunk);
  return Buffer.concat(chunks);
}

/** A secret as it goes into a sandbox: its name (the file under /run/secrets) and its value. */
export interface SandboxSecretIn {
  name: string;
  value: Uint8Array;
}

/** Secret names are file names under /run/secrets: the RunSpec's grammar, nothing that could climb out. */
const SECRET_FILE_NAME = /^[A-Z_][A-Z0-9_]{0,63}$/;
/** Readable by the sandbox user's group, by no one else, writable by no one. */
export const SECRET_FILE_MODE = 0o440;

/**
 * One tar archive of `secrets`, to be extracted in /run/secrets by root: each file owned by
 * root:`gid`, mode 0440. The values travel only in this stream (exec's stdin), never in argv,
 * the environment or the container's configuration.
 */
export async function packSecrets(secrets: readonly SandboxSecretIn[], gid: number, mtime = new Date()): Promise<Buffer> {
  const seen = new Set<string>();
  for (const secret of secrets) {
    if (!SECRET_FILE_NAME.test(secret.name)) throw new CairnError('E_INPUT', `not a secret name: ${JSON.stringify(secret.name.slice(0, 80))}`);
    if (seen.has(secret.name)) throw new CairnError('E_INPUT', `secret ${secret.name} is given twice`, { name: secret.name });
    seen.add(secret.name);
  }
  return tarBytes((pack) => {
    for (const secret of secrets) {
      pack.entry({ name: secret.name, type: 'file', mode: SECRET_FILE_MODE, uid: 0, gid, mtime, size: secret.value.length }, Buffer.from(secret.value));
    }
  });
}

/** The tar entry names for `paths` (`/out` → `out`), deduplicated, in order. */
export function entriesFor(paths: readonly string[]): string[] {
  return [...new Set(paths.map((path) => tarEntryName(assertSandboxPath(path, { allowRoot: true }))))];
}

/**
 * The sandbox-side command of `getFiles`: archive whichever of the paths exist, to stdout. A
 * fixed script; the paths travel as its arguments, never inside the script (I-3).
 */
export function archiveCommand(entries: readonly string[]): string[] {
  const script = [
    'n=$#; i=0',
    'while [ "$i" -lt "$n" ]; do p=$1; shift; if [ -e "/$p" ] || [ -L "/$p" ]; then set -- "$@" "$p"; fi; i=$((i+1)); done',
    '[ "$#" -eq 0 ] && exit 0',
    'exec tar -c -f - -C / "$@"',
  ].join('\n');
  return ['sh', '-c', script, 'cairn-get-files', ...entries];
}

/**
 * Unpacks a tar stream as it arrives, keeping regular files until their bytes pass `maxBytes`;
 * after that it only counts, so memory stays bounded whatever the sandbox sends.
 */
export class TarFileCollector {
  private readonly extract = tar.extract();
  private readonly files: SandboxFileOut[] = [];
  private contentBytes = 0;
  private failure: string | null = null;
  private readonly finished: Promise<void>;

  constructor(private readonly maxBytes: number) {
    this.extract.on('entry', (header, stream, next) => {
      const keep = header.type === 'file' || header.type === 'contiguous-file';
      const chunks: Uint8Array[] = [];
      let size = 0;
      stream.on('data', (chunk: unknown) => {
        if (!keep || !(chunk instanceof Uint8Array)) return;
        size += chunk.length;
        this.contentBytes += chunk.length;
        if (this.contentBytes <= this.maxBytes) chunks.push(chunk);
      });
      stream.on('end', () => {
        if (keep && this.contentBytes <= this.maxBytes) {
          this.files.push({
            path: `/${header.name.replace(/^\.?\/+/, '').replace(/\/+$/, '')}`,
            content: new Uint8Array(Buffer.concat(chunks, size)),
            size,
            mode: (header.mode ?? 0) & 0o7777,
          });
        }
        next();
      });
      stream.resume();
    });
    this.finished = new Promise<void>((resolve) => {
      this.extract.on('finish', () => resolve());
      this.extract.on('error', (error: unknown) => {
        this.failure = error instanceof Error ? error.message : 'unreadable archive';
        resolve();
      });
    });
  }

  write(chunk: Uint8Array): void {
    if (this.failure === null) this.extract.write(Buffer.from(chunk));
  }

  /** Ends the stream; the files, or `E_BUDGET` when they come to more than `maxBytes`. */
  async finish(): Promise<SandboxFileOut[]> {
    this.extract.end(null);
    await this.finished;
    if (this.failure !== null) throw new CairnError('E_INTERNAL', `the sandbox sent a malformed archive: ${this.failure}`);
    if (this.contentBytes > this.maxBytes) {
      throw new CairnError('E_BUDGET', `the files come to ${this.contentBytes} bytes, more than the ${this.maxBytes} allowed`, {
        bytes: this.contentBytes,
        maxBytes: this.maxBytes,
      });
    }
    return this.files;
  }
}
