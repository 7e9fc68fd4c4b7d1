import 'reflect-metadata';
import { loadConfig } from '@cairn/config';
import type { ApproveRunCommand, CommandReply, ReceiptEnvelope, RunSpec } from '@cairn/contracts';
import { sha256Hex } from '@cairn/evidence';
import { EvidenceLog } from '@cairn/evidence-log';
import { foldRun } from '@cairn/lifecycle';
import { CommandBus } from '@cairn/operational';
import { startService } from '@cairn/service-kit';
import type { RunningService } from '@cairn/service-kit';
import { createTestDatabase, testNatsUrl, uniqueName } from '@cairn/testing';
import type { TestDatabase } from '@cairn/testing';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IntakeConfigSchema } from '../src/intake.config.js';
import type { IntakeConfig } from '../src/intake.config.js';
import { INTAKE_SERVICE, intakeModule } from '../src/intake.module.js';

/* The approve command on the real command stream, evidence stream and intake service. */

let nc: NatsConnection;
let db: TestDatabase;
let config: IntakeConfig;
let intake: RunningService;
let bus: CommandBus;
let log: EvidenceLog;

const SUBMITTER = 'key:submitter';
const APPROVER = 'key:approver';
const SPEC: RunSpec = { name: 'held', steps: [{ argv: ['echo', 'hello'] }] };
const CAPS = { wall_seconds: 60, memory_mib: 256, pids: 64, disk_mib: 256, cpus: 1 };

async function chain(runId: string): Promise<ReceiptEnvelope[]> {
  const out: ReceiptEnvelope[] = [];
  for await (const stored of log.readChain(runId)) out.push(stored.receipt);
  return out;
}

/** A run submitted by SUBMITTER that policy held for `approvals` (run scope). */
async function heldRun(approvals: string[] = ['image']): Promise<string> {
  const reply = await bus.send(
    'submit',
    { tenant: 'acme', submitted_by: SUBMITTER, idempotency_key_sha256: sha256Hex(uniqueName('idem')), spec: SPEC },
    { msgId: uniqueName('submit'), timeoutMs: 10_000 },
  );
  if (!reply.ok) throw new Error(JSON.stringify(reply));
  const runId = reply.run_id;
  const decided = { decision: 'hold', policy_version: 'c'.repeat(64), reasons: ['awaiting approval'], caps: CAPS, image: 'cairn/sandbox-busybox:1' };
  const head = await log.append(runId, { type: 'policy.decided', actor: 'policy', tenant: 'acme', causation: `${runId}:1`, fields: decided });
  for (const id of approvals) {
    const fields = { approval_id: id, scope: 'run', step_index: null, reason: `${id} needs approval`, expires_at: '2030-01-01T00:00:00.000Z' };
    await log.append(runId, { type: 'approval.requested', actor: 'policy', tenant: 'acme', causation: `${runId}:${head.receipt.seq}`, key: id, fields });
  }
  return runId;
}

function approve(runId: string, extra: Partial<ApproveRunCommand> = {}): Promise<CommandReply> {
  const command: ApproveRunCommand = { tenant: 'acme', run_id: runId, decided_by: APPROVER, decision: 'approve', ...extra };
  return bus.send('approve', command, { msgId: uniqueName('approve'), timeoutMs: 10_000 });
}

