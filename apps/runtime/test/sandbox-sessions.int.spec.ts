import 'reflect-metadata';
import { loadConfig } from '@cairn/config';
import { isCairnError, OP_MESSAGE_HEADER, opSubject, parseEvidenceReceipt } from '@cairn/contracts';
import type { EvidenceReceipt, OpEnd, SandboxOp, SandboxSpec } from '@cairn/contracts';
import { verifyChain } from '@cairn/evidence';
import { EvidenceLog } from '@cairn/evidence-log';
import { foldSandbox } from '@cairn/lifecycle';
import { bucketStreamName, CommandBus } from '@cairn/operational';
import { createDockerClient, ensureBusyboxImage } from '@cairn/sandbox-docker';
import { openSandboxSessions } from '@cairn/sandbox-sessions';
import type { SandboxSessions } from '@cairn/sandbox-sessions';
import { startService } from '@cairn/service-kit';
import type { RunningService } from '@cairn/service-kit';
import { startProcess, stopAll } from '@cairn/service-kit/testing';
import type { ServiceProcess } from '@cairn/service-kit/testing';
import { createTestDatabase, testNatsUrl, uniqueName } from '@cairn/testing';
import type { TestDatabase } from '@cairn/testing';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hostFacts, runtimeConfigSchema, withGivenWorkerId } from '../src/runtime.config.js';
import { RUNTIME_SERVICE, runtimeModule } from '../src/runtime.module.js';
import { SandboxSessionHost } from '../src/sandbox-session.host.js';

// Intake, policy, scheduler and grader as real processes from their builds (`npm run build`
// first); the runtime in this process, so its session host can be looked at; the caller is
// `openSandboxSessions`, as the gateway uses it.
const MAINS = ['intake', 'policy', 'scheduler', 'grader'].map((app) => fileURLToPath(new URL(`../../${app}/dist/main.js`, import.meta.url)));

const TENANT = 'acme';
const text = (bytes: Uint8Array) => Buffer.from(bytes).toString('utf8');
const bytesOf = (s: string) => new Uint8Array(Buffer.from(s, 'utf8'));

let nc: NatsConnection;
let log: EvidenceLog;
let bus: CommandBus;
let db: TestDatabase;
let artifactDir: string;
let env: Record<string, string>;
let runtime: RunningService;
let sessions: SandboxSessions;
const processes: ServiceProcess[] = [];
const workerId = uniqueName('rt-sbx').toLowerCase();
const docker = createDockerClient();
const execFileAsync = promisify(execFile);

async function chainOf(sandboxId: string): Promise<EvidenceReceipt[]> {
  const out: EvidenceReceipt[] = [];
  for await (const stored of log.readChain(sandboxId)) {
    const parsed = parseEvidenceReceipt(stored.receipt);
    if (!parsed.ok) throw new Error(parsed.message);
    out.push(parsed.receipt);
  }
  return out;
}

