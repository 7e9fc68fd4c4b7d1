import { constants } from 'node:fs';
import { open } from 'node:fs/promises';
import { CairnError, isCairnError } from '@cairn/contracts';
import { formatSecretKeyring, generateSecretKey, parseSecretKeyring } from '@cairn/secrets';
import type { SecretKeyring } from '@cairn/secrets';
import { errnoCode, readKeyFileText } from './key-file.io.js';

/*
 * The operator's key file (PRODUCT.md "State that is not evidence"): one or more 32-byte keys as
 * hex lines, the first the primary, readable by its owner only (mode 0600 or stricter). Cairn's
 * processes read it at boot and keep the keys in memory; its content never reaches a log.
 */

/** The file name `cairn up` uses under `$CAIRN_HOME`. */
export const SECRET_KEY_FILE = 'secrets.key';

export { checkKeyFileMode } from './key-file.io.js';

/** The keyring in the key file at `path`, after checking its mode (E_INPUT naming the problem). */
export async function readSecretKeyFile(path: string): Promise<SecretKeyring> {
  const text = await readKeyFileText(path, 'secret key file', { private: true });
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
