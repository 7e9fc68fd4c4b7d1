import { loadConfig } from '@cairn/config';
import { readSecretKeyFile } from '@cairn/secret-store';
import type { SecretKeyring } from '@cairn/secrets';
import type { JsonLogger } from '@cairn/service-kit';
import { WebhookGuardConfigSchema, WebhookStore } from '@cairn/webhooks';
import type { OnApplicationShutdown } from '@nestjs/common';
import type { GatewayConfig } from '../gateway.config.js';

/**
 * The gateway's side of webhooks: the store (registrations, delivery log, replays), the keyring
 * that seals signing secrets (null without a key file: registering is E_UNAVAILABLE), and the
 * operator's SSRF switch (CAIRN_WEBHOOKS_ALLOW_PRIVATE, read once at boot).
 */
export class GatewayWebhooks implements OnApplicationShutdown {
  private constructor(
    readonly store: WebhookStore,
    readonly keyring: SecretKeyring | null,
    readonly allowPrivate: boolean,
  ) {}

  static async open(config: GatewayConfig, logger: JsonLogger, env: NodeJS.ProcessEnv = process.env): Promise<GatewayWebhooks> {
    const { CAIRN_WEBHOOKS_ALLOW_PRIVATE: allowPrivate } = loadConfig(WebhookGuardConfigSchema, env);
    const keyring = config.CAIRN_SECRETS_KEY_FILE === undefined ? null : await readSecretKeyFile(config.CAIRN_SECRETS_KEY_FILE);
    const store = await WebhookStore.open({ url: config.CAIRN_DATABASE_URL, applicationName: 'cairn-gateway-webhooks' });
    logger.write(keyring === null ? 'warn' : 'info', 'webhook store open', { can_register: keyring !== null, allow_private: allowPrivate });
    return new GatewayWebhooks(store, keyring, allowPrivate);
  }

  async onApplicationShutdown(): Promise<void> {
    await this.store.close();
  }
}