async function chainUntil(sandboxId: string, type: string, ms = 30_000): Promise<EvidenceReceipt[]> {
  const end = Date.now() + ms;
  for (;;) {
    const chain = await chainOf(sandboxId);
    if (chain.some((r) => r.type === type)) return chain;
    if (Date.now() > end) throw new Error(`${sandboxId}: no ${type} in ${ms} ms; chain: ${chain.map((r) => r.type).join(', ')}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** This worker's sandboxes that serve (or served) a chain: idle warm ones (`cairn-pool-…`) are the pool's. */
async function containers(): Promise<string[]> {
  const listed = await docker.listContainers({ all: true, filters: { label: [`io.cairn.worker=${workerId}`] } });
  return listed.map((c) => (c.Names[0] ?? c.Id).replace(/^\//, '')).filter((name) => !name.startsWith('cairn-pool-'));
}

async function allContainers(): Promise<string[]> {
  const listed = await docker.listContainers({ all: true, filters: { label: [`io.cairn.worker=${workerId}`] } });
  return listed.map((c) => c.Id);
}

const created: string[] = [];
async function liveSandboxes(): Promise<string[]> {
  const live: string[] = [];
  for (const id of created) if (foldSandbox(await chainOf(id))?.state === 'READY') live.push(id);
  return live;
}

async function create(spec: SandboxSpec = {}): Promise<string> {
  const id = (await sessions.create({ tenant: TENANT, requestedBy: 'key:t1', spec: { ttlSeconds: 300, ...spec } }, 60_000)).sandboxId;
  created.push(id);
  return id;
}

async function refusal(promise: Promise<unknown>): Promise<{ code: string; message: string; details: unknown }> {
  try {
    await promise;
  } catch (error) {
    if (isCairnError(error)) return { code: error.code, message: error.message, details: error.details };
    throw error;
  }
  throw new Error('expected a refusal');
}

beforeAll(async () => {
  for (const main of MAINS) if (!existsSync(main)) throw new Error(`${main} is missing: run npm run build first`);
  await ensureBusyboxImage();
  db = await createTestDatabase('sbx_sessions');
  artifactDir = await mkdtemp(join(tmpdir(), 'cairn-sbx-artifacts-'));
  env = {
    CAIRN_NATS_URL: testNatsUrl(),
    CAIRN_EVIDENCE_STREAM: uniqueName('SBX_EV').toUpperCase(),
    CAIRN_EVIDENCE_SUBJECT_PREFIX: uniqueName('sbx.ev').toLowerCase(),
    CAIRN_COMMAND_STREAM: uniqueName('SBX_CMDS').toUpperCase(),
    CAIRN_COMMAND_SUBJECT_PREFIX: uniqueName('sbx_cmd').toLowerCase(),
    CAIRN_WORKERS_BUCKET: uniqueName('sbx_workers'),
    CAIRN_LEASES_BUCKET: uniqueName('sbx_leases'),
    CAIRN_DATABASE_URL: db.url,
    CAIRN_ARTIFACT_DIR: artifactDir,
    CAIRN_ARTIFACT_BUCKET: uniqueName('sbx_artifacts'),
    CAIRN_ARTIFACT_STORE_MAX_BYTES: String(256 * 1024 * 1024),
    CAIRN_GRADER_TEARDOWN_GRACE_MS: '2000',
  };
  nc = await connect({ servers: testNatsUrl() });
  log = await EvidenceLog.fromConnection(nc, { servers: testNatsUrl(), stream: env.CAIRN_EVIDENCE_STREAM!, subjectPrefix: env.CAIRN_EVIDENCE_SUBJECT_PREFIX! });
  bus = await CommandBus.open(nc, { stream: env.CAIRN_COMMAND_STREAM!, subjectPrefix: env.CAIRN_COMMAND_SUBJECT_PREFIX! });
  const runtimeEnv = {
    ...env,
    CAIRN_WORKER_ID: workerId,
    CAIRN_WORKER_SLOTS: '8',
    // Each session reserves its cpus for its life; this shared 2-core host would place two at a time.
    CAIRN_WORKER_CPUS: '32',
    CAIRN_HEARTBEAT_MS: '300',
    CAIRN_LEASE_RENEW_MS: '500',
    CAIRN_LEASE_TTL_MS: '5000',
    // On, as in `cairn up`: sessions claim warm sandboxes.
    CAIRN_WARM_POOL_SIZE: '2',
  };
  runtime = await startService(RUNTIME_SERVICE, runtimeModule(withGivenWorkerId(loadConfig(runtimeConfigSchema(hostFacts()), runtimeEnv))));
  for (const main of MAINS) processes.push(startProcess(main, env));
  // The services start as processes beside other suites: the first command may wait for intake to serve.
  sessions = await openSandboxSessions({ nc, log, bus, config: { commandTimeoutMs: 45_000 } });
}, 120_000);

afterAll(async () => {
  await sessions?.close();
  await runtime?.stop();
  await stopAll(processes);
  const left = await allContainers().catch(() => []);
  for (const id of left) await docker.getContainer(id).remove({ force: true }).catch(() => undefined);
  const jsm = await jetstreamManager(nc);
  for (const stream of [env.CAIRN_EVIDENCE_STREAM!, env.CAIRN_COMMAND_STREAM!, bucketStreamName(env.CAIRN_WORKERS_BUCKET!), bucketStreamName(env.CAIRN_LEASES_BUCKET!), `OBJ_${env.CAIRN_ARTIFACT_BUCKET!}`]) {
    await jsm.streams.delete(stream).catch(() => false);
  }
  await log?.close();
  await nc?.close();
  await db?.drop();
  await rm(artifactDir, { recursive: true, force: true });
}, 60_000);

describe('interactive sandbox sessions through openSandboxSessions, intake, policy, scheduler, runtime and grader', () => {
  it('create → write a file → exec reading it → read it back → destroy: every step a receipt, the chain sealed and verifying, no container left', async () => {
    const ready = await sessions.create({ tenant: TENANT, requestedBy: 'key:t1', spec: { ttlSeconds: 300 } }, 60_000);
    expect(ready.sandboxId).toMatch(/^sbx_/);
    const id = ready.sandboxId;

    const written = await sessions.writeFile(id, TENANT, '/work/in.txt', bytesOf('hello from the caller\n'));
    expect(written).toMatchObject({ path: '/work/in.txt', bytes: 22 });

    const chunks: string[] = [];
    const run = await sessions.exec(id, TENANT, { argv: ['cat', '/work/in.txt'] }, (stream, chunk) => chunks.push(`${stream}:${text(chunk)}`));
    expect(run).toMatchObject({ exitCode: 0, stdoutBytes: 22, stderrBytes: 0, truncated: false, limitHit: null, errorCode: null, sandboxDestroyed: false });
    expect(text(run.stdout)).toBe('hello from the caller\n');
    expect(chunks).toEqual(['stdout:hello from the caller\n']);

    const withStdin = await sessions.exec(id, TENANT, { argv: ['sh', '-c', 'tr a-z A-Z > /out/up.txt; echo "$GREETING" >&2'], env: { GREETING: 'hi' }, stdin: bytesOf('shout\n') });
    expect(withStdin).toMatchObject({ exitCode: 0 });
    expect(text(withStdin.stderr)).toBe('hi\n');
    const read = await sessions.readFile(id, TENANT, '/out/up.txt');
    expect(text(read.content)).toBe('SHOUT\n');
    expect(read.bytes).toBe(6);

    await sessions.destroy(id, TENANT, 'key:t1');
    await sessions.destroy(id, TENANT, 'key:t1'); // idempotent
    const chain = await chainUntil(id, 'run.sealed');
    expect(chain.map((r) => r.type)).toEqual([
      'sandbox.requested',
      'policy.decided',
      'run.scheduled',
      'sandbox.created',
      'sandbox.file.written',
      'sandbox.exec.started',
      'sandbox.exec.completed',
      'sandbox.exec.started',
      'sandbox.exec.completed',
      'sandbox.file.read',
      'sandbox.destroyed',
      'run.sealed',
    ]);
    expect(chain[6]).toMatchObject({ seq: run.seq, exit_code: 0, stdout_sha256: run.stdoutSha256 });
    expect(chain[7]).toMatchObject({ env_names: ['GREETING'] });
    expect(JSON.stringify(chain)).not.toContain('"hi"');
    expect(chain.at(-2)).toMatchObject({ reason: 'deleted', verified_gone: true });
    expect(chain.at(-1)).toMatchObject({ final_state: 'SEALED' });
    expect(verifyChain(chain)).toMatchObject({ ok: true });
    expect(foldSandbox(chain)).toMatchObject({ state: 'DESTROYED', destroyReason: 'deleted', operations: 4, sealed: true });
    // After the seal every operation is refused.
    expect(await refusal(sessions.exec(id, TENANT, { argv: ['true'] }))).toMatchObject({ code: 'E_CONFLICT', details: { state: 'DESTROYED' } });
    expect(await containers()).toEqual([]);
  }, 90_000);

  it('streams output live: a line reaches onOutput while the program still runs; a key split across two writes never goes out in clear', async () => {
    const id = await create();
    const seen: { at: number; stream: string; text: string }[] = [];
    const t0 = performance.now();
    const run = await sessions.exec(id, TENANT, { argv: ['sh', '-c', 'echo first; sleep 1; echo second >&2; echo third'] }, (stream, chunk) =>
      seen.push({ at: performance.now() - t0, stream, text: text(chunk) }),
    );
    const endedAt = performance.now() - t0;
    // Each stream in order (between two pipes, what is written at the same moment may arrive either way).
    expect(seen.filter((s) => s.stream === 'stdout').map((s) => s.text)).toEqual(['first\n', 'third\n']);
    expect(seen.filter((s) => s.stream === 'stderr').map((s) => s.text)).toEqual(['second\n']);
    expect(seen[0]).toMatchObject({ stream: 'stdout', text: 'first\n' });
    // The first line came out while the program slept: well before the exec's answer.
    expect(endedAt - seen[0]!.at).toBeGreaterThan(700);
    expect(text(run.stdout)).toBe('first\nthird\n');
    expect(text(run.stderr)).toBe('second\n');

    const key = `ghp_${'a1B2c3D4e5'.repeat(3)}XyZ789`;
    const chunks: string[] = [];
    const leaked = await sessions.exec(
      id,
      TENANT,
      { argv: ['sh', '-c', `printf 'token: ${key.slice(0, 14)}'; sleep 0.5; printf '${key.slice(14)} done\\n'; echo after`] },
      (_stream, chunk) => chunks.push(text(chunk)),
    );
    expect(chunks.join('')).toBe('token: [REDACTED:github-token] done\nafter\n');
    for (const chunk of chunks) expect(chunk).not.toContain('ghp_');
    expect(text(leaked.stdout)).toBe(chunks.join(''));
    // A secret seen ends the session as it ends a run: recorded, alerted, failed, destroyed.
    expect(leaked).toMatchObject({ exitCode: 0, errorCode: 'E_SECRET_SEEN', sandboxDestroyed: true });
    const chain = await chainOf(id);
    const completed = chain.findLast((r) => r.type === 'sandbox.exec.completed');
    expect(completed).toMatchObject({ stdout_sha256: leaked.stdoutSha256, redactions: [{ stream: 'stdout', pattern: 'github-token', count: 1 }] });
    const after = chain.slice(chain.indexOf(completed!)).map((r) => r.type).filter((type) => type !== 'run.sealed');
    expect(after).toEqual(['sandbox.exec.completed', 'secret.redacted', 'alert.raised', 'run.failed', 'sandbox.destroyed']);
    expect(chain.find((r) => r.type === 'secret.redacted')).toMatchObject({ where: 'stdout', pattern: 'github-token', count: 1 });
    expect(chain.find((r) => r.type === 'run.failed')).toMatchObject({ error_code: 'E_SECRET_SEEN' });
    expect(chain.find((r) => r.type === 'sandbox.destroyed')).toMatchObject({ reason: 'failed', verified_gone: true });
    expect(await refusal(sessions.exec(id, TENANT, { argv: ['true'] }))).toMatchObject({ code: 'E_CONFLICT' });
  }, 90_000);

  it('refuses .. and symbolic links on the path (inside the sandbox), a missing file, and another tenant', async () => {
    const id = await create();
    expect(await refusal(sessions.readFile(id, TENANT, '/work/../etc/passwd'))).toMatchObject({ code: 'E_INPUT' });
    expect(await refusal(sessions.writeFile(id, TENANT, '/etc/evil', bytesOf('x')))).toMatchObject({ code: 'E_INPUT' });
    await sessions.exec(id, TENANT, { argv: ['sh', '-c', 'ln -s /etc /work/etc && ln -s /etc/passwd /work/pw && mkdir -p /work/d && ln -s /run /work/d/r'] });
    expect(await refusal(sessions.readFile(id, TENANT, '/work/etc/passwd'))).toMatchObject({ code: 'E_INPUT' });
    expect(await refusal(sessions.readFile(id, TENANT, '/work/pw'))).toMatchObject({ code: 'E_INPUT' });
    expect(await refusal(sessions.writeFile(id, TENANT, '/work/etc/x', bytesOf('x')))).toMatchObject({ code: 'E_INPUT' });
    expect(await refusal(sessions.writeFile(id, TENANT, '/work/d/r/secrets/x', bytesOf('x')))).toMatchObject({ code: 'E_INPUT' });
    expect(await refusal(sessions.readFile(id, TENANT, '/work/d'))).toMatchObject({ code: 'E_INPUT' });
    expect(await refusal(sessions.readFile(id, TENANT, '/work/nothing'))).toMatchObject({ code: 'E_NOT_FOUND' });
    expect(await refusal(sessions.exec(id, 'other', { argv: ['true'] }))).toMatchObject({ code: 'E_NOT_FOUND' });
    expect(await refusal(sessions.exec('sbx_nonesuch', TENANT, { argv: ['true'] }))).toMatchObject({ code: 'E_NOT_FOUND' });
    const chain = await chainOf(id);
    expect(chain.filter((r) => r.type === 'sandbox.file.written' || r.type === 'sandbox.file.read')).toEqual([]);
    await sessions.destroy(id, TENANT, 'key:t1');
  }, 90_000);

  it('refuses to read a 1 TiB sparse file at once (E_TOO_LARGE): sized first, nothing streamed or recorded, the session lives on', async () => {
    const id = await create();
    await sessions.exec(id, TENANT, { argv: ['sh', '-c', 'truncate -s 1099511627776 /out/big && echo small > /out/small'] });
    const started = performance.now();
    expect(await refusal(sessions.readFile(id, TENANT, '/out/big'))).toMatchObject({ code: 'E_TOO_LARGE' });
    expect(performance.now() - started).toBeLessThan(5000);
    expect(text((await sessions.readFile(id, TENANT, '/out/small')).content)).toBe('small\n');
    const reads = (await chainOf(id)).filter((r) => r.type === 'sandbox.file.read');
    expect(reads).toEqual([expect.objectContaining({ path: '/out/small' })]);
    await sessions.destroy(id, TENANT, 'key:t1');
  }, 90_000);

  it('serializes operations on one sandbox: two concurrent execs never interleave', async () => {
    const id = await create();
    const [slow, fast] = await Promise.all([
      sessions.exec(id, TENANT, { argv: ['sh', '-c', 'echo one; sleep 0.4; echo two'] }),
      sessions.exec(id, TENANT, { argv: ['echo', 'three'] }),
    ]);
    expect(text(slow.stdout)).toBe('one\ntwo\n');
    expect(text(fast.stdout)).toBe('three\n');
    const ops = (await chainOf(id)).filter((r) => r.type.startsWith('sandbox.exec.'));
    expect(ops.map((r) => r.type)).toEqual(['sandbox.exec.started', 'sandbox.exec.completed', 'sandbox.exec.started', 'sandbox.exec.completed']);
    const ids = ops.map((r) => (r as { exec_id: string }).exec_id);
    expect(ids[0]).toBe(ids[1]);
    expect(ids[2]).toBe(ids[3]);
    await sessions.destroy(id, TENANT, 'key:t1');
  }, 90_000);

  it('an op delivered twice (its ack lost) is performed once: the command runs once, one pair of receipts, the repeat answered as the first', async () => {
    const id = await create();
    const inbox = `_INBOX.${uniqueName('redeliver')}`;
    const ends: OpEnd[] = [];
    const sub = nc.subscribe(inbox, {
      callback: (_error, msg) => {
        if (msg.headers?.get(OP_MESSAGE_HEADER) === 'end') ends.push(JSON.parse(text(msg.data)) as OpEnd);
      },
    });
    const op: SandboxOp = { op_id: uniqueName('op'), sandbox_id: id, tenant: TENANT, reply_to: inbox, op: { kind: 'exec', exec_id: uniqueName('exec'), argv: ['sh', '-c', 'echo x >> /work/count; wc -l < /work/count'] } };
    const js = jetstream(nc);
    // As JetStream redelivers: the same op twice (two messages, so the stream's own de-duplication does not drop one).
    await js.publish(opSubject(env.CAIRN_COMMAND_SUBJECT_PREFIX!, workerId), JSON.stringify(op), { msgID: `${op.op_id}-1` });
    await js.publish(opSubject(env.CAIRN_COMMAND_SUBJECT_PREFIX!, workerId), JSON.stringify(op), { msgID: `${op.op_id}-2` });
    await expect.poll(() => ends.length, { timeout: 30_000 }).toBe(2);
    sub.unsubscribe();
    expect(ends[0]).toMatchObject({ ok: true });
    expect(ends[1]).toEqual({ ...ends[0], chunks: { stdout: 0, stderr: 0, data: 0 } });
    const count = await sessions.exec(id, TENANT, { argv: ['cat', '/work/count'] });
    expect(text(count.stdout)).toBe('x\n');
    const execs = (await chainOf(id)).filter((r) => r.type.startsWith('sandbox.exec.') && (r as { exec_id: string }).exec_id === (op.op as { exec_id: string }).exec_id);
    expect(execs.map((r) => r.type)).toEqual(['sandbox.exec.started', 'sandbox.exec.completed']);
    await sessions.destroy(id, TENANT, 'key:t1');
  }, 90_000);

  it('a second op naming a used exec id is refused E_CONFLICT, its command never run: one exec, one pair of receipts', async () => {
    const id = await create();
    const inbox = `_INBOX.${uniqueName('reused')}`;
    const ends: OpEnd[] = [];
    const sub = nc.subscribe(inbox, {
      callback: (_error, msg) => {
        if (msg.headers?.get(OP_MESSAGE_HEADER) === 'end') ends.push(JSON.parse(text(msg.data)) as OpEnd);
      },
    });
    const execId = uniqueName('exec');
    const opOf = (opId: string, line: string): SandboxOp => ({ op_id: opId, sandbox_id: id, tenant: TENANT, reply_to: inbox, op: { kind: 'exec', exec_id: execId, argv: ['sh', '-c', `echo ${line} >> /work/log`] } });
    const js = jetstream(nc);
    const subject = opSubject(env.CAIRN_COMMAND_SUBJECT_PREFIX!, workerId);
    await js.publish(subject, JSON.stringify(opOf(uniqueName('op'), 'first')));
    await expect.poll(() => ends.length, { timeout: 30_000 }).toBe(1);
    await js.publish(subject, JSON.stringify(opOf(uniqueName('op'), 'second')));
    await expect.poll(() => ends.length, { timeout: 30_000 }).toBe(2);
    sub.unsubscribe();
    expect(ends[0]).toMatchObject({ ok: true });
    expect(ends[1]).toMatchObject({ ok: false, error: { code: 'E_CONFLICT', details: { execId } } });
    expect(text((await sessions.exec(id, TENANT, { argv: ['cat', '/work/log'] })).stdout)).toBe('first\n');
    const execs = (await chainOf(id)).filter((r) => r.type.startsWith('sandbox.exec.') && (r as { exec_id: string }).exec_id === execId);
    expect(execs.map((r) => r.type)).toEqual(['sandbox.exec.started', 'sandbox.exec.completed']);
    await sessions.destroy(id, TENANT, 'key:t1');
  }, 90_000);

  it("the exec's own timeout kills the program's session and leaves the sandbox READY", async () => {
    const id = await create();
    const outcome = await sessions.exec(id, TENANT, { argv: ['sh', '-c', 'sleep 30 & sleep 31; :'], timeoutSeconds: 1 });
    expect(outcome).toMatchObject({ limitHit: 'E_TIMEOUT', errorCode: 'E_TIMEOUT', sandboxDestroyed: false, exitCode: null });
    const after = await sessions.exec(id, TENANT, { argv: ['sh', '-c', 'ps -o args | grep "sleep 3[01]" || echo none'] });
    expect(text(after.stdout)).toBe('none\n');
    const chain = await chainOf(id);
    expect(chain.find((r) => r.type === 'sandbox.exec.completed')).toMatchObject({ error_code: 'E_TIMEOUT', limits_hit: [], signal: 'SIGKILL' });
    expect(foldSandbox(chain)).toMatchObject({ state: 'READY', errorCode: null });
    await sessions.destroy(id, TENANT, 'key:t1');
  }, 90_000);

  it('a cap hit (the wall time) destroys the sandbox, answered with limitHit and recorded as reason limit', async () => {
    const id = await create({ caps: { wallSeconds: 1 } });
    const outcome = await sessions.exec(id, TENANT, { argv: ['sleep', '30'] });
    expect(outcome).toMatchObject({ limitHit: 'E_TIMEOUT', errorCode: 'E_TIMEOUT', sandboxDestroyed: true, exitCode: null });
    const chain = await chainUntil(id, 'run.sealed');
    expect(chain.map((r) => r.type).slice(-3)).toEqual(['sandbox.exec.completed', 'sandbox.destroyed', 'run.sealed']);
    expect(chain.at(-2)).toMatchObject({ reason: 'limit', verified_gone: true });
    expect(foldSandbox(chain)).toMatchObject({ state: 'DESTROYED', destroyReason: 'limit', errorCode: 'E_TIMEOUT' });
    expect(await refusal(sessions.exec(id, TENANT, { argv: ['true'] }))).toMatchObject({ code: 'E_CONFLICT' });
  }, 90_000);

  it('reaps on its time to live and on its idle limit, recording why', async () => {
    const ttl = await create({ ttlSeconds: 2 });
    const idle = await create({ ttlSeconds: 120, idleSeconds: 1 });
    await sessions.exec(idle, TENANT, { argv: ['true'] });
    const ttlChain = await chainUntil(ttl, 'run.sealed');
    const idleChain = await chainUntil(idle, 'run.sealed');
    expect(ttlChain.map((r) => r.type).slice(-3)).toEqual(['sandbox.expired', 'sandbox.destroyed', 'run.sealed']);
    expect(ttlChain.at(-3)).toMatchObject({ cause: 'ttl', ttl_seconds: 2 });
    expect(ttlChain.at(-2)).toMatchObject({ reason: 'ttl', verified_gone: true });
    expect(idleChain.at(-3)).toMatchObject({ cause: 'idle', idle_seconds: 1 });
    expect(idleChain.at(-2)).toMatchObject({ reason: 'idle', verified_gone: true });
    expect(foldSandbox(idleChain)).toMatchObject({ state: 'DESTROYED', destroyReason: 'idle', operations: 1 });
    expect(verifyChain(ttlChain)).toMatchObject({ ok: true });
  }, 90_000);

  it('a create whose caller gave up is deleted on the record before the error is answered: it never comes alive, no container is left', async () => {
    const error = await refusal(sessions.create({ tenant: TENANT, requestedBy: 'key:t1', spec: { ttlSeconds: 300, idleSeconds: 600 } }, 5));
    // Not placed in 5 ms (E_UNAVAILABLE), or placed and not started (E_SANDBOX_START): deleted either way.
    expect(['E_UNAVAILABLE', 'E_SANDBOX_START']).toContain(error.code);
    expect(error.message).toMatch(/it is deleted/);
    const id = (error.details as { sandboxId: string }).sandboxId;
    expect(id).toMatch(/^sbx_/);
    const chain = await chainUntil(id, 'run.sealed');
    const types = chain.map((r) => r.type);
    expect(types[0]).toBe('sandbox.requested');
    expect(types.includes('run.cancelled') || chain.some((r) => r.type === 'sandbox.destroyed' && (r as { reason?: string }).reason === 'deleted')).toBe(true);
    expect(foldSandbox(chain)).toMatchObject({ state: 'DESTROYED' });
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect((await chainOf(id)).map((r) => r.type)).toEqual(types);
    // A runtime that was starting it finds its `sandbox.created` refused and removes what it made:
    // on a loaded host that start may still be under way when the chain is sealed.
    await expect.poll(() => containers(), { timeout: 30_000, interval: 200 }).not.toContain(`cairn-${id}-1`);

    // Under an Idempotency-Key the deleted one made nothing: a retry is a new try, answered with a new sandbox.
    const key = uniqueName('late');
    const late = await refusal(sessions.create({ tenant: TENANT, requestedBy: 'key:t1', spec: { ttlSeconds: 300 }, idempotencyKey: key }, 5));
    const lateId = (late.details as { sandboxId: string }).sandboxId;
    await chainUntil(lateId, 'run.sealed');
    const retried = await sessions.create({ tenant: TENANT, requestedBy: 'key:t1', spec: { ttlSeconds: 300 }, idempotencyKey: key }, 60_000);
    created.push(retried.sandboxId);
    expect(retried.sandboxId).not.toBe(lateId);
    expect(text((await sessions.exec(retried.sandboxId, TENANT, { argv: ['echo', 'kept'] })).stdout)).toBe('kept\n');
    // The same key again answers that one, not a third.
    expect((await sessions.create({ tenant: TENANT, requestedBy: 'key:t1', spec: { ttlSeconds: 300 }, idempotencyKey: key }, 60_000)).sandboxId).toBe(retried.sandboxId);
    expect(foldSandbox(await chainOf(lateId))).toMatchObject({ state: 'DESTROYED' });
    await expect.poll(() => containers(), { timeout: 30_000, interval: 200 }).not.toContain(`cairn-${lateId}-1`);
    await sessions.destroy(retried.sandboxId, TENANT, 'key:t1');
  }, 120_000);

  it('a policy denial: E_POLICY_DENIED, no sandbox, the chain sealed REJECTED', async () => {
    const error = await refusal(create({ image: 'evil/miner:1' }));
    expect(error).toMatchObject({ code: 'E_POLICY_DENIED' });
    const id = (error.details as { sandboxId: string }).sandboxId;
    const chain = await chainUntil(id, 'run.sealed');
    expect(chain.map((r) => r.type)).toEqual(['sandbox.requested', 'policy.decided', 'run.sealed']);
    expect(chain.at(-1)).toMatchObject({ final_state: 'REJECTED', error_code: 'E_POLICY_DENIED' });
  }, 60_000);

  it('create is idempotent under an Idempotency-Key; the same key with another body is refused', async () => {
    const key = uniqueName('idem');
    const first = await sessions.create({ tenant: TENANT, requestedBy: 'key:t1', spec: { ttlSeconds: 300 }, idempotencyKey: key }, 60_000);
    const again = await sessions.create({ tenant: TENANT, requestedBy: 'key:t1', spec: { ttlSeconds: 300 }, idempotencyKey: key }, 60_000);
    expect(again.sandboxId).toBe(first.sandboxId);
    expect(again.seq).toBe(first.seq);
    expect(await refusal(sessions.create({ tenant: TENANT, requestedBy: 'key:t1', spec: { ttlSeconds: 301 }, idempotencyKey: key }, 10_000))).toMatchObject({ code: 'E_IDEMPOTENCY_MISMATCH' });
    expect((await sessions.exec(first.sandboxId, TENANT, { argv: ['true'] })).exitCode).toBe(0);
    await sessions.destroy(first.sandboxId, TENANT, 'key:t1');
    await chainUntil(first.sandboxId, 'run.sealed');
    // Used, then deleted: the key still names it, and it is never answered as ready again.
    expect(await refusal(sessions.create({ tenant: TENANT, requestedBy: 'key:t1', spec: { ttlSeconds: 300 }, idempotencyKey: key }, 10_000))).toMatchObject({
      code: 'E_CONFLICT',
      details: { sandboxId: first.sandboxId, state: 'DESTROYED' },
    });
  }, 90_000);

  it('a sandbox made and deleted unused frees its Idempotency-Key: a retry is a new sandbox', async () => {
    const key = uniqueName('unused');
    const first = await sessions.create({ tenant: TENANT, requestedBy: 'key:t1', spec: { ttlSeconds: 300 }, idempotencyKey: key }, 60_000);
    await sessions.destroy(first.sandboxId, TENANT, 'key:t1');
    await chainUntil(first.sandboxId, 'run.sealed');
    const second = await sessions.create({ tenant: TENANT, requestedBy: 'key:t1', spec: { ttlSeconds: 300 }, idempotencyKey: key }, 60_000);
    created.push(second.sandboxId);
    expect(second.sandboxId).not.toBe(first.sandboxId);
    expect(second.duplicate).toBe(false);
    await sessions.destroy(second.sandboxId, TENANT, 'key:t1');
  }, 90_000);

  it('measures create → ready and exec through openSandboxSessions (warm pool on) beside a raw docker exec', async () => {
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    const ROUNDS = 9;
    const createMs: number[] = [];
    const firstOutputMs: number[] = [];
    const firstAnswerMs: number[] = [];
    const ids: string[] = [];
    const calledAt: number[] = [];
    const readyAt: number[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      calledAt.push(Date.now());
      const t0 = performance.now();
      const id = await create();
      createMs.push(performance.now() - t0);
      readyAt.push(Date.now());
      let firstOutput = 0;
      const out = await sessions.exec(id, TENANT, { argv: ['echo', 'ready'] }, () => (firstOutput ||= performance.now() - t0));
      firstOutputMs.push(firstOutput);
      firstAnswerMs.push(performance.now() - t0);
      expect(text(out.stdout)).toBe('ready\n');
      // A session holds its worker slot (and its cpus) for its life: only one is kept for the execs below.
      if (i === 0) ids.push(id);
      else await sessions.destroy(id, TENANT, 'key:t1');
    }
    const id = ids[0]!;
    const execMs: number[] = [];
    const rawMs: number[] = [];
    for (let i = 0; i < ROUNDS * 2; i++) {
      const t0 = performance.now();
      const out = await sessions.exec(id, TENANT, { argv: ['echo', 'hi'] });
      execMs.push(performance.now() - t0);
      expect(text(out.stdout)).toBe('hi\n');
      const t1 = performance.now();
      const raw = await execFileAsync('docker', ['exec', `cairn-${id}-1`, 'echo', 'hi']);
      rawMs.push(performance.now() - t1);
      expect(raw.stdout).toBe('hi\n');
    }
    for (const sandbox of ids) await sessions.destroy(sandbox, TENANT, 'key:t1');
    // Each hop of the create, from the receipts' own times (ms; one clock, this host's).
    const hops: Record<string, number[]> = { call_to_requested: [], requested_to_decided: [], decided_to_scheduled: [], scheduled_to_created: [], created_to_ready: [] };
    for (const [i, sandbox] of created.slice(-ROUNDS).entries()) {
      const chain = await chainOf(sandbox);
      const at = (type: string) => Date.parse(chain.find((r) => r.type === type)?.ts ?? 'x');
      hops.call_to_requested!.push(at('sandbox.requested') - calledAt[i]!);
      hops.created_to_ready!.push(readyAt[i]! - at('sandbox.created'));
      hops.requested_to_decided!.push(at('policy.decided') - at('sandbox.requested'));
      hops.decided_to_scheduled!.push(at('run.scheduled') - at('policy.decided'));
      hops.scheduled_to_created!.push(at('sandbox.created') - at('run.scheduled'));
    }
    const figures = {
      ...Object.fromEntries(Object.entries(hops).map(([hop, ms]) => [`${hop}_p50_ms`, Math.round(median(ms))])),
      create_to_ready_p50_ms: Math.round(median(createMs)),
      create_to_first_output_p50_ms: Math.round(median(firstOutputMs)),
      create_to_first_exec_answer_p50_ms: Math.round(median(firstAnswerMs)),
      exec_p50_ms: Math.round(median(execMs)),
      raw_docker_exec_p50_ms: Math.round(median(rawMs)),
    };
    process.stderr.write(`sandbox session latency: ${JSON.stringify(figures)}\n`);
    expect(Object.values(figures).every((ms) => Number.isFinite(ms) && ms > 0)).toBe(true);
  }, 180_000);

  it('an input error creates nothing', async () => {
    expect(await refusal(sessions.create({ tenant: TENANT, requestedBy: 'key:t1', spec: { ttlSeconds: -1 } }, 10_000))).toMatchObject({ code: 'E_INPUT' });
  });

  it('sessions claim warm sandboxes, renamed to their chain, never reused', async () => {
    await create(); // makes the profile the pool's most recent
    const end = Date.now() + 20_000;
    while ((await allContainers()).length - (await containers()).length < 2 && Date.now() < end) await new Promise((resolve) => setTimeout(resolve, 100));
    const id = await create();
    // The rename to the chain's name goes on while sandbox.created is recorded; the first op waits for it.
    await sessions.exec(id, TENANT, { argv: ['true'] });
    const chain = await chainOf(id);
    const created = chain.find((r) => r.type === 'sandbox.created') as { container_name: string } | undefined;
    expect(created?.container_name).toBe(`cairn-${id}-1`);
    const listed = await docker.listContainers({ all: true, filters: { label: [`io.cairn.worker=${workerId}`] } });
    const mine = listed.find((c) => c.Names.includes(`/cairn-${id}-1`));
    // A warm one: it carries its pool's label, and the run's name.
    expect(mine?.Labels['io.cairn.pool']).toBeDefined();
    await sessions.destroy(id, TENANT, 'key:t1');
    expect((await docker.listContainers({ all: true, filters: { id: [mine!.Id] } })).length).toBe(0);
  }, 60_000);

  it('a runtime that stops ends its live sessions on the record (worker_lost), and leaves no container and no live session behind', async () => {
    const host = runtime.app.get(SandboxSessionHost);
    const orphan = await create();
    for (const sandbox of await liveSandboxes()) if (sandbox !== orphan) await sessions.destroy(sandbox, TENANT, 'key:t1');
    const end = Date.now() + 20_000;
    while (host.liveCount > 1 && Date.now() < end) await new Promise((resolve) => setTimeout(resolve, 100));
    expect(host.liveCount).toBe(1);
    await runtime.stop();
    expect(host.liveCount).toBe(0);
    expect(await allContainers()).toEqual([]);
    const chain = await chainUntil(orphan, 'run.sealed');
    expect(chain.map((r) => r.type).slice(-2)).toEqual(['sandbox.destroyed', 'run.sealed']);
    expect(chain.at(-2)).toMatchObject({ reason: 'worker_lost', verified_gone: true });
    expect(foldSandbox(chain)).toMatchObject({ state: 'DESTROYED', destroyReason: 'worker_lost', sealed: true });
  }, 60_000);
});
