import { homedir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { STACK_SERVICES, stackLocation, stackServiceConfig } from './stack-config.js';
import { serviceEnv } from './stack-up.js';

describe('the stack configuration', () => {
  it('lives in ~/.cairn unless CAIRN_HOME says otherwise, as the default stack unless CAIRN_STACK_ID names one', () => {
    expect(stackLocation({})).toEqual({ home: join(homedir(), '.cairn'), stackId: 'default' });
    expect(stackLocation({ CAIRN_HOME: '/tmp/x/', CAIRN_STACK_ID: 'e2e_1' })).toEqual({ home: '/tmp/x', stackId: 'e2e_1' });
  });

  it('refuses a stack id that could not name streams and subjects', () => {
    for (const id of ['E2E', 'a.b', '-x', 'a b', 'x'.repeat(41)]) {
      expect(() => stackLocation({ CAIRN_STACK_ID: id }), id).toThrow(expect.objectContaining({ code: 'E_INPUT' }) as Error);
    }
  });

  it('passes the caller’s settings through, fills the isolated names, and never carries the API key', () => {
    const env = {
      CAIRN_STACK_ID: 's1',
      CAIRN_LEASE_TTL_MS: '4000',
      CAIRN_EVIDENCE_STREAM: 'MINE',
      CAIRN_NATS_URL: 'nats://10.0.0.1:4222,nats://10.0.0.2:4222,nats://10.0.0.3:4222',
      CAIRN_NATS_REPLICAS: '3',
      CAIRN_API_KEY: 'cairn_abcdefgh_secret',
      CAIRN_URL: 'http://elsewhere',
      PATH: '/bin',
    };
    const config = stackServiceConfig(env, { home: '/srv/cairn', stackId: 's1' }, 7777);
    expect(config).toMatchObject({
      CAIRN_STACK_ID: 's1',
      CAIRN_LEASE_TTL_MS: '4000',
      CAIRN_EVIDENCE_STREAM: 'MINE',
      // A cluster: every service gets all its servers and the one replicas setting.
      CAIRN_NATS_URL: 'nats://10.0.0.1:4222,nats://10.0.0.2:4222,nats://10.0.0.3:4222',
      CAIRN_NATS_REPLICAS: '3',
      CAIRN_COMMAND_STREAM: 'CAIRN_COMMANDS_S1',
      CAIRN_HOME: '/srv/cairn',
      CAIRN_ARTIFACT_DIR: '/srv/cairn/artifacts',
      CAIRN_WORKER_STATE_DIR: '/srv/cairn/worker-s1',
      CAIRN_GATEWAY_PORT: '7777',
    });
    expect(config).not.toHaveProperty('CAIRN_API_KEY');
    expect(config).not.toHaveProperty('CAIRN_URL');
    expect(config).not.toHaveProperty('PATH');
  });

  it('keeps the services’ default names for the default stack', () => {
    const config = stackServiceConfig({}, { home: '/h', stackId: 'default' }, 7410);
    expect(Object.keys(config).sort()).toEqual([
      'CAIRN_ARTIFACT_DIR',
      'CAIRN_GATEWAY_PORT',
      'CAIRN_HOME',
      'CAIRN_SEAL_KEY_FILE',
      'CAIRN_SEAL_PUBLIC_KEYS_FILE',
      'CAIRN_SECRETS_KEY_FILE',
      'CAIRN_SECRETS_PRIVATE_KEY_FILE',
      'CAIRN_SECRETS_PUBLIC_KEY_FILE',
      'CAIRN_WORKER_STATE_DIR',
    ]);
    expect(config.CAIRN_WORKER_STATE_DIR).toBe('/h/worker');
    // The key file's path (never its content) under the state directory, unless one is given.
    expect(config.CAIRN_SECRETS_KEY_FILE).toBe('/h/secrets.key');
    expect(stackServiceConfig({ CAIRN_SECRETS_KEY_FILE: '/etc/cairn/k' }, { home: '/h', stackId: 'default' }, 7410).CAIRN_SECRETS_KEY_FILE).toBe('/etc/cairn/k');
    // The secrets keypair's paths (ADR 0028).
    expect([config.CAIRN_SECRETS_PRIVATE_KEY_FILE, config.CAIRN_SECRETS_PUBLIC_KEY_FILE]).toEqual(['/h/secrets-box.key', '/h/secrets-box.pub']);
  });

  it('gives the secrets private key file to the services that open values only: never the gateway (ADR 0028)', () => {
    const config = stackServiceConfig({}, { home: '/h', stackId: 'default' }, 7410);
    for (const service of ['runtime', 'kernel', 'verifier', 'grader']) expect(serviceEnv({}, config, {}, service).CAIRN_SECRETS_PRIVATE_KEY_FILE).toBe('/h/secrets-box.key');
    for (const service of ['gateway', 'policy', 'intake', 'scheduler', 'projector', 'webhooks', 'mcp-gateway']) {
      const env = serviceEnv({ CAIRN_SECRETS_PRIVATE_KEY_FILE: '/from/the/caller' }, config, {}, service);
      expect(env.CAIRN_SECRETS_PRIVATE_KEY_FILE).toBeUndefined();
    }
    expect(serviceEnv({}, config, {}, 'gateway').CAIRN_SECRETS_PUBLIC_KEY_FILE).toBe('/h/secrets-box.pub');
  });

  it('starts the gateway last, once everything it reports on is running', () => {
    expect(STACK_SERVICES.at(-1)).toBe('gateway');
    expect(new Set(STACK_SERVICES).size).toBe(11);
    expect(STACK_SERVICES).toContain('mcp-gateway');
    expect(STACK_SERVICES).toContain('webhooks');
  });
});
