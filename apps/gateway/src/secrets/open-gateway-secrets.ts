import { readSecretKeyFile, SecretStore } from '@cairn/secret-store';
import type { JsonLogger } from '@cairn/service-kit';
import type { GatewayConfig } from '../gateway.config.js';

/**
 * The gateway's secret store, from the operator's key file (CAIRN_SECRETS_KEY_FILE), or null when
 * none is configured. A key file that is unreadable, malformed or readable by others stops the
 * gateway at boot (E_INPUT naming it). Values sealed under an older key of the file are re-sealed
 * under its first (key rotation, docs/secrets.md).
 */
export async function openGatewaySecrets(config: GatewayConfig, logger: JsonLogger): Promise<SecretStore | null> {
  const path = config.CAIRN_SECRETS_KEY_FILE;
  if (path === undefined) {
    logger.write('warn', 'no secret key file (CAIRN_SECRETS_KEY_FILE): the secret routes answer E_UNAVAILABLE');
    return null;
  }
  const keyring = await readSecretKeyFile(path);
  const store = await SecretStore.open({ url: config.CAIRN_DATABASE_URL, keyring, applicationName: 'cairn-gateway-secrets' });
  try {
    const { resealed, unreadable } = await store.reseal();
    logger.write(unreadable.length > 0 ? 'error' : 'info', 'secret store open', {
      key_id: keyring.primary.id,
      keys: keyring.keys.length,
      resealed,
      unreadable,
    });
  } catch (error) {
    await store.close();
    throw error;
  }
  return store;
}
