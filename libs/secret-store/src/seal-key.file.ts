import { readFile } from 'node:fs/promises';
import { CairnError, isCairnError } from '@cairn/contracts';
import { formatSignerKey, formatVerifierKey, generateSigner, parseSignerKey, parseVerifierKey } from '@cairn/transparency';
import type { NoteSigner, NoteVerifier } from '@cairn/transparency';
import { createKeyFileOnce, errnoCode, readKeyFileText, writeAtomically } from './key-file.io.js';

/*
 * The deployment's seal signing key (docs/proofs.md): one line `PRIVATE+KEY+<name>+<id>+<base64>`
 * (golang.org/x/mod/sumdb/note's signer key), mode 0600, outside the database, read by the grader
 * at boot. Its public half, and every retired one, is in the public keys file beside it: one
 * verifier key a line, the current first; the gateway serves that file, never the private one.
 */

export const SEAL_KEY_FILE = 'seal.key';
export const SEAL_PUBLIC_KEYS_FILE = 'seal-keys.pub';

/** The signer in the key file at `path`, after checking its mode (E_INPUT naming the problem; never its content). */
export async function readSealKeyFile(path: string): Promise<NoteSigner> {
  const text = await readKeyFileText(path, 'seal key file', { private: true });
  try {
    return await parseSignerKey(text);
  } catch (error) {
    if (isCairnError(error)) throw new CairnError('E_INPUT', `the seal key file ${path} holds no signer key (PRIVATE+KEY+<name>+<id>+<base64>)`, { path });
    throw error;
  }
}

export interface PublishedKey {
  key: string;
  verifier: NoteVerifier;
  status: 'current' | 'retired';
}

/** The public keys file: verifier keys one a line (blank lines and `#` comments skipped), the first current. */
export async function readPublicKeysFile(path: string): Promise<PublishedKey[]> {
  const text = await readKeyFileText(path, 'seal public keys file', { private: false });
  const keys: PublishedKey[] = [];
  for (const line of text.split('\n').map((l) => l.trim())) {
    if (line === '' || line.startsWith('#')) continue;
    keys.push({ key: line, verifier: await parseVerifierKey(line), status: keys.length === 0 ? 'current' : 'retired' });
  }
  return keys;
}

/** The keys a public keys file lists; none when there is no file yet. */
async function listedKeys(publicPath: string): Promise<string[]> {
  try {
    await readFile(publicPath);
  } catch (error) {
    if (errnoCode(error) === 'ENOENT') return [];
  }
  return (await readPublicKeysFile(publicPath)).map((k) => k.key);
}

/** The public keys file with `current` first and every other key already listed after it, retired. */
async function publish(publicPath: string, current: string): Promise<void> {
  const existing = await listedKeys(publicPath);
  if (existing[0] === current) return;
  const lines = [current, ...existing.filter((k) => k !== current)];
  await writeAtomically(publicPath, `${lines.join('\n')}\n`, 0o644);
}

/**
 * `cairn up`: creates the seal key (mode 0600, never overwriting) when absent, and makes sure the
 * public keys file names it as current. Returns whether the key was created, and its verifier key.
 */
export async function ensureSealKeyFile(path: string, publicPath: string, name: string): Promise<{ created: boolean; verifierKey: string }> {
  const created = await createKeyFileOnce(path, 'seal key file', async () => {
    const { signer, seed } = await generateSigner(name);
    return `${formatSignerKey(signer.name, signer.keyId, seed)}\n`;
  });
  const signer = await readSealKeyFile(path);
  const verifierKey = await formatVerifierKey(signer.name, signer.publicKey);
  await publish(publicPath, verifierKey);
  return { created, verifierKey };
}

/**
 * Rotation: a fresh key replaces the private one (written aside, then renamed over it) and the old
 * verifier key stays in the public keys file as retired, so every seal it made still verifies.
 */
export async function rotateSealKeyFile(path: string, publicPath: string): Promise<{ retired: string; current: string }> {
  const old = await readSealKeyFile(path);
  const retired = await formatVerifierKey(old.name, old.publicKey);
  const { signer, seed } = await generateSigner(old.name);
  const current = await formatVerifierKey(signer.name, signer.publicKey);
  // Published before the private key changes: a seal the new key makes is never unverifiable.
  const existing = await listedKeys(publicPath);
  await writeAtomically(publicPath, `${[current, retired, ...existing.filter((k) => k !== retired && k !== current)].join('\n')}\n`, 0o644);
  await writeAtomically(path, `${formatSignerKey(signer.name, signer.keyId, seed)}\n`, 0o600);
  return { retired, current };
}
