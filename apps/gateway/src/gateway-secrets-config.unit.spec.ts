import { loadConfig } from '@cairn/config';
import { describe, expect, it } from 'vitest';
import { GatewayConfigSchema } from './gateway.config.js';

/*
 * The gateway seals secret values to the workers' public key and must have no way to open them
 * (ADR 0028): its configuration has no setting for a private key, so none reaches it, even when the
 * environment it is started with names one.
 */
describe("the gateway's configuration and the secrets keypair", () => {
  it('has a setting for the public key file and none for a private key', () => {
    const settings = Object.keys(GatewayConfigSchema.shape);
    expect(settings).toContain('CAIRN_SECRETS_PUBLIC_KEY_FILE');
    expect(settings.filter((name) => /PRIVATE/.test(name))).toEqual([]);
  });

  it('given an environment that names the private key file, when loaded, then the gateway does not see it', () => {
    const config = loadConfig(GatewayConfigSchema, { CAIRN_SECRETS_PRIVATE_KEY_FILE: '/keys/secrets-box.key', CAIRN_SECRETS_PUBLIC_KEY_FILE: '/keys/secrets-box.pub' });
    expect(config.CAIRN_SECRETS_PUBLIC_KEY_FILE).toBe('/keys/secrets-box.pub');
    expect(JSON.stringify(config)).not.toContain('secrets-box.key');
  });
});
