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
/** What the agent's `--put-secrets` takes: at most this many, each at most this long (the store's own bound). */
const MAX_SECRETS = 64;
const MAX_SECRET_VALUE_BYTES = 32 * 1024;

/**
 * The input of the agent's `--put-secrets` (agent/cairn-agent.c): `NAME\0<length>\0<bytes>` per
 * secret. The agent, not the image's `tar`, writes them — as root, the one root process a
 * sandbox ever has — each root's with the sandbox's group, 0440. The values travel only in this
 * stream (exec's stdin), never in argv, the environment or the container's configuration.
 */
export function packSecrets(secrets: readonly SandboxSecretIn[]): Buffer {
  const seen = new Set<string>();
  if (secrets.length > MAX_SECRETS) throw new CairnError('E_INPUT', `at most ${MAX_SECRETS} secrets go into one sandbox`);
  for (const secret of secrets) {
    if (!SECRET_FILE_NAME.test(secret.name)) throw new CairnError('E_INPUT', `not a secret name: ${JSON.stringify(secret.name.slice(0, 80))}`);
    if (seen.has(secret.name)) throw new CairnError('E_INPUT', `secret ${secret.name} is given twice`, { name: secret.name });
    if (!(secret.value instanceof Uint8Array) || secret.value.length > MAX_SECRET_VALUE_BYTES) {
      throw new CairnError('E_INPUT', `secret ${secret.name} must be at most ${MAX_SECRET_VALUE_BYTES} bytes`, { name: secret.name });
    }
    seen.add(secret.name);
  }
  return Buffer.concat(secrets.flatMap((secret) => [Buffer.from(`${secret.name}\0${secret.value.length}\0`, 'latin1'), Buffer.from(secret.value)]));
}

/**
 * The tar entry names for `paths` (`/out` → `out`), deduplicated, in order, and without any that
 * another one holds (`/out/a` with `/out`): an archive names each file once.
 */
