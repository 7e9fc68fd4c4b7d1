import { constants } from 'node:fs';
import { lstat, open, readFile } from 'node:fs/promises';
import { CairnError, isCairnError } from '@cairn/contracts';
import { nkeyAuthenticator, nkeys } from '@nats-io/transport-node';
import type { Authenticator } from '@nats-io/transport-node';

/*
 * A service's NATS credentials (docs/adr/0022): one nkey seed (`SU…`) in a file of its own, mode
 * 0600, named by CAIRN_NATS_CREDS_FILE and read at boot, as the grader reads its seal key. The
 * server holds only the public key (`U…`), in the authorization include `cairn nats-auth` writes.
 */

function errnoCode(error: unknown): string | undefined {
  return typeof error === 'object' && error !== null && 'code' in error && typeof error.code === 'string' ? error.code : undefined;
}

const SEED = /^SU[A-Z2-7]{56}$/;

/** Refuses (E_INPUT, naming the file, never its content) a file that is not ours alone. */
async function checkMode(path: string): Promise<void> {
  let stats;
  try {
    stats = await lstat(path);
  } catch (error) {
    throw new CairnError('E_INPUT', `the NATS credentials file ${path} (CAIRN_NATS_CREDS_FILE) cannot be read: ${errnoCode(error) ?? String(error)}`, { path });
  }
  if (!stats.isFile()) throw new CairnError('E_INPUT', `the NATS credentials file ${path} (CAIRN_NATS_CREDS_FILE) is not a regular file`, { path });
  const mode = stats.mode & 0o777;
  if ((mode & 0o077) !== 0) {
    throw new CairnError('E_INPUT', `the NATS credentials file ${path} has mode 0${mode.toString(8)}: it must be readable by its owner only (chmod 600 ${path})`, {
      path,
      mode: `0${mode.toString(8)}`,
    });
  }
  if (typeof process.getuid === 'function' && stats.uid !== process.getuid()) {
    throw new CairnError('E_INPUT', `the NATS credentials file ${path} belongs to uid ${stats.uid}, not to this process's user`, { path });
  }
}

/** The seed in the credentials file at `path`, after checking its mode; E_INPUT for anything but one user seed. */
export async function readNatsSeedFile(path: string): Promise<string> {
  await checkMode(path);
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    throw new CairnError('E_INPUT', `the NATS credentials file ${path} cannot be read: ${errnoCode(error) ?? String(error)}`, { path });
  }
  const seed = text.trim();
  if (!SEED.test(seed)) throw new CairnError('E_INPUT', `the NATS credentials file ${path} holds no nkey user seed (one line SU…)`, { path });
  try {
    nkeys.fromSeed(new TextEncoder().encode(seed)).getPublicKey();
  } catch {
    throw new CairnError('E_INPUT', `the NATS credentials file ${path} holds no valid nkey user seed`, { path });
  }
  return seed;
}

/** The authenticator `connect` takes for the credentials file at `path` (checked as `readNatsSeedFile`). */
export async function natsAuthenticatorFromFile(path: string): Promise<Authenticator> {
  const seed = await readNatsSeedFile(path);
  return nkeyAuthenticator(new TextEncoder().encode(seed));
}

/** The public key (`U…`) of the seed in `path`: what the server's authorization names. */
export async function natsPublicKeyOf(path: string): Promise<string> {
  const seed = await readNatsSeedFile(path);
  return nkeys.fromSeed(new TextEncoder().encode(seed)).getPublicKey();
}

/**
 * `cairn nats-auth`: a fresh user seed at `path` (mode 0600, never overwriting one that exists, which
 * is checked instead). Returns its public key and whether it was made now.
 */
export async function ensureNatsSeedFile(path: string): Promise<{ created: boolean; publicKey: string }> {
  let created = false;
  try {
    const handle = await open(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
    try {
      const user = nkeys.createUser();
      await handle.writeFile(`${new TextDecoder().decode(user.getSeed())}\n`, 'utf8');
      await handle.sync();
      created = true;
    } finally {
      await handle.close();
    }
  } catch (error) {
    if (errnoCode(error) !== 'EEXIST') {
      if (isCairnError(error)) throw error;
      throw new CairnError('E_INPUT', `the NATS credentials file ${path} cannot be created: ${errnoCode(error) ?? String(error)}`, { path });
    }
  }
  return { created, publicKey: await natsPublicKeyOf(path) };
}
