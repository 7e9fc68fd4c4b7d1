import { isCairnError } from '@cairn/contracts';
import { loadConfig } from '@cairn/config';
import { describe, expect, it } from 'vitest';
import { runtimeConfigSchema } from './runtime.config.js';

const host = { hostname: 'Box-7', memoryMiB: 8192, cpus: 6, cwd: '/srv/cairn' };

describe('the runtime configuration', () => {
  it('derives its defaults from the host', () => {
    const config = loadConfig(runtimeConfigSchema(host), {});
    expect(config).toMatchObject({
      CAIRN_WORKER_ID: 'box-7',
      CAIRN_WORKER_SLOTS: 4,
      CAIRN_WORKER_MEMORY_MIB: 8192,
      CAIRN_WORKER_CPUS: 6,
      CAIRN_WORKER_DISK_MIB: 8192,
      CAIRN_ARTIFACT_DIR: '/srv/cairn/.cairn/artifacts',
      CAIRN_DOCKER_SOCKET: '/var/run/docker.sock',
      CAIRN_WORKERS_BUCKET: 'cairn_workers',
      CAIRN_LEASES_BUCKET: 'cairn_leases',
      CAIRN_STEP_OUTPUT_MAX_BYTES: 1024 * 1024,
    });
  });

  it('reads the environment, resolving a relative artifact directory against the working directory', () => {
    const config = loadConfig(runtimeConfigSchema(host), { CAIRN_WORKER_ID: 'w-2', CAIRN_WORKER_SLOTS: '2', CAIRN_ARTIFACT_DIR: 'data/art' });
    expect(config).toMatchObject({ CAIRN_WORKER_ID: 'w-2', CAIRN_WORKER_SLOTS: 2, CAIRN_ARTIFACT_DIR: '/srv/cairn/data/art' });
  });

  it('keeps 2 warm sandboxes per profile and 8 in all by default; 0 turns the pool off', () => {
    expect(loadConfig(runtimeConfigSchema(host), {})).toMatchObject({ CAIRN_WARM_POOL_SIZE: 2, CAIRN_WARM_POOL_TOTAL: 8 });
    expect(loadConfig(runtimeConfigSchema(host), { CAIRN_WARM_POOL_SIZE: '0' })).toMatchObject({ CAIRN_WARM_POOL_SIZE: 0 });
  });

  it('fails at boot naming the variable that is wrong', () => {
    for (const [name, value] of [
      ['CAIRN_WORKER_ID', 'Not A Token'],
      ['CAIRN_WORKER_SLOTS', '0'],
      ['CAIRN_SANDBOX_PROBES', 'guess'],
      ['CAIRN_LEASE_RENEW_MS', '20000'],
      ['CAIRN_WARM_POOL_SIZE', '-1'],
    ] as const) {
      let caught: unknown;
      try {
        loadConfig(runtimeConfigSchema(host), { [name]: value });
      } catch (error) {
        caught = error;
      }
      expect(isCairnError(caught) && caught.code).toBe('E_INPUT');
      expect((caught as Error).message).toContain(name);
    }
  });
});