beforeAll(async () => {
  nc = await connect({ servers: testNatsUrl() });
  db = await createTestDatabase('intake_approve');
  config = loadConfig(IntakeConfigSchema, {
    CAIRN_NATS_URL: testNatsUrl(),
    CAIRN_DATABASE_URL: db.url,
    CAIRN_EVIDENCE_STREAM: uniqueName('APPROVE_EVIDENCE').toUpperCase(),
    CAIRN_EVIDENCE_SUBJECT_PREFIX: uniqueName('approve_ev').toLowerCase(),
    CAIRN_COMMAND_STREAM: uniqueName('APPROVE_CMDS').toUpperCase(),
    CAIRN_COMMAND_SUBJECT_PREFIX: uniqueName('approve_cmd').toLowerCase(),
    CAIRN_INTAKE_DURABLE_PREFIX: uniqueName('intake'),
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

describe('intake: approve', () => {
  it('grants every pending approval, each caused by its request and naming the approver; a repeat is a duplicate', async () => {
    const runId = await heldRun(['egress', 'image']);
    expect(await approve(runId, { comment: 'looks fine' })).toEqual({ ok: true, run_id: runId, duplicate: false });
    const receipts = await chain(runId);
    const grants = receipts.filter((r) => r.type === 'approval.granted');
    expect(grants).toEqual([
      expect.objectContaining({ actor: 'intake', approval_id: 'egress', approved_by: APPROVER, comment: 'looks fine', causation: `${runId}:3` }),
      expect.objectContaining({ actor: 'intake', approval_id: 'image', approved_by: APPROVER, comment: 'looks fine', causation: `${runId}:4` }),
    ]);
    expect(foldRun(receipts)).toMatchObject({ state: 'AWAITING_APPROVAL', errorCode: null });
    expect(await approve(runId)).toEqual({ ok: true, run_id: runId, duplicate: true });
    expect(await chain(runId)).toHaveLength(receipts.length);
  });

  it('records a rejection, which ends the run CANCELLED with E_NO_APPROVAL; a later approval is E_CONFLICT', async () => {
    const runId = await heldRun();
    expect(await approve(runId, { decision: 'reject', comment: 'not today' })).toMatchObject({ ok: true, duplicate: false });
    const receipts = await chain(runId);
    expect(receipts.at(-1)).toMatchObject({ type: 'approval.rejected', approval_id: 'image', rejected_by: APPROVER, cause: 'rejected', comment: 'not today' });
    expect(foldRun(receipts)).toMatchObject({ state: 'CANCELLED', errorCode: 'E_NO_APPROVAL' });
    expect(await approve(runId)).toMatchObject({ ok: false, error: { code: 'E_CONFLICT' } });
  });

  it('refuses the key that submitted the run (E_FORBIDDEN), another tenant (E_NOT_FOUND), and appends nothing', async () => {
    const runId = await heldRun();
    const before = (await chain(runId)).length;
    expect(await approve(runId, { decided_by: SUBMITTER })).toMatchObject({ ok: false, error: { code: 'E_FORBIDDEN', details: { reason: 'self_approval' } } });
    expect(await approve(runId, { decided_by: SUBMITTER, decision: 'reject' })).toMatchObject({ ok: false, error: { code: 'E_FORBIDDEN' } });
    expect(await approve(runId, { tenant: 'globex' })).toMatchObject({ ok: false, error: { code: 'E_NOT_FOUND' } });
    expect(await approve(`run_${uniqueName('nope').toLowerCase()}`)).toMatchObject({ ok: false, error: { code: 'E_NOT_FOUND' } });
    expect(await chain(runId)).toHaveLength(before);
  });

  it('refuses a sealed run (E_SEALED), an approval that is not pending and a run that awaits none (E_CONFLICT)', async () => {
    const sealed = await heldRun();
    await approve(sealed, { decision: 'reject' });
    const head = (await chain(sealed)).at(-1)!;
    await log.append(sealed, {
      type: 'run.sealed',
      actor: 'grader',
      tenant: 'acme',
      causation: `${sealed}:${head.seq}`,
      fields: { final_state: 'CANCELLED', evidence_digest: head.hash, error_code: 'E_NO_APPROVAL' },
    });
    expect(await approve(sealed)).toMatchObject({ ok: false, error: { code: 'E_SEALED' } });

    const held = await heldRun(['image']);
    expect(await approve(held, { approval_id: 'egress' })).toMatchObject({ ok: false, error: { code: 'E_CONFLICT', message: expect.stringContaining('no approval egress') as string } });

    const reply = await bus.send(
      'submit',
      { tenant: 'acme', submitted_by: SUBMITTER, idempotency_key_sha256: sha256Hex(uniqueName('idem')), spec: SPEC },
      { msgId: uniqueName('submit'), timeoutMs: 10_000 },
    );
    if (!reply.ok) throw new Error(JSON.stringify(reply));
    expect(await approve(reply.run_id)).toMatchObject({ ok: false, error: { code: 'E_CONFLICT', message: expect.stringContaining('SUBMITTED') as string } });
  });

  it('two approvers at once: the approval is granted once, never twice', async () => {
    const runId = await heldRun();
    const replies = await Promise.all([approve(runId, { decided_by: 'key:one' }), approve(runId, { decided_by: 'key:two' })]);
    expect(replies.every((r) => r.ok || r.error.code === 'E_CONFLICT')).toBe(true);
    const grants = (await chain(runId)).filter((r) => r.type === 'approval.granted');
    expect(grants).toHaveLength(1);
  });

  it('refuses a comment with NUL as bad input before anything is sent', async () => {
    const runId = await heldRun();
    expect(await approve(runId, { comment: 'a\u0000b' })).toMatchObject({ ok: false, error: { code: 'E_INPUT' } });
  });
});