export function entriesFor(paths: readonly string[]): string[] {
  const entries = [...new Set(paths.map((path) => tarEntryName(assertSandboxPath(path, { allowRoot: true }))))];
  return entries.filter((entry) => !entries.some((other) => other !== entry && entry.startsWith(`${other}/`)));
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

/** More entries than this in one transfer is refused (`E_BUDGET`): each costs memory here, even empty. */
export const MAX_TRANSFER_ENTRIES = 65_536;
/** All names of one transfer together (bytes); past it `E_BUDGET`. */
export const MAX_TRANSFER_NAME_BYTES = 16 * 1024 * 1024;

/** The agent's `--measure` of what a transfer would archive (agent/cairn-agent.c). */
export interface MeasuredFiles {
  files: number;
  dirs: number;
  links: number;
  others: number;
  bytes: number;
  /** The first entry that is none of those: what it is and where. */
  other: { kind: string; path: string } | null;
}

/** The agent's `--measure` command for `entries` (run as the sandbox user; the binary is the host's). */
export function measureCommand(agentPath: string, entries: readonly string[]): string[] {
  return [agentPath, '--measure', ...entries];
}

/** Reads `--measure`'s output; `E_INTERNAL` when it is not that. */
export function parseMeasure(output: Uint8Array): MeasuredFiles {
  const bytes = Buffer.from(output);
  const newline = bytes.indexOf(0x0a);
  const match = newline === -1 ? null : /^cairn-measure\/1 (\d{1,20}) (\d{1,20}) (\d{1,20}) (\d{1,20}) (\d{1,20})$/.exec(bytes.subarray(0, newline).toString('latin1'));
  if (match === null) throw new CairnError('E_INTERNAL', 'the exec agent did not measure the files');
  const [files, dirs, links, others, size] = match.slice(1).map(Number) as [number, number, number, number, number];
  let other: MeasuredFiles['other'] = null;
  if (others > 0) {
    const rest = bytes.subarray(newline + 1);
    const [kind, path] = rest.toString('utf8').split('\0');
    other = { kind: kind ?? 'unknown', path: path ?? '?' };
  }
  return { files, dirs, links, others, bytes: size, other };
}

/**
 * Refuses, before a byte moves, a transfer the measure says is over its bounds (`E_BUDGET`) or
 * holds an entry that is not a regular file, a directory or a symbolic link (`E_INPUT`).
 */
export function checkMeasure(measured: MeasuredFiles, maxBytes: number): void {
  if (measured.other !== null) {
    throw new CairnError('E_INPUT', `${JSON.stringify(measured.other.path.slice(0, 512))} is ${articled(measured.other.kind)}: only regular files and directories are collected (symbolic links are skipped)`, {
      path: measured.other.path.slice(0, 512),
      kind: measured.other.kind,
    });
  }
  if (measured.bytes > maxBytes) throw overBudget(measured.bytes, maxBytes);
  if (measured.files + measured.dirs + measured.links > MAX_TRANSFER_ENTRIES) throw tooManyEntries();
}

function articled(kind: string): string {
  return kind === 'unreadable' ? 'unreadable' : `a ${kind}`;
}

function overBudget(bytes: number, maxBytes: number): CairnError {
  return new CairnError('E_BUDGET', `the files come to ${bytes} bytes, more than the ${maxBytes} allowed`, { bytes, maxBytes });
}

function tooManyEntries(maxEntries = MAX_TRANSFER_ENTRIES): CairnError {
  return new CairnError('E_BUDGET', `the files are more than ${maxEntries} entries`, { maxEntries });
}

/** Entry types: kept (regular files), allowed (directories), skipped (links, as ever), all else refused. */
const KEPT_TYPES: ReadonlySet<string> = new Set(['file', 'contiguous-file']);

export interface TarCollectorOptions {
  /** Content bytes of all files together; past it `E_BUDGET`. */
  maxBytes: number;
  /** The entry names asked for (`entriesFor`): every entry must be one of them or under one. */
  entries: readonly string[];
  /** Told once when the stream is refused, so its sender can be stopped. */
  onRefused?: () => void;
  /** Default MAX_TRANSFER_ENTRIES. */
  maxEntries?: number;
}

/**
 * Unpacks a tar stream from a sandbox as it arrives, trusting none of it: each entry's name must
 * be relative, without `.`/`..`/empty components, under one of the paths asked for, and named
 * once; its type a regular file (kept), a directory, or a symbolic link (skipped, never
 * followed) — a hard link, device, fifo or anything else refuses the whole transfer (`E_INPUT`).
 * A header whose size would take the files past `maxBytes` refuses it (`E_BUDGET`) before any of
 * that entry's bytes arrive, and so do too many entries or names. On the first refusal
 * `onRefused` is told (the sender is stopped), nothing more is read, and `finish` throws: nothing
 * of a refused transfer is returned.
 */
export class TarFileCollector {
  // Names read byte for byte (latin1), so two names that are not UTF-8 never look alike; see `admit`.
  private readonly extract = tar.extract({ filenameEncoding: 'latin1' } as Parameters<typeof tar.extract>[0]);
  private readonly files: SandboxFileOut[] = [];
  private readonly names = new Set<string>();
  private declaredBytes = 0;
  private nameBytes = 0;
  private malformed: string | null = null;
  private refusal: CairnError | null = null;
  private readonly finished: Promise<void>;

  constructor(private readonly options: TarCollectorOptions) {
    this.extract.on('entry', (header, stream, next) => {
      // A pax path is already UTF-8 text (the parser decodes it so); any other name is the raw bytes.
      const raw = header.name;
      if ((header.pax as { path?: string } | undefined)?.path === undefined) header.name = Buffer.from(raw, 'latin1').toString('utf8');
      const keep = this.admit(header, raw);
      const chunks: Uint8Array[] = [];
      let size = 0;
      stream.on('data', (chunk: unknown) => {
        if (!keep || this.refusal !== null || !(chunk instanceof Uint8Array)) return;
        size += chunk.length;
        chunks.push(chunk);
      });
      stream.on('end', () => {
        if (keep && this.refusal === null) {
          this.files.push({ path: `/${stripSlash(header.name)}`, content: new Uint8Array(Buffer.concat(chunks, size)), size, mode: (header.mode ?? 0) & 0o7777 });
        }
        next();
      });
      stream.resume();
    });
    this.finished = new Promise<void>((resolve) => {
      this.extract.on('finish', () => resolve());
      this.extract.on('close', () => resolve());
      this.extract.on('error', (error: unknown) => {
        this.malformed ??= error instanceof Error ? error.message : 'unreadable archive';
        resolve();
      });
    });
  }

  /** The refusal so far (the transfer's error), or null. */
  get refused(): CairnError | null {
    return this.refusal;
  }

  write(chunk: Uint8Array): void {
    if (this.malformed === null && this.refusal === null) this.extract.write(Buffer.from(chunk));
  }

  /** Ends the stream; the files, or the transfer's error. */
  async finish(): Promise<SandboxFileOut[]> {
    if (this.refusal === null) {
      this.extract.end(null);
      await this.finished;
    }
    if (this.refusal !== null) throw this.refusal;
    if (this.malformed !== null) throw new CairnError('E_INTERNAL', `the sandbox sent a malformed archive: ${this.malformed}`);
    return this.files;
  }

  private refuse(error: CairnError): false {
    if (this.refusal !== null) return false;
    this.refusal = error;
    this.files.length = 0;
    this.extract.destroy();
    try {
      this.options.onRefused?.();
    } catch {
      // Stopping the sender is best effort; the refusal stands.
    }
    return false;
  }

  /**
   * Checks one header; true when its bytes are to be kept. `raw` is its name as the archive spelled
   * it: what "named once" compares (names that are not UTF-8 decode alike, yet are different files;
   * the runtime skips them, output-names.ts).
   */
  private admit(header: tar.Header, raw: string): boolean {
    if (this.refusal !== null) return false;
    const name = header.name;
    const shown = JSON.stringify(name.slice(0, 256));
    const bad = (why: string) => this.refuse(new CairnError('E_INPUT', `the sandbox's archive has an entry ${shown} that ${why}; nothing was collected`, { entry: name.slice(0, 256) }));
    if (name.startsWith('/')) return bad('is an absolute path');
    const relative = header.type === 'directory' ? name.replace(/\/$/, '') : name;
    const parts = relative.split('/');
    if (relative === '' || parts.some((part) => part === '' || part === '.' || part === '..') || name.includes('\0')) return bad('is not a plain relative path (empty, ., .. or NUL)');
    if (!this.options.entries.some((entry) => relative === entry || relative.startsWith(`${entry}/`))) return bad('is outside the paths asked for');
    const key = header.type === 'directory' ? raw.replace(/\/$/, '') : raw;
    if (this.names.has(key)) return bad('appears twice');
    this.names.add(key);
    this.nameBytes += Buffer.byteLength(relative);
    if (this.names.size > (this.options.maxEntries ?? MAX_TRANSFER_ENTRIES)) return this.refuse(tooManyEntries(this.options.maxEntries ?? MAX_TRANSFER_ENTRIES));
    if (this.nameBytes > MAX_TRANSFER_NAME_BYTES) return this.refuse(new CairnError('E_BUDGET', `the files' names come to more than ${MAX_TRANSFER_NAME_BYTES} bytes`));
    const type = header.type ?? 'unknown';
    const size = header.size ?? 0;
    if (type === 'symlink') return false;
    if (type === 'directory') return size === 0 ? false : bad('is a directory with content');
    if (!KEPT_TYPES.has(type)) return bad(`is ${type === 'link' ? 'a hard link' : `of type ${type}`}: only regular files and directories are collected (symbolic links are skipped)`);
    if (!Number.isSafeInteger(size) || size < 0) return bad('has no valid size');
    this.declaredBytes += size;
    if (this.declaredBytes > this.options.maxBytes) return this.refuse(overBudget(this.declaredBytes, this.options.maxBytes));
    return true;
  }
}

function stripSlash(name: string): string {
  return name.replace(/\/$/, '');
}
