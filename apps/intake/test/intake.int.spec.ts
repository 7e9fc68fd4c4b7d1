import 'reflect-metadata';
import { loadConfig } from '@cairn/config';
import type { ReceiptEnvelope, RunSpec, SubmitRunCommand } from '@cairn/contracts';
import { canonicalJson, sha256Hex } from '@cairn/evidence';
import { EvidenceLog } from '@cairn/evidence-log';
import { foldRun } from '@cairn/lifecycle';
import { CommandBus, REPLY_TO_HEADER } from '@cairn/operational';
import { startService } from '@cairn/service-kit';
import type { RunningService } from '@cairn/service-kit';
import { createTestDatabase, testNatsUrl, uniqueName } from '@cairn/testing';
import type { TestDatabase } from '@cairn/testing';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect, createInbox, headers } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { DataSource } from 'typeorm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CancelRunHandler } from '../src/cancel-run.handler.js';
import { IntakeConfigSchema } from '../src/intake.config.js';
import type { IntakeConfig } from '../src/intake.config.js';
import { INTAKE_SERVICE, intakeModule } from '../src/intake.module.js';

let nc: NatsConnection;
let db: TestDatabase;
let config: IntakeConfig;
let intake: RunningService;
let bus: CommandBus;
let log: EvidenceLog;

const SPEC: RunSpec = { name: 'hello', steps: [{ argv: ['echo', 'hello'] }] };

function key(): string {
  return sha256Hex(uniqueName('idempotency-key'));
}

function submit(overrides: Partial<SubmitRunCommand> = {}): SubmitRunCommand {
  return { tenant: 'acme', submitted_by: 'key:k1', idempotency_key_sha256: key(), spec: SPEC, ...overrides };
}

async function chain(runId: string): Promise<ReceiptEnvelope[]> {
  const out: ReceiptEnvelope[] = [];
  for await (const stored of log.readChain(runId)) out.push(stored.receipt);
  return out;
}

function okRunId(reply: Awaited<ReturnType<CommandBus['send']>>): string {
  if (!reply.ok) throw new Error(`expected ok, got ${JSON.stringify(reply)}`);
  return reply.run_id;
}

function sandboxCreated(runId: string) {
  return {
    container_name: `cairn-${runId}-1`,
    worker_id: 'w1',
    driver: 'docker',
    image: 'cairn/sandbox-busybox:1',
    image_digest: null,
    caps: { wall_seconds: 60, memory_mib: 256, pids: 64, disk_mib: 256, cpus: 1 },
    network: 'none',
  };
}

/** What policy, the scheduler and (unless `created` is false) the runtime append to a submitted run. */
async function startRunning(runId: string, created = true): Promise<void> {
  const decided = { decision: 'allow', policy_version: 'c'.repeat(64), reasons: [], caps: sandboxCreated(runId).caps, image: 'cairn/sandbox-busybox:1' };
  await log.append(runId, { type: 'policy.decided', actor: 'policy', tenant: 'acme', causation: `${runId}:1`, fields: decided });
  const scheduled = { worker_id: 'w1', lease_id: 'l1', lease_expires_at: '2030-01-01T00:00:00.000Z', attempt: 1 };
  await log.append(runId, { type: 'run.scheduled', actor: 'scheduler', tenant: 'acme', causation: `${runId}:2`, fields: scheduled });
  if (created) await log.append(runId, { type: 'sandbox.created', actor: 'runtime', tenant: 'acme', causation: `${runId}:3`, fields: sandboxCreated(runId) });
}

beforeAll(async () => {
  nc = await connect({ servers: testNatsUrl() });
  db = await createTestDatabase('intake_test');
  config = loadConfig(IntakeConfigSchema, {
    CAIRN_NATS_URL: testNatsUrl(),
    CAIRN_DATABASE_URL: db.url,
    CAIRN_EVIDENCE_STREAM: uniqueName('INTAKE_EVIDENCE').toUpperCase(),
    CAIRN_EVIDENCE_SUBJECT_PREFIX: uniqueName('intake_ev').toLowerCase(),
    CAIRN_COMMAND_STREAM: uniqueName('INTAKE_CMDS').toUpperCase(),
    CAIRN_COMMAND_SUBJECT_PREFIX: uniqueName('intake_cmd').toLowerCase(),
  });
  intake = await startService(INTAKE_SERVICE, intakeModule(config));
  bus = await CommandBus.open(nc, { stream: config.CAIRN_COMMAND_STREAM, subjectPrefix: config.CAIRN_COMMAND_SUBJECT_PREFIX });
  log = await EvidenceLog.fromConnection(nc, { servers: testNatsUrl(), stream: config.CAIRN_EVIDENCE_STREAM, subjectPrefix: config.CAIRN_EVIDENCE_SUBJECT_PREFIX });
});

