import { readBoxPublicKeyFile, readSecretKeyFile, SecretCatalog, SecretStore } from '@cairn/secret-store';
import type { JsonLogger } from '@cairn/service-kit';
import type { NatsConnection } from '@nats-io/transport-node';
import type { GatewayConfig } from '../gateway.config.js';

/**
 * The gateway's side of the secret catalog (ADR 0028): the stack's bucket, written here only, each
 * value sealed to the deployment's public key (CAIRN_SECRETS_PUBLIC_KEY_FILE) — the gateway holds
 * no private key, so it cannot open what it stored. Null when no public key file is configured (the
 * secret routes answer E_UNAVAILABLE). A public key file that is unreadable, malformed or holds a
 * private key stops the gateway at boot (E_INPUT naming it).
 *
 * Once, where the old AES key file is (CAIRN_SECRETS_KEY_FILE, which the gateway still holds for
 * webhook signing secrets): every value left in PostgreSQL's `secrets` table is opened with it,
 * sealed to the public key, written to the catalog unless a secret of that name is already there,
 * and its row removed. The log line `secrets moved to the catalog` says how many.
 */
export async function openGatewaySecrets(config: GatewayConfig, nc: NatsConnection, logger: JsonLogger): Promise<SecretCatalog | null> {
  const path = config.CAIRN_SECRETS_PUBLIC_KEY_FILE;
  if (path === undefined) {
    logger.write('warn', 'no secrets public key file (CAIRN_SECRETS_PUBLIC_KEY_FILE): the secret routes answer E_UNAVAILABLE');
    return null;
  }
  const { current } = await readBoxPublicKeyFile(path);
  const catalog = await SecretCatalog.open(nc, { bucket: config.CAIRN_SECRETS_BUCKET, replicas: config.CAIRN_NATS_REPLICAS, publicKey: current });
  logger.write('info', 'secret catalog open', { bucket: config.CAIRN_SECRETS_BUCKET, key_id: current.id });
  if (config.CAIRN_SECRETS_KEY_FILE !== undefined) await moveLegacySecrets(config.CAIRN_SECRETS_KEY_FILE, config.CAIRN_DATABASE_URL, catalog, logger);
  return catalog;
}

/** The move out of PostgreSQL (ADR 0028): idempotent; rows no key of the AES key file opens stay, named. */
export async function moveLegacySecrets(keyFile: string, databaseUrl: string, catalog: SecretCatalog, logger: JsonLogger): Promise<{ moved: number; skipped: number; unreadable: string[] }> {
  const keyring = await readSecretKeyFile(keyFile);
  const legacy = await SecretStore.open({ url: databaseUrl, keyring, applicationName: 'cairn-gateway-secrets-move' });
  try {
    const outcome = await legacy.drainTo((secret) => catalog.importIfAbsent(secret));
    if (outcome.moved + outcome.skipped + outcome.unreadable.length > 0) {
      logger.write(outcome.unreadable.length > 0 ? 'error' : 'info', 'secrets moved to the catalog', { ...outcome, bucket: catalog.bucket, key_id: catalog.keyId });
    }
    return outcome;
  } finally {
    await legacy.close();
  }
}
