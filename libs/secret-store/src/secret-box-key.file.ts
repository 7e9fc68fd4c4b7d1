import { lstat, readFile } from 'node:fs/promises';
import { CairnError, isCairnError } from '@cairn/contracts';
import { formatBoxKeyring, formatBoxPublicKeys, generateBoxKey, parseBoxKeyring, parseBoxPublicKeys } from '@cairn/secrets';
import type { BoxKeyring, BoxPublicKey } from '@cairn/secrets';
import { createKeyFileOnce, errnoCode, readKeyFileText, writeAtomically } from './key-file.io.js';

/*
 * The deployment's secrets keypair (ADR 0028): X25519. The private key file (one
 * `x25519-private:<hex>` a line, the current first, older ones after it so values sealed to them
 * still open) is for the runtime workers only — the runtime, and the kernel, verifier and grader
 * that scan with a run's values —, mode 0600. The public key file (`x25519-public:<hex>`, the
 * current first) is what the gateway seals to; it may be world-readable, and a private key in it
 * stops the gateway at boot. Neither travels in an environment variable or on a command line:
 * their paths do.
 */

export const SECRETS_PRIVATE_KEY_FILE = 'secrets-box.key';
export const SECRETS_PUBLIC_KEY_FILE = 'secrets-box.pub';

/** The private keys at `path`, after checking its mode (E_INPUT naming the problem; never its content). */
export async function readBoxKeyringFile(path: string): Promise<BoxKeyring> {
  const text = await readKeyFileText(path, 'secrets private key file', { private: true });
  return parseBoxKeyring(text, `the secrets private key file ${path}`);
}

/** The current public key of the file at `path` (a regular file, holding no private key), and the older ones listed. */
export async function readBoxPublicKeyFile(path: string): Promise<{ current: BoxPublicKey; keys: BoxPublicKey[] }> {
  let text: string;
  try {
    const stats = await lstat(path);
    if (!stats.isFile()) throw new CairnError('E_INPUT', `the secrets public key file ${path} is not a regular file`, { path });
    text = await readFile(path, 'utf8');
  } catch (error) {
    if (isCairnError(error)) throw error;
    throw new CairnError('E_INPUT', `the secrets public key file ${path} cannot be read: ${errnoCode(error) ?? String(error)}`, { path });
  }
  const keys = parseBoxPublicKeys(text, `the secrets public key file ${path}`);
  return { current: keys[0]!, keys };
}

/** The public key file naming the private file's keys, the current first (rewritten only when it differs). */
async function publish(publicPath: string, keyring: BoxKeyring): Promise<void> {
  const text = formatBoxPublicKeys(keyring.keys.map((k) => k.publicKey));
  const existing = await readFile(publicPath, 'utf8').catch(() => null);
  if (existing !== text) await writeAtomically(publicPath, text, 0o644);
}

/**
 * `cairn up`: creates the private key file with a fresh keypair (mode 0600, never overwriting) when
 * absent, checks an existing one, and (re)writes the public key file from it. Returns whether the
 * key was created and the current key's id.
 */
export async function ensureBoxKeyFiles(path: string, publicPath: string): Promise<{ created: boolean; keyId: string }> {
  const created = await createKeyFileOnce(path, 'secrets private key file', () => formatBoxKeyring([generateBoxKey()]));
  const keyring = await readBoxKeyringFile(path);
  await publish(publicPath, keyring);
  return { created, keyId: keyring.current.id };
}

/**
 * `cairn secrets rotate-key`: a fresh keypair becomes current, the older keys stay after it in the
 * private file (values sealed to them still open until re-sealed), and the public key file names
 * the new one first. The private file is rewritten aside and renamed over (mode 0600).
 */
export async function rotateBoxKeyFiles(path: string, publicPath: string): Promise<{ previous: string; current: string; keys: number }> {
  const old = await readBoxKeyringFile(path);
  const fresh = generateBoxKey();
  const keyring: BoxKeyring = { current: fresh, keys: [fresh, ...old.keys] };
  await writeAtomically(path, formatBoxKeyring(keyring.keys), 0o600);
  await publish(publicPath, keyring);
  return { previous: old.current.id, current: fresh.id, keys: keyring.keys.length };
}