afterAll(async () => {
  await intake?.stop();
  await log?.close();
  const jsm = await jetstreamManager(nc);
  await jsm.streams.delete(config.CAIRN_COMMAND_STREAM).catch(() => false);
  await jsm.streams.delete(config.CAIRN_EVIDENCE_STREAM).catch(() => false);
  await nc.close();
  await db?.drop();
});

describe('intake: submit', () => {
  it('creates a run: a new chain that starts with run.submitted', async () => {
    const command = submit();
    const reply = await bus.send('submit', command, { msgId: command.idempotency_key_sha256, timeoutMs: 10_000 });
    expect(reply).toMatchObject({ ok: true, duplicate: false });
    const runId = okRunId(reply);
    expect(runId).toMatch(/^run_[0-9a-z]{26}$/);
    const receipts = await chain(runId);
    expect(receipts).toHaveLength(1);
    expect(receipts[0]).toMatchObject({
      seq: 1,
      type: 'run.submitted',
      actor: 'intake',
      tenant: 'acme',
      causation: null,
      spec: SPEC,
      spec_sha256: sha256Hex(canonicalJson(SPEC)),
      submitted_by: 'key:k1',
      idempotency_key_sha256: command.idempotency_key_sha256,
    });
  });

  it('records the submitting key’s id and scopes the command carries as run.submitted’s principal; a command without one records none', async () => {
    const principal = { key_id: 'k1', scopes: ['runs:write' as const, 'secrets:use' as const] };
    const withPrincipal = okRunId(await bus.send('submit', submit({ principal }), { msgId: uniqueName('m') }));
    expect((await chain(withPrincipal))[0]).toMatchObject({ type: 'run.submitted', submitted_by: 'key:k1', principal });
    const without = okRunId(await bus.send('submit', submit(), { msgId: uniqueName('m') }));
    expect((await chain(without))[0]).not.toHaveProperty('principal');
  });

  it('answers a resubmission (same key, same body) with the same run and appends nothing', async () => {
    const command = submit();
    const first = okRunId(await bus.send('submit', command, { msgId: command.idempotency_key_sha256 }));
    // Past JetStream's dedupe (another message id): the table decides.
    const again = await bus.send('submit', command, { msgId: `${command.idempotency_key_sha256}-retry` });
    expect(again).toEqual({ ok: true, run_id: first, duplicate: true });
    expect(await chain(first)).toHaveLength(1);
  });

  it('refuses the same key with another body (E_IDEMPOTENCY_MISMATCH) and appends nothing', async () => {
    const command = submit();
    const first = okRunId(await bus.send('submit', command, { msgId: uniqueName('m') }));
    const before = await log.lastStreamSeq();
    const reply = await bus.send('submit', { ...command, spec: { ...SPEC, name: 'different' } }, { msgId: uniqueName('m') });
    expect(reply).toMatchObject({ ok: false, error: { code: 'E_IDEMPOTENCY_MISMATCH' } });
    expect(await log.lastStreamSeq()).toBe(before);
    expect(await chain(first)).toHaveLength(1);
  });

  it('keys are per tenant', async () => {
    const command = submit();
    const a = okRunId(await bus.send('submit', command, { msgId: uniqueName('m') }));
    const b = okRunId(await bus.send('submit', { ...command, tenant: 'globex' }, { msgId: uniqueName('m') }));
    expect(a).not.toBe(b);
  });

  it('creates one run when the same submission arrives many times at once', async () => {
    const command = submit();
    const replies = await Promise.all(Array.from({ length: 6 }, () => bus.send('submit', command, { msgId: uniqueName('m') })));
    const ids = new Set(replies.map(okRunId));
    expect(ids.size).toBe(1);
    expect(replies.filter((r) => r.ok && !r.duplicate)).toHaveLength(1);
    expect(await chain([...ids][0]!)).toHaveLength(1);
  });

  it('fails closed on a spec that does not validate: E_INPUT naming the field, nothing appended', async () => {
    const before = await log.lastStreamSeq();
    // Straight onto the stream, as a gateway that skipped validation would.
    const inbox = createInbox();
    const sub = nc.subscribe(inbox, { max: 1 });
    const hdrs = headers();
    hdrs.set(REPLY_TO_HEADER, inbox);
    const bad = { ...submit(), spec: { name: 'bad', steps: [{ argv: 'rm -rf /' }], privileged: true } };
    await (await jetstreamManager(nc)).jetstream().publish(bus.subjectFor('submit'), JSON.stringify(bad), { headers: hdrs });
    let reply: unknown;
    for await (const msg of sub) reply = msg.json();
    expect(reply).toMatchObject({ ok: false, error: { code: 'E_INPUT' } });
    expect(JSON.stringify(reply)).toContain('spec.steps[0].argv');
    expect(JSON.stringify(reply)).toContain('spec.privileged');
    expect(await log.lastStreamSeq()).toBe(before);
  });

  it('finishes a submission that crashed between claiming the key and appending', async () => {
    const command = submit();
    const runId = 'run_0000000000crashedbeforeappend';
    const dataSource = intake.app.get(DataSource);
    await dataSource.query('INSERT INTO intake_idempotency (tenant, key_sha256, body_sha256, run_id) VALUES ($1, $2, $3, $4)', [
      command.tenant,
      command.idempotency_key_sha256,
      sha256Hex(canonicalJson(SPEC)),
      runId,
    ]);
    expect(await chain(runId)).toHaveLength(0);
    expect(await bus.send('submit', command, { msgId: uniqueName('m') })).toEqual({ ok: true, run_id: runId, duplicate: false });
    expect((await chain(runId)).map((r) => r.type)).toEqual(['run.submitted']);
  });

  it('keeps its table in its own migrations, matching its entity', async () => {
    const dataSource = intake.app.get(DataSource);
    const migrations = await dataSource.query<{ name: string }[]>('SELECT name FROM intake_migrations');
    expect(migrations.map((m) => m.name)).toEqual(['IntakeIdempotency1796100000000']);
    const pending = await dataSource.driver.createSchemaBuilder().log();
    expect(pending.upQueries.map((q) => q.query)).toEqual([]);
  });
});

