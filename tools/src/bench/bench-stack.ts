import { spawn } from 'node:child_process';
import { realpathSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isolatedNames } from '@cairn/config';
import { isolatedStackStreams } from '@cairn/operational';
import { createDockerClient, defaultAgentSocketRoot } from '@cairn/sandbox-docker';
import { createTestDatabase, testNatsUrl, uniqueName } from '@cairn/testing';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';

/*
 * What the benchmarks share: an isolated Cairn stack of their own (`cairn up` with its own home,
 * stack id, streams, buckets and database), a worker id for their raw baseline containers, and a
 * teardown that leaves nothing behind — containers, streams, buckets, database, home.
 */

const CLI = fileURLToPath(new URL('../../../apps/cli/bin/cairn.js', import.meta.url));

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

export function runCli(args: readonly string[], env: Record<string, string>): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], { env: { ...process.env, NO_COLOR: '1', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stdout, stderr }));
  });
}

export interface BenchStack {
  url: string;
  apiKey: string;
  home: string;
  stackId: string;
  /** The stack's runtime worker id (`local-<stack id>`). */
  workerId: string;
  /** A worker id of the bench's own raw containers, so teardown finds them too. */
  rawWorkerId: string;
  /** The CAIRN_* variables the stack was started with (home, stack id, NATS, database, …): what its CLI needs. */
  env: Record<string, string>;
  /** The stack's database (for counting its PostgreSQL backends). */
  databaseUrl: string;
  /** The NATS server the stack uses. */
  natsUrl: string;
  /** Stops the stack and removes everything it and the raw baseline made. */
  close(): Promise<void>;
}

/**
 * Starts an isolated stack (`cairn up --no-setup`) with `settings` (CAIRN_* variables) on top of the
 * bench defaults, on `natsUrl` (the machine's server unless given).
 */
export async function startBenchStack(name: string, settings: Record<string, string> = {}, natsUrl = testNatsUrl()): Promise<BenchStack> {
  const home = await mkdtemp(join(tmpdir(), `cairn-${name}-`));
  const stackId = uniqueName(name).toLowerCase().replace(/_/g, '-');
  const database = await createTestDatabase(`cairn_${name.replace(/-/g, '_')}`);
  const env = {
    CAIRN_HOME: home,
    CAIRN_STACK_ID: stackId,
    CAIRN_NATS_URL: natsUrl,
    CAIRN_DATABASE_URL: database.url,
    CAIRN_GATEWAY_PORT: '0',
    CAIRN_WORKER_SLOTS: '4',
    ...settings,
  };
  const workerId = isolatedNames(stackId).CAIRN_WORKER_ID;
  const rawWorkerId = `bench-raw-${stackId}`.slice(0, 64);
  const close = async (): Promise<void> => {
    await runCli(['down'], env).catch(() => undefined);
    const docker = createDockerClient();
    for (const worker of [rawWorkerId, workerId]) {
      const left = await docker.listContainers({ all: true, filters: { label: [`io.cairn.worker=${worker}`] } }).catch(() => []);
      for (const c of left) await docker.getContainer(c.Id).remove({ force: true }).catch(() => undefined);
      await rm(join(defaultAgentSocketRoot(), worker), { recursive: true, force: true });
    }
    const nc = await connect({ servers: natsUrl });
    try {
      const jsm = await jetstreamManager(nc);
      const streams = isolatedStackStreams(stackId);
      for (const stream of streams) await jsm.streams.delete(stream).catch(() => false);
    } finally {
      await nc.close();
    }
    await database.drop().catch(() => undefined);
    await rm(home, { recursive: true, force: true });
  };
  try {
    const up = await runCli(['up', '--no-setup', '--json'], env);
    if (up.code !== 0) throw new Error(`cairn up failed: ${up.stdout}${up.stderr}`);
    const { url, apiKey } = JSON.parse(up.stdout) as { url: string; apiKey: string };
    return { url, apiKey, home, stackId, workerId, rawWorkerId, env, databaseUrl: database.url, natsUrl, close };
  } catch (error) {
    await close();
    throw error;
  }
}

/** Whether the module at `moduleUrl` is the program node was started with. */
export function isEntryModule(moduleUrl: string): boolean {
  const entry = process.argv[1];
  if (entry === undefined) return false;
  try {
    return realpathSync(entry) === realpathSync(fileURLToPath(moduleUrl));
  } catch {
    return false;
  }
}

/** A positive integer from the environment (a bench's count override), or undefined. */
export function countFromEnv(name: string): number | undefined {
  const value = Number(process.env[name]);
  return Number.isInteger(value) && value > 0 ? value : undefined;
}

/** Each service's pid, by name, from the stack file `cairn up` wrote in `home`. */
export async function servicePids(home: string): Promise<Record<string, number>> {
  const stack = JSON.parse(await readFile(join(home, 'stack.json'), 'utf8')) as { services: Record<string, { pid: number }> };
  return Object.fromEntries(Object.entries(stack.services).map(([name, { pid }]) => [name, pid]));
}
