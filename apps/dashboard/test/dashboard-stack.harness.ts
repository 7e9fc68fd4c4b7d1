import { execFile, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { accessSync, constants } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { isolatedNames } from '@cairn/config';
import { isolatedStackStreams } from '@cairn/operational';
import { defaultAgentSocketRoot } from '@cairn/sandbox-docker';
import { createTestDatabase, provisionKey, testNatsUrl, uniqueName } from '@cairn/testing';
import type { ProvisionKeyOptions, TestDatabase } from '@cairn/testing';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import pg from 'pg';

/*
 * One isolated Cairn stack for the browser suite, started and stopped with the built CLI as an
 * operator would (`cairn up` / `cairn down`): its own state dir, stack id, database and gateway
 * port, on the real NATS, PostgreSQL and Docker engine. `dispose()` removes all it made.
 * (The same steps as apps/cli/test/stack.harness.ts, which another app's tests cannot import.)
 */

const exec = promisify(execFile);
/** The built CLI (apps/cli/bin/cairn.js), run on this Node. */
const CAIRN_BIN = fileURLToPath(new URL('../../cli/bin/cairn.js', import.meta.url));

export interface Key {
  id: string;
  key: string;
  tenant: string;
}

function runCairn(args: readonly string[], env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CAIRN_BIN, ...args], { env: { PATH: process.env.PATH ?? '', NO_COLOR: '1', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (chunk: Buffer) => out.push(chunk));
    child.stderr.on('data', (chunk: Buffer) => err.push(chunk));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8') }));
  });
}

export class DashboardStack {
  url = '';
  admin: Key = { id: '', key: '', tenant: 'default' };

  private constructor(
    readonly home: string,
    readonly stackId: string,
    readonly database: TestDatabase,
    readonly env: Record<string, string>,
  ) {}

  static async create(prefix: string, tuning: Record<string, string>): Promise<DashboardStack> {
    const home = await mkdtemp(join(tmpdir(), `cairn-${prefix}-`));
    const stackId = uniqueName(prefix).toLowerCase().replace(/_/g, '-');
    const database = await createTestDatabase(`cairn_${prefix.replace(/-/g, '_')}`);
    const env = { CAIRN_HOME: home, CAIRN_STACK_ID: stackId, CAIRN_NATS_URL: testNatsUrl(), CAIRN_DATABASE_URL: database.url, CAIRN_GATEWAY_PORT: '0', CAIRN_ARTIFACT_STORE_MAX_BYTES: String(256 * 1024 * 1024), ...tuning };
    return new DashboardStack(home, stackId, database, env);
  }

  get workerId(): string {
    return isolatedNames(this.stackId).CAIRN_WORKER_ID;
  }

  async up(): Promise<void> {
    const run = await runCairn(['up', '--no-setup', '--json', '--timeout', '90'], this.env);
    if (run.code !== 0) throw new Error(`cairn up failed (${run.code}):\n${run.stdout}\n${run.stderr}`);
    const result = JSON.parse(run.stdout) as { url: string; apiKey: string };
    this.url = result.url;
    const [row] = await this.sql<{ id: string }>('SELECT id FROM api_keys WHERE tenant = $1 ORDER BY created_at LIMIT 1', ['default']);
    this.admin = { id: row?.id ?? '', key: result.apiKey, tenant: 'default' };
  }

  async sql<T>(text: string, values: unknown[] = []): Promise<T[]> {
    const client = new pg.Client({ connectionString: this.database.url });
    await client.connect();
    try {
      return (await client.query(text, values)).rows as T[];
    } finally {
      await client.end();
    }
  }

  /** A key minted through the stack's REST API with its operator key (recorded on adm_<tenant>). */
  async mintKey(tenant: string, scopes: ProvisionKeyOptions['scopes']): Promise<Key> {
    return provisionKey(this.url, this.admin.key, { tenant, scopes });
  }

  api(key: Key, path: string, init: RequestInit = {}): Promise<Response> {
    return fetch(`${this.url}${path}`, { ...init, headers: { authorization: `Bearer ${key.key}`, 'content-type': 'application/json', ...(init.headers as Record<string, string> | undefined) } });
  }

  async submit(key: Key, spec: Record<string, unknown>): Promise<string> {
    const response = await this.api(key, '/v1/runs', { method: 'POST', body: JSON.stringify(spec), headers: { 'idempotency-key': randomUUID() } });
    const body = (await response.json()) as { runId?: string };
    if (response.status !== 202 || body.runId === undefined) throw new Error(`submit answered ${response.status}: ${JSON.stringify(body)}`);
    return body.runId;
  }

  async waitForRun(key: Key, runId: string, done: (run: { state: string; sealed: boolean }) => boolean, timeoutMs = 60_000): Promise<{ state: string; sealed: boolean }> {
    const deadline = Date.now() + timeoutMs;
    let last: unknown = null;
    while (Date.now() < deadline) {
      const response = await this.api(key, `/v1/runs/${runId}`);
      if (response.status === 200) {
        const run = (await response.json()) as { state: string; sealed: boolean };
        last = run;
        if (done(run)) return run;
      }
      await new Promise((resolve) => setTimeout(resolve, 150));
    }
    throw new Error(`run ${runId} did not get there in ${timeoutMs} ms; last seen ${JSON.stringify(last)}`);
  }

  async receipts(key: Key, runId: string): Promise<(Record<string, unknown> & { type: string; seq: number })[]> {
    const response = await this.api(key, `/v1/runs/${runId}/events?after=0&limit=1000`);
    return ((await response.json()) as { items: (Record<string, unknown> & { type: string; seq: number })[] }).items;
  }

  /** `cairn down`, then every container, stream, bucket, database and file the stack made goes. */
  async dispose(): Promise<void> {
    await runCairn(['down', '--timeout', '10'], this.env).catch(() => undefined);
    const left = await exec('docker', ['ps', '-aq', '--filter', `label=io.cairn.worker=${this.workerId}`]).catch(() => ({ stdout: '' }));
    const ids = left.stdout.split('\n').filter((id) => id !== '');
    if (ids.length > 0) await exec('docker', ['rm', '-f', ...ids]).catch(() => undefined);
    await rm(join(defaultAgentSocketRoot(), this.workerId), { recursive: true, force: true });
    const nc = await connect({ servers: testNatsUrl() });
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

/**
 * Debian's Chromium (`apt-get install chromium`; tools/ensure-services.sh installs it):
 * CAIRN_CHROMIUM if set, else the first of the usual names found on PATH or in /usr/lib/chromium.
 */
export function chromiumPath(): string {
  const explicit = process.env.CAIRN_CHROMIUM;
  const candidates = explicit !== undefined && explicit !== '' ? [explicit] : [];
  for (const dir of (process.env.PATH ?? '').split(delimiter).filter((d) => d !== '')) {
    for (const name of ['chromium', 'chromium-browser', 'google-chrome-stable', 'google-chrome']) candidates.push(join(dir, name));
  }
  candidates.push('/usr/bin/chromium', '/usr/lib/chromium/chromium', '/usr/bin/chromium-browser');
  for (const path of candidates) {
    try {
      accessSync(path, constants.X_OK);
      return path;
    } catch {
      // not this one
    }
  }
  throw new Error('no Chromium found: install Debian\'s (apt-get install -y chromium, as tools/ensure-services.sh does) or set CAIRN_CHROMIUM');
}
