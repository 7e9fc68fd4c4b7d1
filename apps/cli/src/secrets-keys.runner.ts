import { join } from 'node:path';
import { EvidenceLogConfigSchema, loadConfig, SecretCatalogConfigSchema } from '@cairn/config';
import { CairnError } from '@cairn/contracts';
import { connectNats } from '@cairn/evidence-log';
import { CONNECT_TIMEOUT_MS, credsOf } from './connections.js';
import { SECRETS_PRIVATE_KEY_FILE, SECRETS_PUBLIC_KEY_FILE, stackHome } from './stack/stack-config.js';
import { readStackFile } from './stack/stack-file.js';

/*
 * `cairn secrets rotate-key` and `cairn secrets reseal` (ADR 0028): run where the secrets private
 * key file is — the gateway never holds it. Rotation puts a fresh keypair first in the private file
 * (older keys stay after it, so what is sealed to them still opens) and rewrites the public file;
 * re-sealing opens every value of the catalog sealed to an older key and seals it to the current
 * one, one compare-and-set each, with the operator's NATS user (the services' users may not write
 * the bucket, save the gateway's).
 */

interface KeyPaths {
  privateFile: string;
  publicFile: string;
  env: NodeJS.ProcessEnv;
}

/** The running stack's key files, NATS and bucket settings where the caller set none. */
async function stackKeyPaths(env: NodeJS.ProcessEnv): Promise<KeyPaths> {
  const home = stackHome(env);
  const stack = await readStackFile(home).catch(() => null);
  const merged: NodeJS.ProcessEnv = { ...env };
  for (const key of ['CAIRN_NATS_URL', 'CAIRN_NATS_CREDS_FILE', 'CAIRN_NATS_REPLICAS', 'CAIRN_SECRETS_BUCKET', 'CAIRN_SECRETS_PRIVATE_KEY_FILE', 'CAIRN_SECRETS_PUBLIC_KEY_FILE']) {
    const value = stack?.config[key];
    if ((merged[key] === undefined || merged[key] === '') && value !== undefined) merged[key] = value;
  }
  return {
    privateFile: merged.CAIRN_SECRETS_PRIVATE_KEY_FILE || join(home, SECRETS_PRIVATE_KEY_FILE),
    publicFile: merged.CAIRN_SECRETS_PUBLIC_KEY_FILE || join(home, SECRETS_PUBLIC_KEY_FILE),
    env: merged,
  };
}

/** Re-seals the catalog to the private file's current key. */
export async function resealSecrets(env: NodeJS.ProcessEnv): Promise<{ keyId: string; resealed: number; unreadable: string[] }> {
  const paths = await stackKeyPaths(env);
  const { readBoxKeyringFile, SecretCatalog } = await import('@cairn/secret-store');
  const keyring = await readBoxKeyringFile(paths.privateFile);
  const nats = loadConfig(EvidenceLogConfigSchema, paths.env);
  const { CAIRN_SECRETS_BUCKET: bucket } = loadConfig(SecretCatalogConfigSchema, paths.env);
  const nc = await connectNats({ servers: nats.CAIRN_NATS_URL, name: 'cairn-cli', timeout: CONNECT_TIMEOUT_MS, maxReconnectAttempts: 0, ...credsOf(nats) });
  try {
    const catalog = await SecretCatalog.open(nc, { bucket, replicas: nats.CAIRN_NATS_REPLICAS });
    return { keyId: keyring.current.id, ...(await catalog.reseal(keyring)) };
  } catch (error) {
    throw error instanceof CairnError ? error : new CairnError('E_UNAVAILABLE', `cannot re-seal the secret catalog: ${error instanceof Error ? error.message : String(error)}`);
  } finally {
    await nc.close().catch(() => undefined);
  }
}

/** A fresh keypair first, then a re-seal of the catalog to it. */
export async function rotateSecretsKey(env: NodeJS.ProcessEnv): Promise<{ previous: string; current: string; keys: number; resealed: number; unreadable: string[] }> {
  const paths = await stackKeyPaths(env);
  const { rotateBoxKeyFiles } = await import('@cairn/secret-store');
  const rotated = await rotateBoxKeyFiles(paths.privateFile, paths.publicFile);
  const { resealed, unreadable } = await resealSecrets(env);
  return { ...rotated, resealed, unreadable };
}
