import { constants } from 'node:fs';
import { lstat, open, readFile } from 'node:fs/promises';
import { CairnError, isCairnError } from '@cairn/contracts';
import { formatSecretKeyring, generateSecretKey, parseSecretKeyring } from '@cairn/secrets';
import type { SecretKeyring } from '@cairn/secrets';

/*
 * The operator's key file (PRODUCT.md "State that is not evidence"): one or more 32-byte keys as
 * hex lines, the first the primary, readable by its owner only (mode 0600 or stricter). Cairn's
 * processes read it at boot and keep the keys in memory; its content never reaches a log.
 */

/** The file name `cairn up` uses under `$CAIRN_HOME`. */
export const SECRET_KEY_FILE = 'secrets.key';

function errnoCode(error: unknown): string | undefined {
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

/** The keyring in the key file at `path`, after checking its mode (E_INPUT naming the problem). */
export async function readSecretKeyFile(path: string): Promise<SecretKeyring> {
  await checkKeyFileMode(path);
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    throw new CairnError('E_INPUT', `the secret key file ${path} cannot be read: ${errnoCode(error) ?? String(error)}`, { path });
  }
  return parseSecretKeyring(text, `the secret key file ${path}`);
}

/**
 * `cairn up`: creates the key file with one fresh key (mode 0600, never overwriting) when it is
 * absent; an existing one is checked like `readSecretKeyFile`. Returns whether it was created.
 */
export async function ensureSecretKeyFile(path: string): Promise<{ created: boolean; keyring: SecretKeyring }> {
  try {
    const handle = await open(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
    try {
      await handle.writeFile(formatSecretKeyring([generateSecretKey()]), 'utf8');
      await handle.sync();
    } finally {
      await handle.close();
    }
    return { created: true, keyring: await readSecretKeyFile(path) };
  } catch (error) {
    if (errnoCode(error) !== 'EEXIST') {
      if (isCairnError(error)) throw error;
      throw new CairnError('E_INPUT', `the secret key file ${path} cannot be created: ${errnoCode(error) ?? String(error)}`, { path });
    }
  }
  return { created: false, keyring: await readSecretKeyFile(path) };
}