describe('intake: cancel', () => {
  it('cancels a run that has not started running; a second cancel changes nothing', async () => {
    const runId = okRunId(await bus.send('submit', submit(), { msgId: uniqueName('m') }));
    const reply = await bus.send('cancel', { tenant: 'acme', run_id: runId, requested_by: 'key:k1', reason: 'changed my mind' }, { msgId: uniqueName('m') });
    expect(reply).toEqual({ ok: true, run_id: runId, duplicate: false });
    const receipts = await chain(runId);
    expect(receipts.map((r) => r.type)).toEqual(['run.submitted', 'run.cancelled']);
    expect(receipts[1]).toMatchObject({ actor: 'intake', cancelled_by: 'key:k1', reason: 'changed my mind', causation: null });
    expect(await bus.send('cancel', { tenant: 'acme', run_id: runId, requested_by: 'key:k2' }, { msgId: uniqueName('m') })).toEqual({
      ok: true,
      run_id: runId,
      duplicate: true,
    });
    expect(await chain(runId)).toHaveLength(2);
  });

  it('is E_NOT_FOUND for an unknown run and for another tenant’s run', async () => {
    const unknown = await bus.send('cancel', { tenant: 'acme', run_id: 'run_doesnotexist', requested_by: 'key:k1' }, { msgId: uniqueName('m') });
    expect(unknown).toMatchObject({ ok: false, error: { code: 'E_NOT_FOUND' } });
    const runId = okRunId(await bus.send('submit', submit(), { msgId: uniqueName('m') }));
    const foreign = await bus.send('cancel', { tenant: 'globex', run_id: runId, requested_by: 'key:k9' }, { msgId: uniqueName('m') });
    expect(foreign).toMatchObject({ ok: false, error: { code: 'E_NOT_FOUND' } });
    expect(await chain(runId)).toHaveLength(1);
  });

  it('asks a running run to stop (run.cancel_requested) instead of ending it; a second cancel changes nothing', async () => {
    const runId = okRunId(await bus.send('submit', submit(), { msgId: uniqueName('m') }));
    await startRunning(runId);
    const reply = await bus.send('cancel', { tenant: 'acme', run_id: runId, requested_by: 'key:k1', reason: 'taking too long' }, { msgId: uniqueName('m') });
    expect(reply).toEqual({ ok: true, run_id: runId, duplicate: false });
    const receipts = await chain(runId);
    expect(receipts.map((r) => r.type)).toEqual(['run.submitted', 'policy.decided', 'run.scheduled', 'sandbox.created', 'run.cancel_requested']);
    expect(receipts[4]).toMatchObject({ actor: 'intake', requested_by: 'key:k1', reason: 'taking too long', causation: null });
    expect(await bus.send('cancel', { tenant: 'acme', run_id: runId, requested_by: 'key:k2' }, { msgId: uniqueName('m') })).toEqual({
      ok: true,
      run_id: runId,
      duplicate: true,
    });
    expect(await chain(runId)).toHaveLength(5);
  });

  it('reads again when the run starts between its read and its append: asks the runtime instead of ending the run under it', async () => {
    const runId = okRunId(await bus.send('submit', submit(), { msgId: uniqueName('m') }));
    await startRunning(runId, false);
    // The runtime's `sandbox.created` lands right after intake has read the chain (SCHEDULED).
    let raced = false;
    const racing = new Proxy(log, {
      get(target, prop, receiver) {
        if (prop !== 'readChain') return Reflect.get(target, prop, receiver) as unknown;
        return async function* (chainId: string) {
          yield* target.readChain(chainId);
          if (!raced) {
            raced = true;
            await target.append(chainId, { type: 'sandbox.created', actor: 'runtime', tenant: 'acme', causation: `${chainId}:3`, fields: sandboxCreated(chainId) });
          }
        };
      },
    });
    const outcome = await new CancelRunHandler(racing).handle({ tenant: 'acme', run_id: runId, requested_by: 'key:k1' });
    expect(outcome).toEqual({ run_id: runId, duplicate: false });
    const types = (await chain(runId)).map((r) => r.type);
    expect(types).toEqual(['run.submitted', 'policy.decided', 'run.scheduled', 'sandbox.created', 'run.cancel_requested']);
    expect(foldRun(await chain(runId))?.state).toBe('RUNNING');
  });

  it('is E_SEALED for a sealed run and E_CONFLICT for one that ended otherwise', async () => {
    const sealed = okRunId(await bus.send('submit', submit(), { msgId: uniqueName('m') }));
    await bus.send('cancel', { tenant: 'acme', run_id: sealed, requested_by: 'key:k1' }, { msgId: uniqueName('m') });
    const [, cancelled] = await chain(sealed);
    await log.append(sealed, {
      type: 'run.sealed',
      actor: 'grader',
      tenant: 'acme',
      causation: `${sealed}:2`,
      fields: { final_state: 'CANCELLED', evidence_digest: cancelled!.hash },
    });
    expect(await bus.send('cancel', { tenant: 'acme', run_id: sealed, requested_by: 'key:k1' }, { msgId: uniqueName('m') })).toMatchObject({
      ok: false,
      error: { code: 'E_SEALED' },
    });

    const failed = okRunId(await bus.send('submit', submit(), { msgId: uniqueName('m') }));
    await log.append(failed, { type: 'run.failed', actor: 'runtime', tenant: 'acme', causation: `${failed}:1`, fields: { error_code: 'E_WORKER_LOST', message: 'gone' } });
    expect(await bus.send('cancel', { tenant: 'acme', run_id: failed, requested_by: 'key:k1' }, { msgId: uniqueName('m') })).toMatchObject({
      ok: false,
      error: { code: 'E_CONFLICT' },
    });
    expect(await chain(failed)).toHaveLength(2);
  });
});

