import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { lstat, mkdir, open, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { PG_SERVICES } from '@cairn/config';
import { CairnError } from '@cairn/contracts';
import { newApiKey } from './stack-file.js';

/*
 * The key files of a stack that `cairn up` does not start (docker-compose.yml, deploy/k8s): one
 * directory per reader, so each container mounts only what it needs — the grader alone holds the
 * seal key, the gateway alone the bootstrap API key; the secret store's key goes to the gateway and
 * the runtime, the database password to the processes that connect and to PostgreSQL's first start.
 *
 *   <dir>/gateway/api-key         the bootstrap admin key (CAIRN_API_KEY_FILE)
 *   <dir>/gateway/seal-keys.pub   the seal's public keys (CAIRN_SEAL_PUBLIC_KEYS_FILE), mode 0644
 *   <dir>/grader/seal.key         the seal signing key (CAIRN_SEAL_KEY_FILE)
 *   <dir>/gateway/secrets-box.pub the secrets public key the gateway seals to (CAIRN_SECRETS_PUBLIC_KEY_FILE), mode 0644
 *   <dir>/worker/secrets-box.key  the secrets private key, the runtime's (CAIRN_SECRETS_PRIVATE_KEY_FILE, ADR 0028)
 *   <dir>/store/secrets.key       the AES key of webhook signing secrets (CAIRN_SECRETS_KEY_FILE)
 *   <dir>/db/password             the PostgreSQL role `cairn`'s password (PostgreSQL's first start)
 *   <dir>/db/pgpass               the same as a libpq password file (PGPASSFILE), for the operator's tools
 *   <dir>/db-<service>/password   the password of `cairn_<service>`, the role of the projector, intake, the
 *                                 gateway and webhooks (CAIRN_DATABASE_PASSWORD_FILE; `cairn db-roles`, ADR 0032)
 *
 * Every directory 0700, every file 0600, all of them this process's user's: the services read them
 * as that user. Made when absent, never overwritten, so running it again changes nothing.
 */

export const STACK_KEY_FILES = Object.freeze({
  apiKey: 'gateway/api-key',
  sealPublicKeys: 'gateway/seal-keys.pub',
  sealKey: 'grader/seal.key',
  secretsKey: 'store/secrets.key',
  secretsBoxKey: 'worker/secrets-box.key',
  secretsBoxPublic: 'gateway/secrets-box.pub',
  dbPassword: 'db/password',
  pgpass: 'db/pgpass',
});

export interface StackKeysResult {
  dir: string;
  /** The files made now (relative to `dir`); the others were there. */
  created: string[];
  /** The seal's verifier key, as `GET /.well-known/cairn/keys` will serve it. */
  verifierKey: string;
}

async function privateDir(path: string): Promise<void> {
  await mkdir(path, { recursive: true, mode: 0o700 });
  const seen = await lstat(path);
  const uid = process.getuid?.() ?? -1;
  if (!seen.isDirectory() || seen.isSymbolicLink()) throw new CairnError('E_INPUT', `${path} is not a directory`, { path });
  if (uid !== -1 && seen.uid !== uid) throw new CairnError('E_INPUT', `${path} belongs to uid ${seen.uid}, not to this process's user (${uid})`, { path });
  if ((seen.mode & 0o077) !== 0) throw new CairnError('E_INPUT', `${path} has mode 0${(seen.mode & 0o777).toString(8)}: it must be 0700`, { path });
}

/** Writes `content` to a new file (mode 0600); false when the file is already there. */
async function createOnce(path: string, content: string): Promise<boolean> {
  try {
    const handle = await open(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
    try {
      await handle.writeFile(content, 'utf8');
      await handle.sync();
    } finally {
      await handle.close();
    }
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw new CairnError('E_INPUT', `cannot create ${path}: ${(error as NodeJS.ErrnoException).code ?? String(error)}`, { path });
  }
}

/** Makes the key files of a stack under `dir` where they are absent (see above). */
export async function ensureStackKeys(dir: string, sealName: string): Promise<StackKeysResult> {
  const created: string[] = [];
  await privateDir(dir);
  for (const sub of ['gateway', 'grader', 'store', 'worker', 'db', ...PG_SERVICES.map((s) => `db-${s}`)]) await privateDir(join(dir, sub));
  const path = (file: string) => join(dir, file);

  if (await createOnce(path(STACK_KEY_FILES.apiKey), `${newApiKey()}\n`)) created.push(STACK_KEY_FILES.apiKey);
  // Hex only: safe in a libpq password file and in SQL without quoting rules to get wrong.
  if (await createOnce(path(STACK_KEY_FILES.dbPassword), `${randomBytes(24).toString('hex')}\n`)) created.push(STACK_KEY_FILES.dbPassword);
  const password = (await readFile(path(STACK_KEY_FILES.dbPassword), 'utf8')).trim();
  if (!/^[0-9a-f]{16,}$/.test(password)) throw new CairnError('E_INPUT', `${path(STACK_KEY_FILES.dbPassword)} does not hold a hex password`, { path: path(STACK_KEY_FILES.dbPassword) });
  if (await createOnce(path(STACK_KEY_FILES.pgpass), `*:*:*:cairn:${password}\n`)) created.push(STACK_KEY_FILES.pgpass);
  for (const service of PG_SERVICES) {
    const file = `db-${service}/password`;
    if (await createOnce(path(file), `${randomBytes(24).toString('hex')}\n`)) created.push(file);
  }

  const { ensureBoxKeyFiles, ensureSealKeyFile, ensureSecretKeyFile } = await import('@cairn/secret-store');
  if ((await ensureSecretKeyFile(path(STACK_KEY_FILES.secretsKey))).created) created.push(STACK_KEY_FILES.secretsKey);
  if ((await ensureBoxKeyFiles(path(STACK_KEY_FILES.secretsBoxKey), path(STACK_KEY_FILES.secretsBoxPublic))).created) created.push(STACK_KEY_FILES.secretsBoxKey);
  const seal = await ensureSealKeyFile(path(STACK_KEY_FILES.sealKey), path(STACK_KEY_FILES.sealPublicKeys), sealName);
  if (seal.created) created.push(STACK_KEY_FILES.sealKey);
  return { dir, created, verifierKey: seal.verifierKey };
}
