import 'reflect-metadata';
import { EventPageSchema, ExecResultSchema, ExecStreamLineSchema, FileWrittenSchema, HealthSchema, ProofBundleSchema, SandboxListSchema, SandboxSchema } from '@cairn/contracts';
import type { ExecResult, ExecStreamLine, Receipt, Sandbox } from '@cairn/contracts';
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { loadConfig } from '@cairn/config';
import { readLines, verifyChain } from '@cairn/evidence';
import { EvidenceLog, evidenceLogOptionsFromConfig } from '@cairn/evidence-log';
import { bucketStreamName } from '@cairn/operational';
import { createDockerClient, ensureBusyboxImage } from '@cairn/sandbox-docker';
import { createDataSource, migrate, rebuildProjections } from '@cairn/persistence';
import { JsonLogger } from '@cairn/service-kit';
import { awkwardName, awkwardText, createTestDatabase, provisionKey, testNatsUrl, uniqueName } from '@cairn/testing';
import type { TestDatabase } from '@cairn/testing';
import { jetstreamManager } from '@nats-io/jetstream';
import type { JetStreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import type { DataSource } from 'typeorm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGatewayDataSource } from '../src/gateway-data-source.js';
import { GatewayConfigSchema } from '../src/gateway.config.js';
import type { GatewayConfig } from '../src/gateway.config.js';
import { startGateway } from '../src/start-gateway.js';
import type { RunningGateway } from '../src/start-gateway.js';
import { http, INTAKE_MAIN, openSse, PROJECTOR_MAIN, startServiceProcess, waitFor } from './gateway.harness.js';
import type { HttpAnswer, ServiceProcess } from './gateway.harness.js';

/*
 * Interactive sandbox sessions through REST on the real stack: intake, policy, the scheduler, a
 * runtime on this machine's Docker engine, the grader (which seals an ended session's chain) and
 * the projector run as the processes they are (from
 * dist: `npm run build` first), the gateway in-process, all on their own streams, buckets,
 * database and worker id. Every container the runtime starts carries the worker's label and is
 * removed at the end.
 */

const exec = promisify(execFile);
const POLICY_MAIN = fileURLToPath(new URL('../../policy/dist/main.js', import.meta.url));
const SCHEDULER_MAIN = fileURLToPath(new URL('../../scheduler/dist/main.js', import.meta.url));
const RUNTIME_MAIN = fileURLToPath(new URL('../../runtime/dist/main.js', import.meta.url));
/** The grader seals a sandbox's chain once it has ended. */
const GRADER_MAIN = fileURLToPath(new URL('../../grader/dist/main.js', import.meta.url));
const BUSYBOX = 'cairn/sandbox-busybox:1';
const SPEC = { image: BUSYBOX, caps: { memoryMiB: 64, pids: 64, diskMiB: 32, cpus: 0.5 }, ttlSeconds: 600 };
const LATENCY_SAMPLES = 50;
/** What the gateway logged at warn and above (shown when an answer goes wrong). */
const gatewayLog: string[] = [];

let db: TestDatabase;
let config: GatewayConfig;
let gateway: RunningGateway;
let base: string;
let nc: NatsConnection;
let jsm: JetStreamManager;
let keysDb: DataSource;
/** The operator's key (CAIRN_API_KEY): it mints the test keys. */
const OPERATOR_KEY = `cairn_sbxopegw_${'O'.repeat(43)}`;
let artifacts = '';
let workerId = '';
const services: ServiceProcess[] = [];
const keys = { writer: '', reader: '', other: '' };

const sha256 = (bytes: Uint8Array | string) => createHash('sha256').update(bytes).digest('hex');

function body<T>(answer: HttpAnswer, status: number, schema: { parse(value: unknown): T }): T {
  expect(answer.status, answer.text.slice(0, 800)).toBe(status);
  return schema.parse(answer.body);
}

async function create(spec: Record<string, unknown> = SPEC, key = keys.writer, headers: Record<string, string> = {}): Promise<Sandbox> {
  return body(await http(base, 'POST', '/v1/sandboxes', { key, body: spec, headers }), 201, SandboxSchema);
}

async function view(id: string, key = keys.writer): Promise<Sandbox> {
  return body(await http(base, 'GET', `/v1/sandboxes/${id}`, { key }), 200, SandboxSchema);
}

function execRaw(id: string, request: Record<string, unknown>, key = keys.writer): Promise<HttpAnswer> {
  return http(base, 'POST', `/v1/sandboxes/${id}/exec`, { key, body: request });
}

async function run(id: string, argv: string[], more: Record<string, unknown> = {}): Promise<ExecResult> {
  return body(await execRaw(id, { argv, ...more }), 200, ExecResultSchema);
}

function putFile(id: string, path: string, bytes: Uint8Array | string, key = keys.writer, query = ''): Promise<HttpAnswer> {
  return http(base, 'PUT', `/v1/sandboxes/${id}/files?path=${encodeURIComponent(path)}${query}`, {
    key,
    rawBody: bytes,
    headers: { 'content-type': 'application/octet-stream' },
  });
}

async function getFile(id: string, path: string, key = keys.writer): Promise<{ status: number; bytes: Buffer; headers: Headers; json: unknown }> {
  const response = await fetch(`${base}/v1/sandboxes/${id}/files?path=${encodeURIComponent(path)}`, { headers: { authorization: `Bearer ${key}` } });
  const bytes = Buffer.from(await response.arrayBuffer());
  let json: unknown = undefined;
  if ((response.headers.get('content-type') ?? '').startsWith('application/json')) json = JSON.parse(bytes.toString('utf8'));
  return { status: response.status, bytes, headers: response.headers, json };
}

async function receipts(id: string): Promise<Receipt[]> {
  return body(await http(base, 'GET', `/v1/sandboxes/${id}/events?limit=1000`, { key: keys.writer }), 200, EventPageSchema).items;
}

/** An exec asked for as NDJSON: every line with the time it arrived (ms after the request). */
async function streamExec(id: string, argv: string[]): Promise<{ status: number; contentType: string | null; lines: { at: number; line: ExecStreamLine }[] }> {
  const started = performance.now();
  const response = await fetch(`${base}/v1/sandboxes/${id}/exec`, {
    method: 'POST',
    headers: { authorization: `Bearer ${keys.writer}`, 'content-type': 'application/json', accept: 'application/x-ndjson' },
    body: JSON.stringify({ argv }),
  });
  const lines: { at: number; line: ExecStreamLine }[] = [];
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  for (;;) {
    const chunk = await reader.read();
    if (chunk.done) break;
    buffer += decoder.decode(chunk.value as Uint8Array, { stream: true });
    let end: number;
    while ((end = buffer.indexOf('\n')) !== -1) {
      lines.push({ at: performance.now() - started, line: ExecStreamLineSchema.parse(JSON.parse(buffer.slice(0, end))) });
      buffer = buffer.slice(end + 1);
    }
  }
  expect(buffer).toBe('');
  return { status: response.status, contentType: response.headers.get('content-type'), lines };
}

async function containersOf(chainId?: string): Promise<string[]> {
  const filters = [`label=io.cairn.worker=${workerId}`, ...(chainId === undefined ? [] : [`label=io.cairn.chain=${chainId}`])];
  const { stdout } = await exec('docker', ['ps', '-a', '--format', '{{.Names}}', ...filters.flatMap((f) => ['--filter', f])]);
  return stdout.split('\n').filter((line) => line !== '');
}

/** One call of the Docker Engine API on its unix socket: the status and the whole body. */
function engine(method: string, path: string, payload?: unknown): Promise<{ status: number; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const body = payload === undefined ? undefined : JSON.stringify(payload);
    const req = httpRequest(
      { socketPath: '/var/run/docker.sock', method, path, headers: body === undefined ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks) }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** `docker exec <container> true` through the Engine API itself (create, start attached, inspect): no CLI start-up. */
async function engineExecTrue(container: string): Promise<void> {
  const created = await engine('POST', `/containers/${container}/exec`, { Cmd: ['true'], AttachStdout: true, AttachStderr: true });
  const { Id } = JSON.parse(created.body.toString()) as { Id: string };
  await engine('POST', `/exec/${Id}/start`, { Detach: false, Tty: false });
  const inspected = JSON.parse((await engine('GET', `/exec/${Id}/json`)).body.toString()) as { ExitCode: number };
  expect(inspected.ExitCode).toBe(0);
}

interface Footprint {
  commands: number;
  evidence: number;
  sandboxes: number;
}

async function footprint(): Promise<Footprint> {
  const lastSeq = async (stream: string) => (await jsm.streams.info(stream).catch(() => null))?.state.last_seq ?? 0;
  const [row] = await keysDb.query<{ n: number }[]>('SELECT count(*)::int AS n FROM sandboxes');
  return { commands: await lastSeq(config.CAIRN_COMMAND_STREAM), evidence: await lastSeq(config.CAIRN_EVIDENCE_STREAM), sandboxes: row!.n };
}

beforeAll(async () => {
  // The image every sandbox here runs (built from the host's busybox in a second when absent).
  await ensureBusyboxImage({ docker: createDockerClient() });
  db = await createTestDatabase('gateway_sbx');
  await migrate(db.url);
  artifacts = await mkdtemp(join(tmpdir(), 'cairn-sbx-e2e-'));
  workerId = uniqueName('sbxw').toLowerCase().replace(/_/g, '-');
  const env = {
    CAIRN_NATS_URL: testNatsUrl(),
    CAIRN_DATABASE_URL: db.url,
    CAIRN_EVIDENCE_STREAM: uniqueName('SBX_EVIDENCE').toUpperCase(),
    CAIRN_EVIDENCE_SUBJECT_PREFIX: uniqueName('sbx_ev').toLowerCase(),
    CAIRN_COMMAND_STREAM: uniqueName('SBX_COMMANDS').toUpperCase(),
    CAIRN_COMMAND_SUBJECT_PREFIX: uniqueName('sbx_cmd').toLowerCase(),
    CAIRN_WORKERS_BUCKET: uniqueName('sbx_workers'),
    CAIRN_LEASES_BUCKET: uniqueName('sbx_leases'),
    CAIRN_ARTIFACT_BUCKET: uniqueName('sbx_artifacts'),
  };
  // Only the runtime has a directory (its state); the gateway reads the outputs over NATS.
  const runtimeEnv = { ...env, CAIRN_WORKER_ID: workerId, CAIRN_ARTIFACT_STORE_MAX_BYTES: String(256 * 1024 * 1024), CAIRN_ARTIFACT_DIR: join(artifacts, 'artifacts'), CAIRN_WORKER_STATE_DIR: join(artifacts, 'worker'), CAIRN_WORKER_SLOTS: '8', CAIRN_HEARTBEAT_MS: '500' };
  config = loadConfig(GatewayConfigSchema, { ...env, CAIRN_GATEWAY_PORT: '0', CAIRN_GATEWAY_SSE_HEARTBEAT_MS: '300', CAIRN_API_KEY: OPERATOR_KEY });
  nc = await connect({ servers: testNatsUrl() });
  jsm = await jetstreamManager(nc);
  services.push(
    startServiceProcess('intake', INTAKE_MAIN, env),
    startServiceProcess('policy', POLICY_MAIN, env),
    startServiceProcess('scheduler', SCHEDULER_MAIN, env),
    startServiceProcess('runtime', RUNTIME_MAIN, runtimeEnv),
    startServiceProcess('grader', GRADER_MAIN, env),
    startServiceProcess('projector', PROJECTOR_MAIN, env),
  );
  gateway = await startGateway(config, { logger: new JsonLogger('gateway', 'warn', (line) => gatewayLog.push(line)) });
  base = gateway.url;

  keysDb = createGatewayDataSource(db.url, 2);
  await keysDb.initialize();
  // Test keys are made as the product makes them: through POST /v1/keys with the operator's key.
  keys.writer = (await provisionKey(base, OPERATOR_KEY, { tenant: 'acme', scopes: ['runs:read', 'runs:write'] })).key;
  keys.reader = (await provisionKey(base, OPERATOR_KEY, { tenant: 'acme', scopes: ['runs:read'] })).key;
  keys.other = (await provisionKey(base, OPERATOR_KEY, { tenant: 'globex', scopes: ['runs:read', 'runs:write'] })).key;

  await waitFor(
    'intake, policy, scheduler, runtime, grader and projector up',
    async () => {
      const health = HealthSchema.parse((await http(base, 'GET', '/v1/health')).body);
      const s = health.checks.services;
      return s.intake === 'ok' && s.policy === 'ok' && s.scheduler === 'ok' && s.runtime === 'ok' && s.grader === 'ok' && s.projector === 'ok';
    },
    60_000,
  ).catch((error: unknown) => {
    throw new Error(`${String(error)}\n${services.map((s) => `--- ${s.name}\n${s.output().slice(-2000)}`).join('\n')}`);
  });
});

afterAll(async () => {
  await gateway?.close();
  await Promise.all(services.map((service) => service.stop()));
  if (workerId !== '') {
    for (const name of await containersOf().catch(() => [])) await exec('docker', ['rm', '-f', name]).catch(() => undefined);
  }
  await keysDb?.destroy();
  if (jsm !== undefined) {
    const leases = config.CAIRN_LEASES_BUCKET;
    for (const stream of [
      config.CAIRN_EVIDENCE_STREAM,
      config.CAIRN_COMMAND_STREAM,
      bucketStreamName(config.CAIRN_WORKERS_BUCKET),
      bucketStreamName(leases),
      bucketStreamName(`${leases}_approvals`),
      `OBJ_${config.CAIRN_ARTIFACT_BUCKET}`,
    ]) {
      await jsm.streams.delete(stream).catch(() => false);
    }
  }
  await nc?.close();
  await db?.drop();
  if (artifacts !== '') await rm(artifacts, { recursive: true, force: true });
});

describe('interactive sandbox sessions through REST', () => {
  it('create → write a file → exec reading it → exec streamed → read the file → receipts → destroy → sealed, verifiable bundle', async () => {
    const idem = uniqueName('sbx-idem');
    const answer = await http(base, 'POST', '/v1/sandboxes', { key: keys.writer, body: SPEC, headers: { 'idempotency-key': idem } });
    const sandbox = body(answer, 201, SandboxSchema);
    const id = sandbox.id;
    expect(answer.headers.get('location')).toBe(`/v1/sandboxes/${id}`);
    expect(sandbox).toMatchObject({ tenant: 'acme', state: 'READY', image: BUSYBOX, operations: 0, destroyReason: null, errorCode: null, sealed: false });
    expect(sandbox.readyAt).not.toBeNull();
    expect(sandbox.workerId).toBe(workerId);
    expect(sandbox.caps).toMatchObject({ memory_mib: 64, pids: 64 });
    // The same Idempotency-Key and body: the same sandbox, nothing new.
    const replay = await create(SPEC, keys.writer, { 'idempotency-key': idem });
    expect(replay.id).toBe(id);

    // A file in, as bytes (not all of them UTF-8).
    const text = 'line one\nline two\n';
    const written = body(await putFile(id, '/work/in.txt', text, keys.writer, '&mode=0640'), 200, FileWrittenSchema);
    expect(written).toMatchObject({ path: '/work/in.txt', bytes: Buffer.byteLength(text), sha256: sha256(text) });
    const binary = Uint8Array.from([0x00, 0xff, 0xfe, 0x41, 0x0a, 0x80]);
    const binWritten = body(await putFile(id, '/work/blob.bin', binary), 200, FileWrittenSchema);
    expect(binWritten.sha256).toBe(sha256(binary));

    // Exec (JSON) reads it, its stderr and its exit code kept apart.
    const cat = await run(id, ['sh', '-c', 'cat /work/in.txt; echo oops >&2; stat -c %a /work/in.txt; exit 3']);
    expect(cat).toMatchObject({ exitCode: 3, stdout: `${text}640\n`, stderr: 'oops\n', truncated: false, limitHit: null, sandboxState: 'READY' });
    expect(cat.stdoutSha256).toBe(sha256(`${text}640\n`));
    const withInput = await run(id, ['sh', '-c', 'read x; echo "$x-$GREETING-$(pwd)"'], { stdin: 'abc\n', env: { GREETING: 'hi' }, workdir: '/tmp' });
    expect(withInput.stdout).toBe('abc-hi-/tmp\n');

    // Exec streamed: output lines arrive as the program writes them, the result comes last.
    const streamed = await streamExec(id, ['sh', '-c', 'echo first; sleep 1; echo second >&2; echo third']);
    expect(streamed.status).toBe(200);
    expect(streamed.contentType).toContain('application/x-ndjson');
    const lines = streamed.lines;
    // The whole last line: an error line shows its code and message (and the gateway's log, its cause).
    expect(lines.at(-1)?.line, gatewayLog.join('')).toMatchObject({ type: 'result' });
    expect(lines.filter((l) => l.line.type === 'result')).toHaveLength(1);
    const outputs = lines.filter((l): l is { at: number; line: Extract<ExecStreamLine, { type: 'output' }> } => l.line.type === 'output');
    const collect = (stream: 'stdout' | 'stderr') => Buffer.concat(outputs.filter((l) => l.line.stream === stream).map((l) => Buffer.from(l.line.data, 'base64'))).toString();
    expect(collect('stdout')).toBe('first\nthird\n');
    expect(collect('stderr')).toBe('second\n');
    // Every output line comes before the result. (When they go out is the backend's: the runtime
    // sends an exec's output once it has been scanned for secrets, i.e. when the program ends; the
    // gateway writes each chunk the moment it gets it — sandboxes.unit.spec.ts.)
    expect(lines.findIndex((l) => l.line.type === 'result')).toBe(lines.length - 1);
    const streamedResult = lines.at(-1)!.line as Extract<ExecStreamLine, { type: 'result' }>;
    expect(streamedResult).toMatchObject({ exitCode: 0, stdoutSha256: sha256('first\nthird\n'), sandboxState: 'READY' });

    // Read the files back as raw bytes.
    const back = await getFile(id, '/work/blob.bin');
    expect(back.status).toBe(200);
    expect(back.headers.get('content-type')).toBe('application/octet-stream');
    expect([...back.bytes]).toEqual([...binary]);
    expect(back.headers.get('x-cairn-sha256')).toBe(sha256(binary));
    const readSeq = Number(back.headers.get('x-cairn-seq'));
    expect(readSeq).toBeGreaterThan(streamedResult.seq);
    const missing = await getFile(id, '/work/nothing-here');
    expect(missing.status).toBe(404);
    expect(missing.json).toMatchObject({ code: 'E_NOT_FOUND' });
    const mkdir = await run(id, ['mkdir', '/work/dir']);
    const directory = await getFile(id, '/work/dir');
    expect(directory.status).toBe(400);
    expect(directory.json).toMatchObject({ code: 'E_INPUT' });

    // Every operation is a receipt on the sandbox's chain, at the seq its answer named (an
    // exec's answer does not wait for the projection: read once it has the last one).
    await waitFor('the projection to hold the last exec', async () => (await view(id)).headSeq >= mkdir.seq);
    const chain = await receipts(id);
    const at = (seq: number) => chain.find((r) => r.seq === seq)?.type;
    expect(chain.slice(0, 4).map((r) => r.type)).toEqual(['sandbox.requested', 'policy.decided', 'run.scheduled', 'sandbox.created']);
    expect(at(written.seq)).toBe('sandbox.file.written');
    expect(at(binWritten.seq)).toBe('sandbox.file.written');
    expect(at(cat.seq)).toBe('sandbox.exec.completed');
    expect(at(withInput.seq)).toBe('sandbox.exec.completed');
    expect(at(streamedResult.seq)).toBe('sandbox.exec.completed');
    expect(at(readSeq)).toBe('sandbox.file.read');
    const count = (type: string) => chain.filter((r) => r.type === type).length;
    expect(count('sandbox.exec.started')).toBe(4);
    expect(count('sandbox.exec.completed')).toBe(4);
    expect(at(mkdir.seq)).toBe('sandbox.exec.completed');
    // Environment names only, never values (I-7).
    expect(JSON.stringify(chain)).not.toContain('"hi"');
    const live = await view(id);
    expect(live).toMatchObject({ state: 'READY', headSeq: chain.at(-1)!.seq, headHash: chain.at(-1)!.hash });
    expect(live.operations).toBeGreaterThanOrEqual(7);

    // The receipts stream over SSE like a run's, to the seal.
    const sse = await openSse(`${base}/v1/sandboxes/${id}/events/stream`, keys.writer);
    expect(sse.status).toBe(200);

    // Destroy: the view says so; an exec after is 409; a second DELETE answers the same view.
    const destroyed = body(await http(base, 'DELETE', `/v1/sandboxes/${id}`, { key: keys.writer }), 200, SandboxSchema);
    expect(destroyed).toMatchObject({ id, state: 'DESTROYED', destroyReason: 'deleted' });
    const late = await execRaw(id, { argv: ['true'] });
    expect(late.status).toBe(409);
    expect(late.body).toMatchObject({ code: 'E_CONFLICT', details: { state: 'DESTROYED' } });
    expect((await putFile(id, '/work/late.txt', 'x')).status).toBe(409);
    const again = body(await http(base, 'DELETE', `/v1/sandboxes/${id}`, { key: keys.writer }), 200, SandboxSchema);
    expect(again).toMatchObject({ id, state: 'DESTROYED', destroyReason: 'deleted' });

    const sealed = await waitFor('the sandbox chain sealed', async () => {
      const current = await view(id);
      return current.sealed ? current : null;
    });
    const streamedTypes: string[] = [];
    for (;;) {
      const message = await sse.next(15_000);
      if (message === null) break;
      if (message.event === 'receipt') {
        expect(message.id).toMatch(new RegExp(`^${id}:\\d+$`));
        streamedTypes.push((JSON.parse(message.data ?? '{}') as { type: string }).type);
      }
    }
    sse.close();
    expect(streamedTypes.at(-1)).toBe('run.sealed');
    expect(streamedTypes).toContain('sandbox.destroyed');

    // The bundle verifies offline and names the sandbox, every exec's output and every file written.
    const bundle = body(await http(base, 'GET', `/v1/sandboxes/${id}/bundle`, { key: keys.writer }), 200, ProofBundleSchema);
    expect(bundle.runId).toBe(id);
    expect(verifyChain(bundle.receipts, { requireNonEmpty: true, chainId: id })).toMatchObject({ ok: true, count: bundle.receipts.length, headHash: sealed.headHash });
    expect(bundle.artifacts).toMatchObject({ '/work/in.txt': sha256(text), '/work/blob.bin': sha256(binary), [`execs[${cat.execId}].stdout`]: cat.stdoutSha256 });

    const listed = body(await http(base, 'GET', '/v1/sandboxes?state=DESTROYED', { key: keys.writer }), 200, SandboxListSchema);
    expect(listed.items.find((item) => item.id === id)).toMatchObject({ state: 'DESTROYED', sealed: true });
    expect(await containersOf(id)).toEqual([]);
  });

  it('keeps a chain verifiable whose argv and file names hold U+2028, U+2029 and control characters: NDJSON, events, SSE, bundle', async () => {
    const text = awkwardText();
    const name = `/work/${awkwardName()}.txt`;
    const { id } = await create();
    body(await putFile(id, name, text), 200, FileWrittenSchema);
    // Streamed, read with the shared JSON Lines reader ("\n" only).
    const response = await fetch(`${base}/v1/sandboxes/${id}/exec`, {
      method: 'POST',
      headers: { authorization: `Bearer ${keys.writer}`, 'content-type': 'application/json', accept: 'application/x-ndjson' },
      body: JSON.stringify({ argv: ['sh', '-c', 'printf "%s" "$1"; cat "$2" >&2', 'sh', text, name] }),
    });
    const lines: ExecStreamLine[] = [];
    for await (const line of readLines(response.body!)) lines.push(ExecStreamLineSchema.parse(JSON.parse(line)));
    expect(lines.at(-1), gatewayLog.join('')).toMatchObject({ type: 'result', exitCode: 0 });
    const output = (stream: string) => Buffer.concat(lines.flatMap((l) => (l.type === 'output' && l.stream === stream ? [Buffer.from(l.data, 'base64')] : []))).toString();
    expect(output('stdout')).toBe(text);
    expect(output('stderr')).toBe(text);

    const sse = await openSse(`${base}/v1/sandboxes/${id}/events/stream`, keys.writer);
    body(await http(base, 'DELETE', `/v1/sandboxes/${id}`, { key: keys.writer }), 200, SandboxSchema);
    const sealed = await waitFor('the sandbox chain sealed', async () => {
      const current = await view(id);
      return current.sealed ? current : null;
    });
    const streamed: unknown[] = [];
    for (;;) {
      const message = await sse.next(15_000);
      if (message === null) break;
      if (message.event !== 'receipt') continue;
      // One data line per receipt, the separators escaped in it.
      expect(message.data).not.toMatch(/[\u2028\u2029\r\n]/);
      streamed.push(JSON.parse(message.data ?? 'null'));
    }
    sse.close();
    const recorded = await receipts(id);
    expect(JSON.stringify(recorded)).toContain(JSON.stringify(text).slice(1, -1));
    expect(recorded.some((r) => r.type === 'sandbox.file.written' && r.path === name)).toBe(true);
    for (const chain of [recorded, streamed]) {
      expect(verifyChain(chain, { requireNonEmpty: true, chainId: id })).toMatchObject({ ok: true, headHash: sealed.headHash });
    }
    const bundle = body(await http(base, 'GET', `/v1/sandboxes/${id}/bundle`, { key: keys.writer }), 200, ProofBundleSchema);
    expect(verifyChain(bundle.receipts, { requireNonEmpty: true, chainId: id })).toMatchObject({ ok: true, headHash: sealed.headHash });
    expect(bundle.artifacts[name]).toBe(sha256(text));
  });

  it('runs operations on one sandbox one at a time: a second request waits its turn', async () => {
    const { id } = await create();
    const [slow, quick] = await Promise.all([
      run(id, ['sh', '-c', 'sleep 1; echo slow > /work/order; echo slow']),
      new Promise((resolve) => setTimeout(resolve, 100)).then(() => run(id, ['sh', '-c', 'cat /work/order'])),
    ]);
    expect(slow.stdout).toBe('slow\n');
    expect(quick.stdout).toBe('slow\n');
    expect(quick.seq).toBeGreaterThan(slow.seq);
    await http(base, 'DELETE', `/v1/sandboxes/${id}`, { key: keys.writer });
  });

  it('answers a policy refusal with 403 E_POLICY_DENIED naming the sandbox, which reads REJECTED', async () => {
    const answer = await http(base, 'POST', '/v1/sandboxes', { key: keys.writer, body: { ...SPEC, image: 'docker.io/library/alpine:3' } });
    expect(answer.status, answer.text).toBe(403);
    expect(answer.body).toMatchObject({ code: 'E_POLICY_DENIED', details: { sandboxId: expect.stringMatching(/^sbx_/) as unknown } });
    const sandboxId = (answer.body as { details: { sandboxId: string } }).details.sandboxId;
    // The refusal is answered from the chain; the projector may not have written it yet (404 until then).
    const rejected = await waitFor('the refusal projected', async () => {
      const answer = await http(base, 'GET', `/v1/sandboxes/${sandboxId}`, { key: keys.writer });
      if (answer.status === 404) return null;
      const current = body(answer, 200, SandboxSchema);
      return current.state === 'REJECTED' ? current : null;
    });
    expect(rejected).toMatchObject({ errorCode: 'E_POLICY_DENIED', readyAt: null, workerId: null });
    expect(await containersOf(sandboxId)).toEqual([]);
    // Deleting a sandbox that never started answers its view as it is.
    const deleted = body(await http(base, 'DELETE', `/v1/sandboxes/${sandboxId}`, { key: keys.writer }), 200, SandboxSchema);
    expect(deleted.state).toBe('REJECTED');
  });

  it('pages the tenant’s sandboxes newest first, and filters by state', async () => {
    const first = await create();
    const second = await create();
    const page = body(await http(base, 'GET', '/v1/sandboxes?limit=1', { key: keys.reader }), 200, SandboxListSchema);
    expect(page.items.map((s) => s.id)).toEqual([second.id]);
    expect(page.nextCursor).not.toBeNull();
    const next = body(await http(base, 'GET', `/v1/sandboxes?limit=1&cursor=${encodeURIComponent(page.nextCursor!)}`, { key: keys.reader }), 200, SandboxListSchema);
    expect(next.items.map((s) => s.id)).toEqual([first.id]);
    const ready = body(await http(base, 'GET', '/v1/sandboxes?state=READY&limit=200', { key: keys.reader }), 200, SandboxListSchema);
    expect(ready.items.every((s) => s.state === 'READY')).toBe(true);
    expect(ready.items.map((s) => s.id)).toEqual(expect.arrayContaining([first.id, second.id]));
    for (const { id } of [first, second]) await http(base, 'DELETE', `/v1/sandboxes/${id}`, { key: keys.writer });
  });

  it('answers a create from its chain, and reads right after show exactly what it answered (GET, list, events)', async () => {
    for (let i = 0; i < 3; i++) {
      const created = await create();
      // No wait in between: the projection may still trail the answer; the reads wait for it.
      const [got, listed, events] = await Promise.all([
        http(base, 'GET', `/v1/sandboxes/${created.id}`, { key: keys.reader }),
        http(base, 'GET', '/v1/sandboxes?state=READY&limit=200', { key: keys.reader }),
        http(base, 'GET', `/v1/sandboxes/${created.id}/events`, { key: keys.reader }),
      ]);
      // The projector's row at that receipt, field for field: the answer's fold is the projector's.
      expect(body(got, 200, SandboxSchema)).toEqual(created);
      expect(body(listed, 200, SandboxListSchema).items.find((s) => s.id === created.id)).toEqual(created);
      const page = body(events, 200, EventPageSchema);
      expect(page.items.at(-1)).toMatchObject({ seq: created.headSeq, type: 'sandbox.created', hash: created.headHash });
      await http(base, 'DELETE', `/v1/sandboxes/${created.id}`, { key: keys.writer });
    }
  });

  it("shows another tenant's key nothing of a sandbox (404), and a key without runs:write cannot operate it (403)", async () => {
    const { id } = await create();
    // The create is answered from the chain; the footprint counts projected rows, so the projector must have it first.
    await waitFor('the sandbox projected', async () => (await keysDb.query<unknown[]>('SELECT 1 FROM sandboxes WHERE sandbox_id = $1', [id])).length === 1, 15_000, 50);
    const before = await footprint();
    const others: [string, () => Promise<{ status: number; body?: unknown; json?: unknown }>][] = [
      ['GET', () => http(base, 'GET', `/v1/sandboxes/${id}`, { key: keys.other })],
      ['exec', () => execRaw(id, { argv: ['true'] }, keys.other)],
      ['PUT file', () => putFile(id, '/work/x', 'x', keys.other)],
      ['GET file', async () => getFile(id, '/work/x', keys.other).then((f) => ({ status: f.status, body: f.json }))],
      ['events', () => http(base, 'GET', `/v1/sandboxes/${id}/events`, { key: keys.other })],
      ['events/stream', () => http(base, 'GET', `/v1/sandboxes/${id}/events/stream`, { key: keys.other })],
      ['bundle', () => http(base, 'GET', `/v1/sandboxes/${id}/bundle`, { key: keys.other })],
      ['DELETE', () => http(base, 'DELETE', `/v1/sandboxes/${id}`, { key: keys.other })],
    ];
    for (const [what, send] of others) {
      const answer = await send();
      expect(answer.status, what).toBe(404);
      expect(answer.body, what).toMatchObject({ code: 'E_NOT_FOUND' });
    }
    const theirs = body(await http(base, 'GET', '/v1/sandboxes?limit=200', { key: keys.other }), 200, SandboxListSchema);
    expect(theirs.items.map((s) => s.id)).not.toContain(id);

    const readOnly: [string, () => Promise<HttpAnswer>][] = [
      ['create', () => http(base, 'POST', '/v1/sandboxes', { key: keys.reader, body: SPEC })],
      ['exec', () => execRaw(id, { argv: ['true'] }, keys.reader)],
      ['PUT file', () => putFile(id, '/work/x', 'x', keys.reader)],
      // A read returns the sandbox's bytes, which may carry what it was given: not a reader's.
      ['GET file', () => http(base, 'GET', `/v1/sandboxes/${id}/files?path=/work/x`, { key: keys.reader })],
      ['DELETE', () => http(base, 'DELETE', `/v1/sandboxes/${id}`, { key: keys.reader })],
    ];
    for (const [what, send] of readOnly) {
      const answer = await send();
      expect(answer.status, what).toBe(403);
      expect(answer.body, what).toMatchObject({ code: 'E_FORBIDDEN', details: { scope: 'runs:write' } });
    }
    expect(await footprint()).toEqual(before);
    expect((await view(id, keys.reader)).state).toBe('READY');
    await http(base, 'DELETE', `/v1/sandboxes/${id}`, { key: keys.writer });
  });

  it('refuses bad bodies with 400 E_INPUT (an oversized file 413 E_TOO_LARGE), creating and recording nothing', async () => {
    // Disk for the one 16 MiB file that is allowed.
    const { id } = await create({ ...SPEC, caps: { ...SPEC.caps, diskMiB: 128 } });
    const before = await footprint();
    const post = (path: string, rawBody: string) => http(base, 'POST', path, { key: keys.writer, rawBody });
    const cases: [string, () => Promise<HttpAnswer>, number, string, string?][] = [
      ['a spec with an unknown field', () => post('/v1/sandboxes', JSON.stringify({ ...SPEC, privileged: true })), 400, 'E_INPUT', 'privileged: unknown field'],
      ['a spec with a duplicate key', () => post('/v1/sandboxes', '{"image":"cairn/sandbox-busybox:1","image":"evil/image:1"}'), 400, 'E_INPUT', 'image: duplicate key'],
      ['a spec asking for the host network', () => post('/v1/sandboxes', JSON.stringify({ ...SPEC, network: 'host' })), 400, 'E_INPUT', 'network'],
      ['an exec without argv', () => execRaw(id, { env: { A: '1' } }), 400, 'E_INPUT', 'argv'],
      ['an exec with an empty body', () => post(`/v1/sandboxes/${id}/exec`, ''), 400, 'E_INPUT'],
      ['an exec as a shell string', () => execRaw(id, { argv: 'rm -rf /work' }), 400, 'E_INPUT', 'not a shell string'],
      ['an exec with argv twice', () => post(`/v1/sandboxes/${id}/exec`, '{"argv":["true"],"argv":["rm","-rf","/work"]}'), 400, 'E_INPUT', 'argv: duplicate key'],
      ['an exec in a relative workdir', () => execRaw(id, { argv: ['true'], workdir: 'work' }), 400, 'E_INPUT', 'workdir'],
      ['a file at a relative path', () => putFile(id, 'work/a.txt', 'x'), 400, 'E_INPUT', 'path'],
      ['a file climbing out with ..', () => putFile(id, '/work/../etc/passwd', 'x'), 400, 'E_INPUT', 'path'],
      ['a file outside /work, /out and /tmp', () => putFile(id, '/etc/passwd', 'x'), 400, 'E_INPUT', 'path'],
      ['a file sent as JSON', () => http(base, 'PUT', `/v1/sandboxes/${id}/files?path=/work/a.txt`, { key: keys.writer, body: { content: 'x' } }), 400, 'E_INPUT', 'application/octet-stream'],
      ['a file over 16 MiB', () => putFile(id, '/work/big.bin', new Uint8Array(16 * 1024 * 1024 + 1)), 413, 'E_TOO_LARGE'],
      ['a read of a path with ..', async () => getFile(id, '/tmp/../etc/shadow').then((f) => ({ status: f.status, body: f.json, headers: f.headers, text: '' })), 400, 'E_INPUT', 'path'],
    ];
    for (const [what, send, status, code, mentions] of cases) {
      const answer = await send();
      expect(answer.status, `${what}: ${answer.text.slice(0, 300)}`).toBe(status);
      expect(answer.body, what).toMatchObject({ code });
      if (mentions !== undefined) expect((answer.body as { message: string }).message, what).toContain(mentions);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(await footprint()).toEqual(before);
    // Exactly 16 MiB is fine.
    const full = body(await putFile(id, '/work/full.bin', new Uint8Array(16 * 1024 * 1024)), 200, FileWrittenSchema);
    expect(full.bytes).toBe(16 * 1024 * 1024);
    await http(base, 'DELETE', `/v1/sandboxes/${id}`, { key: keys.writer });
  });

  it('takes binary stdin, starts a program anywhere, reads the image and tells a directory and a denied file apart', async () => {
    const { id } = await create();
    const payload = Buffer.from([0xc3, 0x28, 0x00, 0xff, 0x01, 0x02, 0x62]);
    const piped = await run(id, ['sh', '-c', 'cat > /work/stdin.bin; od -An -tx1 /work/stdin.bin'], { stdinBase64: payload.toString('base64') });
    expect(piped.stdout.trim()).toBe('c3 28 00 ff 01 02 62');
    expect((await getFile(id, '/work/stdin.bin')).bytes.equals(payload)).toBe(true);
    const both = await execRaw(id, { argv: ['cat'], stdin: 'x', stdinBase64: 'eA==' });
    expect(both.status).toBe(400);
    expect(both.body).toMatchObject({ code: 'E_INPUT', message: expect.stringContaining('stdinBase64') as string });
    const notBase64 = await execRaw(id, { argv: ['cat'], stdinBase64: 'not base64!' });
    expect(notBase64.status).toBe(400);
    expect(notBase64.body).toMatchObject({ code: 'E_INPUT', message: expect.stringContaining('stdinBase64') as string });
    const tooMuch = await execRaw(id, { argv: ['cat'], stdinBase64: Buffer.alloc(512 * 1024 + 3).toString('base64') });
    expect(tooMuch.status).toBe(400);
    expect((await run(id, ['pwd'], { workdir: '/usr/bin' })).stdout).toBe('/usr/bin\n');
    // A read may name the image's own files; a directory and the sandbox user's own file modes are told apart.
    const passwd = await getFile(id, '/etc/passwd');
    expect(passwd.status).toBe(200);
    expect(passwd.bytes.toString('utf8')).toContain('root');
    const dir = await getFile(id, '/etc');
    expect(dir.status).toBe(400);
    expect(dir.json).toMatchObject({ code: 'E_INPUT', message: '/etc is a directory, not a file', details: { path: '/etc', reason: 'directory' } });
    expect(await putFile(id, '/tmp/d/f', 'x')).toMatchObject({ status: 200 });
    expect((await putFile(id, '/tmp/d', 'x')).body).toMatchObject({ code: 'E_INPUT', details: { reason: 'directory' } });
    await run(id, ['sh', '-c', 'echo secret > /work/locked && chmod 000 /work/locked']);
    const unreadable = await getFile(id, '/work/locked');
    expect(unreadable.status).toBe(403);
    expect(unreadable.json).toMatchObject({ code: 'E_FORBIDDEN', details: { path: '/work/locked', reason: 'permission' } });
    const unwritable = await putFile(id, '/work/locked', 'changed');
    expect(unwritable.status).toBe(403);
    expect(unwritable.body).toMatchObject({ code: 'E_FORBIDDEN', details: { reason: 'permission' } });
    expect((await getFile(id, '/work/nope')).json).toMatchObject({ code: 'E_NOT_FOUND', message: expect.stringContaining('/work/nope') as string });
    // Not the kernel's or the runtime's trees, for a read or a workdir.
    for (const path of ['/proc/self/environ', '/run/secrets/X', '/sys/kernel/notes']) expect((await getFile(id, path)).status, path).toBe(400);
    expect((await execRaw(id, { argv: ['pwd'], workdir: '/proc/self/fd/3' })).status).toBe(400);
    // Writes stay below the mounts.
    expect((await putFile(id, '/etc/x', 'x')).status).toBe(400);
    await http(base, 'DELETE', `/v1/sandboxes/${id}`, { key: keys.writer });
  });

  it('refuses a symlink anywhere on a path, so a read or write never leaves /work, /out or /tmp', async () => {
    const { id } = await create();
    await run(id, ['sh', '-c', 'ln -s /etc /work/etc && ln -s /etc/passwd /work/pw && mkdir /work/real && ln -s /work/real /tmp/alias']);
    const reads = [await getFile(id, '/work/pw'), await getFile(id, '/work/etc/passwd'), await getFile(id, '/tmp/alias/x')];
    for (const read of reads) {
      expect(read.status).toBe(400);
      expect(read.json).toMatchObject({ code: 'E_INPUT' });
    }
    for (const path of ['/work/etc/cairn-escape', '/work/pw', '/tmp/alias/x']) {
      const answer = await putFile(id, path, 'escaped');
      expect(answer.status, path).toBe(400);
      expect(answer.body).toMatchObject({ code: 'E_INPUT' });
    }
    const check = await run(id, ['sh', '-c', 'ls /etc/cairn-escape /work/real/x 2>&1; head -c 4 /etc/passwd']);
    expect(check.stdout).not.toContain('escaped');
    expect(check.stdout).toContain('root');
    await http(base, 'DELETE', `/v1/sandboxes/${id}`, { key: keys.writer });
  });

  it('shows a TTL running out in the view (DESTROYED, ttl), and operations after it are 409', async () => {
    const sandbox = await create({ ...SPEC, ttlSeconds: 2 });
    // Intake fixes the expiry as it appends sandbox.requested: two seconds from then.
    const ttlMs = Date.parse(sandbox.expiresAt!) - Date.parse(sandbox.createdAt);
    expect(ttlMs).toBeGreaterThan(1500);
    expect(ttlMs).toBeLessThanOrEqual(2000);
    const expired = await waitFor(
      'the TTL to destroy the sandbox',
      async () => {
        const current = await view(sandbox.id);
        return current.state === 'DESTROYED' ? current : null;
      },
      30_000,
      200,
    );
    expect(expired).toMatchObject({ destroyReason: 'ttl' });
    const late = await execRaw(sandbox.id, { argv: ['true'] });
    expect(late.status).toBe(409);
    expect(late.body).toMatchObject({ code: 'E_CONFLICT' });
    expect((await receipts(sandbox.id)).map((r) => r.type)).toContain('sandbox.expired');
    await waitFor('no container left', async () => (await containersOf(sandbox.id)).length === 0, 15_000);
  });

  it("kills only the program and its session at the exec's own timeout: the sandbox stays READY", async () => {
    const { id } = await create();
    const started = performance.now();
    // A background child in the program's session, and the program itself: both go at the deadline.
    const result = await run(id, ['sh', '-c', 'sleep 30 & sleep 31; :'], { timeoutSeconds: 1 });
    expect(performance.now() - started).toBeLessThan(10_000);
    expect(result).toMatchObject({ limitHit: 'E_TIMEOUT', errorCode: 'E_TIMEOUT', exitCode: null, sandboxState: 'READY' });
    const left = await run(id, ['sh', '-c', 'ps -o pid,args | grep "sleep 3[01]" || true']);
    expect(left.stdout).toBe('');
    expect((await run(id, ['echo', 'still here'])).stdout).toBe('still here\n');
    const completed = (await waitFor('the exec receipt', async () => (await receipts(id)).find((r) => r.type === 'sandbox.exec.completed') ?? null)) as Receipt & {
      error_code?: string;
      limits_hit: string[];
      signal: string | null;
    };
    expect(completed).toMatchObject({ error_code: 'E_TIMEOUT', limits_hit: [], signal: 'SIGKILL', exit_code: null });
    expect(await view(id)).toMatchObject({ state: 'READY', errorCode: null });
    await http(base, 'DELETE', `/v1/sandboxes/${id}`, { key: keys.writer });
  });

  it('destroys the sandbox when an exec hits a cap (its wall time), and still answers 200 with limitHit', async () => {
    const { id } = await create({ ...SPEC, caps: { ...SPEC.caps, wallSeconds: 1 } });
    const result = await run(id, ['sleep', '30']);
    expect(result).toMatchObject({ limitHit: 'E_TIMEOUT', sandboxState: 'DESTROYED' });
    const after = await waitFor('the view to show the limit', async () => {
      const current = await view(id);
      return current.state === 'DESTROYED' ? current : null;
    });
    expect(after.destroyReason).toBe('limit');
    expect((await execRaw(id, { argv: ['true'] })).status).toBe(409);
  });

  it(`measures exec latency through REST (median of ${LATENCY_SAMPLES}) next to a raw docker exec (CLI and Engine API)`, async () => {
    const { id } = await create();
    const created = (await receipts(id)).find((r) => r.type === 'sandbox.created') as (Receipt & { container_name: string }) | undefined;
    const container = created!.container_name;
    const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
    const rest: number[] = [];
    for (let i = 0; i < LATENCY_SAMPLES; i++) {
      const started = performance.now();
      const result = await run(id, ['true']);
      rest.push(performance.now() - started);
      expect(result.exitCode).toBe(0);
    }
    const docker: number[] = [];
    for (let i = 0; i < LATENCY_SAMPLES; i++) {
      const started = performance.now();
      await exec('docker', ['exec', container, 'true']);
      docker.push(performance.now() - started);
    }
    const api: number[] = [];
    for (let i = 0; i < LATENCY_SAMPLES; i++) {
      const started = performance.now();
      await engineExecTrue(container);
      api.push(performance.now() - started);
    }
    const p90 = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length * 0.9)]!;
    const figures = {
      samples: LATENCY_SAMPLES,
      restMedianMs: median(rest),
      restP90Ms: p90(rest),
      dockerCliExecMedianMs: median(docker),
      engineApiExecMedianMs: median(api),
      engineApiExecP90Ms: p90(api),
    };
    await writeFile(join(tmpdir(), 'cairn-sbx-rest-latency.json'), `${JSON.stringify(figures)}\n`);
    console.log(`sandbox exec latency: ${JSON.stringify(figures)}`);
    expect(figures.restMedianMs).toBeGreaterThan(0);
    await http(base, 'DELETE', `/v1/sandboxes/${id}`, { key: keys.writer });
  });

  it('rebuilds the sandboxes projection from the stream exactly as it was projected live (I-10)', async () => {
    // Once the stream is quiet (every session ended and sealed) and the projector has caught up.
    const lastSeq = async () => (await jsm.streams.info(config.CAIRN_EVIDENCE_STREAM)).state.last_seq;
    const position = async () => (await keysDb.query<{ last: number }[]>('SELECT last_stream_seq::float8 AS last FROM projection_positions'))[0]?.last ?? 0;
    let previous = -1;
    await waitFor(
      'a quiet, fully projected stream',
      async () => {
        const [last, at] = [await lastSeq(), await position()];
        const quiet = last === previous && at === last;
        previous = last;
        return quiet;
      },
      60_000,
      1000,
    );
    const rows = (ds: DataSource) => ds.query<{ row: unknown }[]>('SELECT to_jsonb(t) AS row FROM sandboxes t ORDER BY sandbox_id');
    const live = await rows(keysDb);
    expect(live.length).toBeGreaterThanOrEqual(10);
    const states = new Set(live.map((r) => (r.row as { state: string }).state));
    expect([...states].sort()).toEqual(['DESTROYED', 'REJECTED']);

    const log = await EvidenceLog.fromConnection(nc, evidenceLogOptionsFromConfig(config));
    const fresh = await createTestDatabase('gateway_sbx_rebuild');
    try {
      const result = await rebuildProjections({ url: fresh.url, log });
      expect(result.sandboxes).toBe(live.length);
      const other = createDataSource(fresh.url, { poolSize: 1 });
      await other.initialize();
      try {
        expect(await rows(other)).toEqual(live);
      } finally {
        await other.destroy();
      }
    } finally {
      await log.close();
      await fresh.drop();
    }
  });
});
