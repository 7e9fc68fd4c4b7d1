import { CairnError, MAX_SANDBOX_FILE_BYTES } from '@cairn/contracts';
import type { ExecResult } from '@cairn/sandbox';

/*
 * A session's file writes and reads run inside the sandbox, as its user: the path is checked
 * there, where the links are — each component from the file up to its mount must not be a
 * symbolic link, so a write never leaves /work, /out or /tmp, whatever the workload made of them.
 * A read may also name a path of the image (`/etc/os-release`): the root is read-only, so nothing
 * there is the workload's making, and the reader is the sandbox user, who could `cat` it anyway.
 * Fixed scripts; the path travels as an argument, never inside the script (I-3).
 */

/** Exit codes of the scripts, each a precise refusal. */
export const FILE_EXIT = { notFound: 2, outsideMounts: 3, symlink: 4, cannotWrite: 5, notRegular: 6, tooLarge: 7, directory: 8, permission: 9 } as const;

/** Walks from the path up to its mount; a link anywhere on the way refuses. */
const NO_LINK_ON_PATH = [
  'case "$p" in /work/*|/out/*|/tmp/*) ;; *) exit 3;; esac',
  'd=$p',
  'while :; do [ -L "$d" ] && exit 4; case "$d" in /work|/out|/tmp) break;; esac; d=${d%/*}; done',
].join('\n');

/** The same walk for a read: below the mounts as for a write; elsewhere (the read-only image) no walk. */
const NO_LINK_ON_READ_PATH = [
  'case "$p" in /work/*|/out/*|/tmp/*)',
  'd=$p',
  'while :; do [ -L "$d" ] && exit 4; case "$d" in /work|/out|/tmp) break;; esac; d=${d%/*}; done;;',
  'esac',
].join('\n');

/** `sh -c <script> cairn-put-file <path> <mode>`: stdin becomes the file (its directories made), then its mode. */
export function putFileCommand(path: string, mode: number): string[] {
  const script = [
    'p=$1; m=$2',
    NO_LINK_ON_PATH,
    '[ -d "$p" ] && exit 8',
    '[ -e "$p" ] && [ ! -f "$p" ] && exit 6',
    // An existing file the sandbox user may not write (chmod -w) is its own refusal, not a failed write.
    '[ -f "$p" ] && [ ! -w "$p" ] && exit 9',
    'mkdir -p "${p%/*}" || exit 5',
    // The directories just made are checked again: nothing on the way may have become a link.
    NO_LINK_ON_PATH,
    'cat > "$p" || exit 5',
    'chmod "$m" "$p" || exit 5',
  ].join('\n');
  return ['sh', '-c', script, 'cairn-put-file', path, mode.toString(8)];
}

/**
 * `sh -c <script> cairn-get-file <path> <max> <max+1>`: the regular file's bytes on stdout. Its
 * size is read first (a sparse 1 TiB file is refused at once, exit 7), and what is sent is cut at
 * one byte past the bound whatever the file does meanwhile: the host never reads more than that.
 */
export function getFileCommand(path: string, maxBytes: number = MAX_SANDBOX_FILE_BYTES): string[] {
  const script = [
    'p=$1',
    NO_LINK_ON_READ_PATH,
    '[ -e "$p" ] || exit 2',
    '[ -d "$p" ] && exit 8',
    '[ -f "$p" ] || exit 6',
    '[ -r "$p" ] || exit 9',
    's=$(stat -c %s "$p") || exit 5',
    '[ "$s" -le "$2" ] || exit 7',
    'exec head -c "$3" "$p"',
  ].join('\n');
  return ['sh', '-c', script, 'cairn-get-file', path, String(maxBytes), String(maxBytes + 1)];
}

/** The refusal a file script's non-zero exit stands for. */
export function fileCommandError(path: string, result: Pick<ExecResult, 'exitCode' | 'stderr'>): CairnError {
  const details = { path };
  switch (result.exitCode) {
    case FILE_EXIT.notFound:
      return new CairnError('E_NOT_FOUND', `${path} does not exist in the sandbox`, details);
    case FILE_EXIT.outsideMounts:
      return new CairnError('E_INPUT', `${path} is not under /work, /out or /tmp`, details);
    case FILE_EXIT.symlink:
      return new CairnError('E_INPUT', `${path}: a symbolic link is on the path inside the sandbox; links are refused`, details);
    case FILE_EXIT.notRegular:
      return new CairnError('E_INPUT', `${path} is not a regular file (a directory or a device)`, details);
    case FILE_EXIT.directory:
      return new CairnError('E_INPUT', `${path} is a directory, not a file`, { ...details, reason: 'directory' });
    case FILE_EXIT.permission:
      // The sandbox user's own file modes refuse it (chmod -r / -w): the operation's caller may not, in there.
      return new CairnError('E_FORBIDDEN', `${path}: permission denied to the sandbox user`, { ...details, reason: 'permission' });
    case FILE_EXIT.tooLarge:
      return new CairnError('E_TOO_LARGE', `${path} is larger than ${MAX_SANDBOX_FILE_BYTES} bytes`, details);
    default: {
      const stderr = Buffer.from(result.stderr).toString('utf8').slice(0, 512);
      return new CairnError('E_INPUT', `${path} could not be written or read in the sandbox (exit ${String(result.exitCode)}): ${stderr}`, details);
    }
  }
}
