import { formatSecretKeyring, generateSecretKey, parseSecretKeyring } from '@cairn/secrets';
import type { SecretKeyring } from '@cairn/secrets';
import { createKeyFileOnce, readKeyFileText } from './key-file.io.js';

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
  const created = await createKeyFileOnce(path, 'secret key file', () => formatSecretKeyring([generateSecretKey()]));
  return { created, keyring: await readSecretKeyFile(path) };
}
