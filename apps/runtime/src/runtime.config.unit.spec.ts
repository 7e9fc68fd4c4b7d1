import { isCairnError } from '@cairn/contracts';
import { loadConfig } from '@cairn/config';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { idsOf, runtimeConfigSchema } from './runtime.config.js';

const host = {
  hostname: 'Box-7',
  memoryMiB: 8192,
  cpus: 6,
  cwd: '/srv/cairn',
  users: new Map([
    [0, 'root'],
    [1000, 'alice'],
    [65534, 'nobody'],
  ]),
  groups: new Map([
    [0, 'root'],
    [1000, 'alice'],
    [65521, 'backup'],
  ]),
};

function inputError(env: Record<string, string>): string {
  try {
    loadConfig(runtimeConfigSchema(host), env);
  } catch (error) {
    if (isCairnError(error) && error.code === 'E_INPUT') return error.message;
    throw error;
  }
  throw new Error(`no E_INPUT for ${JSON.stringify(env)}`);
}

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
      CAIRN_SANDBOX_USER: { uid: 65520, gid: 65520 },
      CAIRN_SANDBOX_REQUIRE_USERNS: false,
    });
  });

  it('runs sandboxes as a uid:gid of its own, and refuses root and the ids of any account or group of the host', () => {
    expect(loadConfig(runtimeConfigSchema(host), { CAIRN_SANDBOX_USER: '70000:70001' }).CAIRN_SANDBOX_USER).toEqual({ uid: 70000, gid: 70001 });
    expect(inputError({ CAIRN_SANDBOX_USER: '0:0' })).toMatch(/CAIRN_SANDBOX_USER: the sandbox uid must be an integer from 1 to 4294967294, not 0/);
    expect(inputError({ CAIRN_SANDBOX_USER: '65520:0' })).toMatch(/CAIRN_SANDBOX_USER: the sandbox gid must be an integer from 1/);
    expect(inputError({ CAIRN_SANDBOX_USER: '1000:65520' })).toMatch(/CAIRN_SANDBOX_USER: uid 1000 is the host's user alice \(\/etc\/passwd\)/);
    expect(inputError({ CAIRN_SANDBOX_USER: '65534:65520' })).toMatch(/uid 65534 is the host's user nobody/);
    expect(inputError({ CAIRN_SANDBOX_USER: '65520:65521' })).toMatch(/CAIRN_SANDBOX_USER: gid 65521 is the host's group backup \(\/etc\/group\)/);
    expect(inputError({ CAIRN_SANDBOX_USER: '65535:65520' })).toMatch(/may not be 65535/);
    expect(inputError({ CAIRN_SANDBOX_USER: '4294967295:65520' })).toMatch(/from 1 to 4294967294/);
    for (const bad of ['sandbox', '65520', '65520:', '-1:-1', '65520:65520:1']) expect(inputError({ CAIRN_SANDBOX_USER: bad })).toMatch(/CAIRN_SANDBOX_USER: uid:gid, two numbers/);
  });

  it('requires user-namespace remapping only when told to', () => {
    expect(loadConfig(runtimeConfigSchema(host), { CAIRN_SANDBOX_REQUIRE_USERNS: '1' }).CAIRN_SANDBOX_REQUIRE_USERNS).toBe(true);
    expect(loadConfig(runtimeConfigSchema(host), { CAIRN_SANDBOX_REQUIRE_USERNS: 'false' }).CAIRN_SANDBOX_REQUIRE_USERNS).toBe(false);
    expect(inputError({ CAIRN_SANDBOX_REQUIRE_USERNS: 'yes' })).toMatch(/CAIRN_SANDBOX_REQUIRE_USERNS/);
  });

  it("reads the host's ids from passwd- and group-format files", async () => {
    const dir = await mkdtemp(join(tmpdir(), 'cairn-ids-'));
    try {
      await writeFile(join(dir, 'passwd'), 'root:x:0:0:root:/root:/bin/bash\n# a comment:x:5:5\nalice:x:1000:1000::/home/alice:/bin/sh\nbroken\n\n');
      expect([...idsOf(join(dir, 'passwd'))]).toEqual([
        [0, 'root'],
        [1000, 'alice'],
      ]);
      expect(idsOf(join(dir, 'absent')).size).toBe(0);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
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
