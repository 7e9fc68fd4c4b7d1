import { constants } from 'node:fs';
import { lstat, open, readFile, rename, writeFile } from 'node:fs/promises';
import { CairnError, isCairnError } from '@cairn/contracts';

/*
 * Reading Cairn's key files (the secret store's, the seal key, the secrets box keys): what a
 * private one must be (a regular file only its owner may read), and one precise E_INPUT when a file
 * cannot be read — naming the file, never its content.
 */

/** The errno code of a failed file call (`ENOENT`, `EEXIST`, …). */
export function errnoCode(error: unknown): string | undefined {
  return typeof error === 'object' && error !== null && 'code' in error && typeof error.code === 'string' ? error.code : undefined;
}

/** E_INPUT unless `path` is a regular file (not a link) that only its owner may read or write. */
export async function checkKeyFileMode(path: string, what = 'secret key file'): Promise<void> {
  let stats;
  try {
    stats = await lstat(path);
  } catch (error) {
    throw new CairnError('E_INPUT', `the ${what} ${path} cannot be read: ${errnoCode(error) ?? String(error)}`, { path });
  }
  if (!stats.isFile()) throw new CairnError('E_INPUT', `the ${what} ${path} is not a regular file`, { path });
  const mode = stats.mode & 0o777;
  if ((mode & 0o077) !== 0) {
    throw new CairnError(
      'E_INPUT',
      `the ${what} ${path} has mode 0${mode.toString(8)}: it must be readable by its owner only (chmod 600 ${path})`,
      { path, mode: `0${mode.toString(8)}` },
    );
  }
  if (typeof process.getuid === 'function' && stats.uid !== process.getuid()) {
    throw new CairnError('E_INPUT', `the ${what} ${path} belongs to uid ${stats.uid}, not to this process's user`, { path });
  }
}

/** The text of the key file at `path` (`what` names it in errors); a private one has its mode checked first. */
export async function readKeyFileText(path: string, what: string, options: { private: boolean }): Promise<string> {
  if (options.private) await checkKeyFileMode(path, what);
  try {
    return await readFile(path, 'utf8');
  } catch (error) {
    throw new CairnError('E_INPUT', `the ${what} ${path} cannot be read: ${errnoCode(error) ?? String(error)}`, { path });
  }
}

/**
 * Creates the private key file at `path` (mode 0600, never following a link, never overwriting)
 * with what `content` makes, fsynced; false when the file is already there. `content` runs only
 * once the file is ours. Any other failure is E_INPUT naming `what`.
 */
export async function createKeyFileOnce(path: string, what: string, content: () => string | Promise<string>): Promise<boolean> {
  try {
    const handle = await open(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
    try {
      await handle.writeFile(await content(), 'utf8');
      await handle.sync();
    } finally {
      await handle.close();
    }
    return true;
  } catch (error) {
    if (errnoCode(error) === 'EEXIST') return false;
    if (isCairnError(error)) throw error;
    throw new CairnError('E_INPUT', `the ${what} ${path} cannot be created: ${errnoCode(error) ?? String(error)}`, { path });
  }
}

/** Replaces the file at `path` by a rename, so a reader sees the old text or the new, never half of it. */
export async function writeAtomically(path: string, text: string, mode: number): Promise<void> {
  const temporary = `${path}.${process.pid}.tmp`;
  await writeFile(temporary, text, { mode, flag: 'wx' });
  await rename(temporary, path);
}
