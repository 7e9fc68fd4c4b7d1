import { isCairnError } from '@cairn/contracts';
import { loadConfig } from '@cairn/config';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { idsOf, runtimeConfigSchema, workerSlots, workerStateDir } from './runtime.config.js';

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
    // No id from the host name: the worker's own state directory keeps one (worker-identity.ts).
    expect(config.CAIRN_WORKER_ID).toBeUndefined();
    expect(workerStateDir(config, '/srv/cairn')).toBe('/srv/cairn/.cairn/worker');
    expect(config).toMatchObject({
      CAIRN_WORKER_MEMORY_MIB: 7372,
      CAIRN_WORKER_CPUS: 6,
      CAIRN_WORKER_CPU_OVERSUBSCRIPTION: 64,
      CAIRN_WORKER_RUN_CPU_OVERSUBSCRIPTION: 1,
      CAIRN_WORKER_DISK_MIB: 8192,
      CAIRN_WORKER_PIDS: 16_384,
      CAIRN_ARTIFACT_DIR: '/srv/cairn/.cairn/artifacts',
      CAIRN_ARTIFACT_BUCKET: 'cairn_artifacts',
      CAIRN_ARTIFACT_STORE_MAX_BYTES: 4 * 1024 * 1024 * 1024,
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

  it('takes the exec agent\'s binary and socket root as absolute host paths (a runtime in a container), and nothing by default', () => {
    const config = loadConfig(runtimeConfigSchema(host), { CAIRN_AGENT_BINARY: '/run/cairn-compose-agent/cairn-agent', CAIRN_AGENT_SOCKET_ROOT: '/run/cairn-compose-agent/sockets' });
    expect(config).toMatchObject({ CAIRN_AGENT_BINARY: '/run/cairn-compose-agent/cairn-agent', CAIRN_AGENT_SOCKET_ROOT: '/run/cairn-compose-agent/sockets' });
    expect(loadConfig(runtimeConfigSchema(host), {}).CAIRN_AGENT_BINARY).toBeUndefined();
    expect(inputError({ CAIRN_AGENT_BINARY: 'cairn-agent' })).toMatch(/CAIRN_AGENT_BINARY: an absolute path/);
    expect(inputError({ CAIRN_AGENT_SOCKET_ROOT: 'sockets' })).toMatch(/CAIRN_AGENT_SOCKET_ROOT/);
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

  it('sizes capacity from what is scarce: memory (90 % of the host), slots from memory, processes from the kernel, CPU as a share', () => {
    const config = loadConfig(runtimeConfigSchema(host), {});
    expect(config.CAIRN_WORKER_SLOTS).toBeUndefined();
    expect(workerSlots(config)).toBe(Math.floor(7372 / 128));
    // The 2-core, 24 GiB host of issue 14: a hundred sessions of 128 MiB memory + 64 MiB disk fit, and 169 slots.
    const big = loadConfig(runtimeConfigSchema({ ...host, memoryMiB: 24_105, cpus: 2, pidsMax: 32_768 }), {});
    expect(big).toMatchObject({ CAIRN_WORKER_MEMORY_MIB: 21_694, CAIRN_WORKER_PIDS: 16_384 });
    expect(workerSlots(big)).toBe(169);
    expect(Math.floor(big.CAIRN_WORKER_MEMORY_MIB / 192)).toBeGreaterThanOrEqual(100);
    expect(big.CAIRN_WORKER_CPUS * big.CAIRN_WORKER_CPU_OVERSUBSCRIPTION).toBeGreaterThanOrEqual(100);
    expect(workerSlots({ CAIRN_WORKER_SLOTS: undefined, CAIRN_WORKER_MEMORY_MIB: 1 << 20 })).toBe(1024);
    expect(workerSlots({ CAIRN_WORKER_SLOTS: undefined, CAIRN_WORKER_MEMORY_MIB: 64 })).toBe(1);
    expect(workerSlots(loadConfig(runtimeConfigSchema(host), { CAIRN_WORKER_SLOTS: '3' }))).toBe(3);
  });

  it('refuses at boot a capacity the host cannot give: more memory than it has, more processes than the kernel allows, runs over the whole CPU share', () => {
    expect(inputError({ CAIRN_WORKER_MEMORY_MIB: '9000' })).toMatch(/CAIRN_WORKER_MEMORY_MIB: at most the host's memory \(8192 MiB\)/);
    expect(inputError({ CAIRN_WORKER_PIDS: '40000' })).toMatch(/CAIRN_WORKER_PIDS: at most the processes the kernel allows \(32768/);
    expect(inputError({ CAIRN_WORKER_CPU_OVERSUBSCRIPTION: '0.5' })).toMatch(/CAIRN_WORKER_CPU_OVERSUBSCRIPTION/);
    expect(inputError({ CAIRN_WORKER_CPU_OVERSUBSCRIPTION: '4', CAIRN_WORKER_RUN_CPU_OVERSUBSCRIPTION: '8' })).toMatch(/CAIRN_WORKER_RUN_CPU_OVERSUBSCRIPTION: runs share the CPU with sessions/);
    expect(inputError({ CAIRN_WORKER_SLOTS: '1025' })).toMatch(/CAIRN_WORKER_SLOTS/);
    expect(inputError({ CAIRN_ARTIFACT_BUCKET: 'OBJ.x' })).toMatch(/CAIRN_ARTIFACT_BUCKET: an object store bucket name/);
    expect(inputError({ CAIRN_ARTIFACT_STORE_MAX_BYTES: '1000' })).toMatch(/CAIRN_ARTIFACT_STORE_MAX_BYTES/);
  });

  it('reads the environment, resolving a relative artifact directory against the working directory', () => {
    const config = loadConfig(runtimeConfigSchema(host), { CAIRN_WORKER_ID: 'w-2', CAIRN_WORKER_SLOTS: '2', CAIRN_ARTIFACT_DIR: 'data/art' });
    expect(config).toMatchObject({ CAIRN_WORKER_ID: 'w-2', CAIRN_WORKER_SLOTS: 2, CAIRN_ARTIFACT_DIR: '/srv/cairn/data/art' });
    // A given id has a state directory of its own by default; one set is resolved like the artifacts'.
    expect(workerStateDir(config, '/srv/cairn')).toBe('/srv/cairn/.cairn/workers/w-2');
    expect(workerStateDir(loadConfig(runtimeConfigSchema(host), { CAIRN_WORKER_STATE_DIR: 'state/w' }), '/elsewhere')).toBe('/srv/cairn/state/w');
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
