import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isolatedNames } from '@cairn/config';
import type { ApiKeyScope } from '@cairn/contracts';
import { natsAuthenticatorFromFile } from '@cairn/evidence-log';
import { isolatedStackStreams } from '@cairn/operational';
import { createTestDatabase, provisionKey, testNatsUrl, uniqueName } from '@cairn/testing';
import type { TestDatabase } from '@cairn/testing';
import { jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { Objm } from '@nats-io/obj';
import type { ObjectStore } from '@nats-io/obj';
import { connect } from '@nats-io/transport-node';
import { expect } from 'vitest';
import { STACK_SERVICES } from '../src/stack/stack-config.js';
import { runCairn } from './cli.harness.js';
import type { CliRun } from './cli.harness.js';

/** What `cairn run --json` prints: exactly these keys. */
export interface RunOutcome {
  runId: string;
  state: string;
  verdict: string | null;
  score: number | null;
  maxScore: number | null;
  errorCode: string | null;
}

export interface RunView extends RunOutcome {
  sealed: boolean;
  eventCount: number;
  headHash: string;
  name: string | null;
  /** The trace the run was submitted in; absent when it was submitted untraced. */
  traceId?: string;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Running (not gone, and not a zombie waiting for its parent to reap it). */
export function isRunning(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !/^\S+ \(.*\) [ZX]/s.test(stat);
  } catch {
    return false;
  }
}

/**
 * One isolated Cairn stack for a test file, started and stopped through the CLI as a user would:
 * its own state dir, stack id (streams, subjects, buckets, worker id), database and gateway port.
 * `dispose()` stops it and removes everything it made: streams, buckets, database, containers.
 */
export class TestStack {
  url = '';
  apiKey = '';
  private constructor(
    readonly home: string,
    readonly stackId: string,
    readonly database: TestDatabase,
    readonly env: Record<string, string>,
  ) {}

  /** The names `cairn up` derives from the stack id (stack-config.ts). */
  get names() {
    const names = isolatedNames(this.stackId);
    return {
      evidenceStream: names.CAIRN_EVIDENCE_STREAM,
      commandStream: names.CAIRN_COMMAND_STREAM,
      workersBucket: names.CAIRN_WORKERS_BUCKET,
      leasesBucket: names.CAIRN_LEASES_BUCKET,
      artifactBucket: names.CAIRN_ARTIFACT_BUCKET,
      secretsBucket: names.CAIRN_SECRETS_BUCKET,
      workerId: names.CAIRN_WORKER_ID,
    };
  }

  /** Changes a record of the stack's secret catalog through the raw KV API, as tampering would (ADR 0028). */
  async tamperSecret(key: string, edit: (record: Record<string, unknown>) => Record<string, unknown>): Promise<void> {
    const nc = await connect({ servers: (this.env.CAIRN_NATS_URL ?? testNatsUrl()).split(',') });
    try {
      const kv = await new Kvm(nc).open(this.names.secretsBucket);
      const entry = await kv.get(key);
      if (entry === null) throw new Error(`no secret record ${key}`);
      await kv.put(key, JSON.stringify(edit(entry.json<Record<string, unknown>>())));
    } finally {
      await nc.close();
    }
  }

  /** Every record of the stack's secret catalog, as text. */
  async secretRecords(): Promise<string> {
    const nc = await connect({ servers: (this.env.CAIRN_NATS_URL ?? testNatsUrl()).split(',') });
    try {
      const kv = await new Kvm(nc).open(this.names.secretsBucket);
      const lines: string[] = [];
      for await (const key of await kv.keys()) {
        const entry = await kv.get(key);
        if (entry?.operation === 'PUT') lines.push(`${key} ${entry.string()}`);
      }
      return lines.join('\n');
    } finally {
      await nc.close();
    }
  }

  /** Runs `fn` on the stack's artifact object store as the raw client sees it (no digest check of ours). */
  private async rawArtifacts<T>(fn: (store: ObjectStore) => Promise<T>): Promise<T> {
    const nc = await connect({ servers: (this.env.CAIRN_NATS_URL ?? testNatsUrl()).split(',') });
    try {
      return await fn(await new Objm(nc).open(this.names.artifactBucket));
    } finally {
      await nc.close();
    }
  }

  /** The bytes the artifact store keeps under a sha256, as stored (null: none). */
  async storedArtifact(sha256: string): Promise<Buffer | null> {
    const bytes = await this.rawArtifacts((store) => store.getBlob(sha256));
    return bytes === null ? null : Buffer.from(bytes);
  }

  /** Every object in the stack's artifact store: name → bytes. */
  async storedArtifacts(): Promise<Map<string, Buffer>> {
    return this.rawArtifacts(async (store) => {
      const out = new Map<string, Buffer>();
      for (const info of await store.list()) {
        const bytes = await store.getBlob(info.name);
        if (bytes !== null) out.set(info.name, Buffer.from(bytes));
      }
      return out;
    });
  }

  /** Replaces what the store keeps under a sha256 through the raw API, as tampering would. */
  async tamperArtifact(sha256: string, bytes: Uint8Array): Promise<void> {
    await this.rawArtifacts((store) => store.putBlob({ name: sha256 }, bytes));
  }

  /**
   * A stack not started yet; `tuning` adds CAIRN_* settings (short leases for crash tests, …);
   * `databaseServerUrl` makes its database on a PostgreSQL of the test's own (`startOwnPostgres`).
   */
  static async create(prefix: string, tuning: Record<string, string> = {}, options: { databaseServerUrl?: string } = {}): Promise<TestStack> {
    const home = await mkdtemp(join(tmpdir(), `cairn-${prefix}-`));
    const stackId = uniqueName(prefix).toLowerCase().replace(/_/g, '-');
    const database = await createTestDatabase(`cairn_${prefix.replace(/-/g, '_')}`, options.databaseServerUrl);
    const env = {
      CAIRN_HOME: home,
      CAIRN_STACK_ID: stackId,
      CAIRN_NATS_URL: testNatsUrl(),
      CAIRN_DATABASE_URL: database.url,
      CAIRN_GATEWAY_PORT: '0',
      // Small: every stack's artifact store reserves its max_bytes on the shared server.
      CAIRN_ARTIFACT_STORE_MAX_BYTES: String(256 * 1024 * 1024),
      ...tuning,
    };
    return new TestStack(home, stackId, database, env);
  }

  cairn(args: readonly string[], extraEnv: Record<string, string> = {}): Promise<CliRun> {
    return runCairn(args, { ...this.env, ...extraEnv });
  }

  /** `natsAuth`: `cairn up --nats-auth` (per-service NATS users; the server must include `natsAuthInclude`). */
  async up(options: { natsAuth?: boolean } = {}): Promise<{ url: string; apiKey: string; outcome: string; restarted: string[] }> {
    const run = await this.cairn(['up', '--no-setup', '--json', '--timeout', '90', ...(options.natsAuth === true ? ['--nats-auth'] : [])]);
    if (run.code !== 0) throw new Error(`cairn up failed (${run.code}):\n${run.stdout}\n${run.stderr}\n${await this.logs()}`);
    const result = JSON.parse(run.stdout) as { url: string; apiKey: string; outcome: string; restarted: string[] };
    this.url = result.url;
    this.apiKey = result.apiKey;
    return result;
  }

  /** The tail of every service log, for a failure message. */
  async logs(lines = 15): Promise<string> {
    const out: string[] = [];
    for (const service of STACK_SERVICES) {
      const text = await readFile(join(this.home, 'logs', `${service}.log`), 'utf8').catch(() => '');
      out.push(`--- ${service}\n${text.trimEnd().split('\n').slice(-lines).join('\n')}`);
    }
    return out.join('\n');
  }

  async stackFile(): Promise<{ services: Record<string, { pid: number }> }> {
    return JSON.parse(await readFile(join(this.home, 'stack.json'), 'utf8')) as { services: Record<string, { pid: number }> };
  }

  /** A key of `tenant` with `scopes`, minted through the stack's REST API with its operator key (recorded on adm_<tenant>). */
  async mintKey(tenant: string, scopes: ApiKeyScope[]): Promise<string> {
    return (await this.mintScopedKey(tenant, scopes)).key;
  }

  /** As `mintKey`, with the key's id too (what grants and `key:<id>` actors name). */
  async mintScopedKey(tenant: string, scopes: ApiKeyScope[]): Promise<{ id: string; key: string }> {
    const { id, key } = await provisionKey(this.url, this.apiKey, { tenant, scopes });
    return { id, key };
  }

  async api(path: string, init: RequestInit = {}): Promise<Response> {
    return fetch(`${this.url}${path}`, { ...init, headers: { authorization: `Bearer ${this.apiKey}`, ...(init.headers as Record<string, string> | undefined) } });
  }

  async getRun(runId: string): Promise<RunView> {
    const response = await this.api(`/v1/runs/${runId}`);
    expect(response.status).toBe(200);
    return (await response.json()) as RunView;
  }

  /** Polls the run until `done` holds (projection reads), or fails after `timeoutMs`. */
  async waitForRun(runId: string, done: (run: RunView) => boolean, timeoutMs = 60_000): Promise<RunView> {
    const deadline = Date.now() + timeoutMs;
    let last: RunView | null = null;
    while (Date.now() < deadline) {
      const response = await this.api(`/v1/runs/${runId}`);
      if (response.status === 200) {
        last = (await response.json()) as RunView;
        if (done(last)) return last;
      }
      await sleep(200);
    }
    throw new Error(`run ${runId} did not get there in ${timeoutMs} ms; last seen ${JSON.stringify(last)}\n${await this.logs()}`);
  }

  /** The receipt types of a run so far. */
  async types(runId: string): Promise<string[]> {
    const response = await this.api(`/v1/runs/${runId}/events?after=0&limit=1000`);
    if (response.status !== 200) return [];
    return ((await response.json()) as { items: { type: string }[] }).items.map((r) => r.type);
  }

  /** Writes a spec file in the state dir and returns its path. */
  async specFile(name: string, spec: unknown): Promise<string> {
    const path = join(this.home, `${name}.json`);
    await writeFile(path, JSON.stringify(spec, null, 2));
    return path;
  }

  /**
   * Containers of this stack's worker still on the engine: those of one chain (labelled with it, or
   * — a claimed warm sandbox keeps its pool labels — named after it), or all but the idle warm pool
   * (`cairn-pool-…`, which lives as long as the stack: `includeIdlePool` after `cairn down`, where
   * nothing may be left at all).
   */
  async containers(chainId?: string, options: { includeIdlePool?: boolean } = {}): Promise<string[]> {
    const { createDockerClient } = await import('@cairn/sandbox-docker');
    const list = await createDockerClient().listContainers({ all: true, filters: { label: [`io.cairn.worker=${this.names.workerId}`] } });
    const ofChain = (c: { Names: string[]; Labels: Record<string, string> }) =>
      c.Labels['io.cairn.chain'] === chainId || c.Names.some((name) => name.startsWith(`/cairn-${chainId}-`));
    const idleWarm = (c: { Names: string[] }) => c.Names.some((name) => name.startsWith('/cairn-pool-'));
    return list.filter((c) => (chainId === undefined ? options.includeIdlePool === true || !idleWarm(c) : ofChain(c))).map((c) => c.Names.join(','));
  }

  /**
   * Containers, networks and volumes of this stack's worker on the engine — of one chain, or all
   * but the idle warm pool (see `containers`) — for the hostile suites' "nothing outlives a run".
   */
  async leftovers(options: { chainId?: string } = {}): Promise<{ containers: string[]; networks: string[]; volumes: string[] }> {
    const { createDockerClient } = await import('@cairn/sandbox-docker');
    const docker = createDockerClient();
    const label = [`io.cairn.worker=${this.names.workerId}`, ...(options.chainId === undefined ? [] : [`io.cairn.chain=${options.chainId}`])];
    const [containers, networks, volumes] = await Promise.all([
      this.containers(options.chainId),
      docker.listNetworks({ filters: { label } }),
      docker.listVolumes({ filters: { label } }),
    ]);
    return { containers, networks: networks.map((n) => n.Name), volumes: (volumes.Volumes ?? []).map((v) => v.Name) };
  }

  /**
   * What every run must leave behind: no container, and a chain that exports from JetStream and
   * verifies offline, both as a chain file and as the gateway's proof bundle.
   */
  async expectCleanAndVerifiable(runId: string): Promise<void> {
    expect(await this.containers(runId)).toEqual([]);
    const chainFile = join(this.home, `${runId}.jsonl`);
    const exported = await this.cairn(['export', runId, '-o', chainFile, '--json']);
    expect(exported.stderr).toBe('');
    expect(exported.code).toBe(0);
    const verified = await this.cairn(['verify', chainFile, '--json']);
    expect(verified.code).toBe(0);
    const fromFile = JSON.parse(verified.stdout) as { chainId: string; headHash: string; count: number };
    expect(fromFile.chainId).toBe(runId);
    const bundle = await this.cairn(['verify', runId, '--json']);
    expect(bundle.code).toBe(0);
    expect(JSON.parse(bundle.stdout)).toMatchObject({ ok: true, chainId: runId, headHash: fromFile.headHash, count: fromFile.count });
  }

  /** `cairn down`, then every stream, bucket, database, container and file the stack made goes. */
  async dispose(): Promise<void> {
    await this.cairn(['down', '--timeout', '10']).catch(() => undefined);
    const { createDockerClient, defaultAgentSocketRoot } = await import('@cairn/sandbox-docker');
    const docker = createDockerClient();
    const left = await docker.listContainers({ all: true, filters: { label: [`io.cairn.worker=${this.names.workerId}`] } }).catch(() => []);
    for (const container of left) await docker.getContainer(container.Id).remove({ force: true }).catch(() => undefined);
    // The worker's agent sockets (a runtime killed mid-test leaves them).
    await rm(join(defaultAgentSocketRoot(), this.names.workerId), { recursive: true, force: true });
    // The stack's own servers: the machine's, or a cluster of the test's.
    const operator = join(this.home, 'nats', 'operator.nk');
    const authenticator = existsSync(operator) ? await natsAuthenticatorFromFile(operator) : undefined;
    const nc = await connect({ servers: (this.env.CAIRN_NATS_URL ?? testNatsUrl()).split(','), ...(authenticator === undefined ? {} : { authenticator }) });
    try {
      const jsm = await jetstreamManager(nc);
      for (const stream of isolatedStackStreams(this.stackId)) await jsm.streams.delete(stream).catch(() => false);
    } finally {
      await nc.close();
    }
    await this.database.drop().catch(() => undefined);
    await rm(this.home, { recursive: true, force: true });
  }
}
