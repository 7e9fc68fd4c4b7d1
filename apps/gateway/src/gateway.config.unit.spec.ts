import { loadConfig } from '@cairn/config';
import { isCairnError } from '@cairn/contracts';
import { describe, expect, it } from 'vitest';
import { generateApiKey } from './auth/api-key.codec.js';
import { GatewayConfigSchema } from './gateway.config.js';

describe('GatewayConfigSchema', () => {
  it('defaults to loopback on 7410 with no bootstrap key', () => {
    const config = loadConfig(GatewayConfigSchema, {});
    expect(config).toMatchObject({ CAIRN_GATEWAY_HOST: '127.0.0.1', CAIRN_GATEWAY_PORT: 7410, CAIRN_GATEWAY_SSE_HEARTBEAT_MS: 15_000, CAIRN_GATEWAY_SSE_POLL_MS: 200 });
    expect(config.CAIRN_API_KEY).toBeUndefined();
  });

  it('takes port 0 (tests) and a well-formed bootstrap key', () => {
    const { key } = generateApiKey();
    expect(loadConfig(GatewayConfigSchema, { CAIRN_GATEWAY_PORT: '0', CAIRN_API_KEY: key })).toMatchObject({ CAIRN_GATEWAY_PORT: 0, CAIRN_API_KEY: key });
  });

  it('fails at boot naming a malformed key, without echoing it', () => {
    const secret = `cairn_${'x'.repeat(43)}`;
    try {
      loadConfig(GatewayConfigSchema, { CAIRN_API_KEY: secret });
      expect.fail('expected a config error');
    } catch (error) {
      expect(isCairnError(error) && error.code).toBe('E_INPUT');
      expect(String((error as Error).message)).toContain('CAIRN_API_KEY');
      expect(String((error as Error).message)).not.toContain(secret);
    }
    expect(() => loadConfig(GatewayConfigSchema, { CAIRN_GATEWAY_PORT: '70000' })).toThrow(/CAIRN_GATEWAY_PORT/);
  });

  it('takes a rate limit per key, generous by default, and refuses one that lets nothing through', () => {
    expect(loadConfig(GatewayConfigSchema, {})).toMatchObject({ CAIRN_GATEWAY_RATE_LIMIT_PER_SECOND: 100, CAIRN_GATEWAY_RATE_LIMIT_BURST: 500 });
    expect(loadConfig(GatewayConfigSchema, { CAIRN_GATEWAY_RATE_LIMIT_PER_SECOND: '0.5', CAIRN_GATEWAY_RATE_LIMIT_BURST: '3' })).toMatchObject({
      CAIRN_GATEWAY_RATE_LIMIT_PER_SECOND: 0.5,
      CAIRN_GATEWAY_RATE_LIMIT_BURST: 3,
    });
    expect(() => loadConfig(GatewayConfigSchema, { CAIRN_GATEWAY_RATE_LIMIT_PER_SECOND: '0' })).toThrow(/CAIRN_GATEWAY_RATE_LIMIT_PER_SECOND/);
    expect(() => loadConfig(GatewayConfigSchema, { CAIRN_GATEWAY_RATE_LIMIT_BURST: '0.5' })).toThrow(/CAIRN_GATEWAY_RATE_LIMIT_BURST/);
  });

  it('reads outputs from the runtime\'s artifact object store (its default bucket), served up to a bound', () => {
    expect(loadConfig(GatewayConfigSchema, {})).toMatchObject({ CAIRN_ARTIFACT_BUCKET: 'cairn_artifacts', CAIRN_GATEWAY_ARTIFACT_MAX_BYTES: 256 * 1024 * 1024 });
    expect(loadConfig(GatewayConfigSchema, { CAIRN_ARTIFACT_BUCKET: 'art_a', CAIRN_GATEWAY_ARTIFACT_MAX_BYTES: '1024' })).toMatchObject({ CAIRN_ARTIFACT_BUCKET: 'art_a', CAIRN_GATEWAY_ARTIFACT_MAX_BYTES: 1024 });
    // The outputs come over NATS: the gateway has no artifact directory to be given.
    expect(Object.keys(GatewayConfigSchema.shape)).not.toContain('CAIRN_ARTIFACT_DIR');
    expect(() => loadConfig(GatewayConfigSchema, { CAIRN_GATEWAY_ARTIFACT_MAX_BYTES: '0' })).toThrow(/CAIRN_GATEWAY_ARTIFACT_MAX_BYTES/);
  });
});

describe('GatewayConfigSchema, the bootstrap key from a file', () => {
  it('given CAIRN_API_KEY_FILE alone, when loaded, then it is taken; given it beside CAIRN_API_KEY, then refused naming both', () => {
    const { key } = generateApiKey();
    expect(loadConfig(GatewayConfigSchema, { CAIRN_API_KEY_FILE: '/run/cairn/gateway/api-key' }).CAIRN_API_KEY_FILE).toBe('/run/cairn/gateway/api-key');
    expect(() => loadConfig(GatewayConfigSchema, { CAIRN_API_KEY_FILE: '/run/cairn/gateway/api-key', CAIRN_API_KEY: key })).toThrow(/CAIRN_API_KEY_FILE.*not both/);
  });
});