describe('intake: regrade (ADR 0030)', () => {
  /** A submitted run taken to VERIFIED by the receipts the services append, then its judge's `grade.failed`. */
  async function verifiedWithFailedJudge(): Promise<string> {
    const runId = okRunId(await bus.send('submit', submit(), { msgId: uniqueName('m') }));
    await startRunning(runId);
    const append = (type: string, actor: string, fields: Record<string, unknown>) => log.append(runId, { type, actor, tenant: 'acme', causation: null, key: type, fields });
    await append('step.started', 'runtime', { step_index: 0, stage: 'step', tool: 'echo', argv: ['echo', 'hello'], workdir: '/work', env_names: [] });
    await append('step.completed', 'runtime', {
      step_index: 0, stage: 'step', tool: 'echo', argv: ['echo', 'hello'], exit_code: 0, signal: null, stdout_sha256: 'd'.repeat(64), stderr_sha256: 'e'.repeat(64),
      stdout_bytes: 6, stderr_bytes: 0, output_truncated: false, duration_ms: 5, limits_hit: [], redactions: [], artifact_hashes: {},
    });
    await append('sandbox.destroyed', 'runtime', { container_name: `cairn-${runId}-1`, verified_gone: true, reason: 'completed' });
    await append('run.executed', 'runtime', { steps_completed: 1, exit_codes: [0], artifact_hashes: {}, duration_ms: 5 });
    await append('kernel.facts', 'kernel', { facts: { exit_codes: [0] }, operations: ['exit_codes'] });
    await append('verification.completed', 'verifier', { verdict: 'SUPPORTS', chain_ok: true, head_hash: 'f'.repeat(64), receipts_checked: 9, invariants: [{ id: 'chain', ok: true }], checks: [] });
    await append('grade.failed', 'grader', { reason: 'judge quality: timed out', retryable: true, unscored: ['quality'], cause: 'timeout', criterion_id: 'quality', attempt: 1 });
    return runId;
  }

  it('records grade.requested on a verified run whose judge failed; a second request before the grader answers changes nothing', async () => {
    const runId = await verifiedWithFailedJudge();
    const before = (await chain(runId)).length;
    const reply = await bus.send('regrade', { tenant: 'acme', run_id: runId, requested_by: 'key:k1', reason: 'the judge is back' }, { msgId: uniqueName('m') });
    expect(reply).toEqual({ ok: true, run_id: runId, duplicate: false });
    const receipts = await chain(runId);
    expect(receipts).toHaveLength(before + 1);
    expect(receipts.at(-1)).toMatchObject({ type: 'grade.requested', actor: 'intake', requested_by: 'key:k1', reason: 'the judge is back', causation: null });
    expect(foldRun(receipts)?.state).toBe('VERIFIED');
    expect(await bus.send('regrade', { tenant: 'acme', run_id: runId, requested_by: 'key:k2' }, { msgId: uniqueName('m') })).toEqual({ ok: true, run_id: runId, duplicate: true });
    expect(await chain(runId)).toHaveLength(before + 1);
  });

  it('is E_NOT_FOUND for another tenant’s run, E_CONFLICT for a run whose grading has not failed, E_SEALED for a sealed run', async () => {
    const runId = await verifiedWithFailedJudge();
    expect(await bus.send('regrade', { tenant: 'globex', run_id: runId, requested_by: 'key:k9' }, { msgId: uniqueName('m') })).toMatchObject({ ok: false, error: { code: 'E_NOT_FOUND' } });
    const running = okRunId(await bus.send('submit', submit(), { msgId: uniqueName('m') }));
    await startRunning(running);
    expect(await bus.send('regrade', { tenant: 'acme', run_id: running, requested_by: 'key:k1' }, { msgId: uniqueName('m') })).toMatchObject({ ok: false, error: { code: 'E_CONFLICT' } });
    expect(await chain(running)).toHaveLength(4);

    const sealed = okRunId(await bus.send('submit', submit(), { msgId: uniqueName('m') }));
    await bus.send('cancel', { tenant: 'acme', run_id: sealed, requested_by: 'key:k1' }, { msgId: uniqueName('m') });
    const [, cancelled] = await chain(sealed);
    await log.append(sealed, { type: 'run.sealed', actor: 'grader', tenant: 'acme', causation: `${sealed}:2`, fields: { final_state: 'CANCELLED', evidence_digest: cancelled!.hash } });
    expect(await bus.send('regrade', { tenant: 'acme', run_id: sealed, requested_by: 'key:k1' }, { msgId: uniqueName('m') })).toMatchObject({ ok: false, error: { code: 'E_SEALED' } });
  });
});
