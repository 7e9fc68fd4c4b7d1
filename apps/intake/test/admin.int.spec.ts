import 'reflect-metadata';
import { loadConfig } from '@cairn/config';
import type { ReceiptEnvelope } from '@cairn/contracts';
import { verifyChain } from '@cairn/evidence';
import { EvidenceLog } from '@cairn/evidence-log';
import { foldAdminChain } from '@cairn/lifecycle';
import { CommandBus } from '@cairn/operational';
import type { CommandPayload, CommandReply, CommandVerb } from '@cairn/operational';
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

/* The admin commands on the real command stream, evidence stream and intake service (docs/adr/0011). */

let nc: NatsConnection;
let db: TestDatabase;
let config: IntakeConfig;
let intake: RunningService;
let bus: CommandBus;
let log: EvidenceLog;

const OPERATOR = 'key:operator';

async function chain(chainId: string): Promise<ReceiptEnvelope[]> {
  const out: ReceiptEnvelope[] = [];
  for await (const stored of log.readChain(chainId)) out.push(stored.receipt);
  return out;
}

function send<V extends CommandVerb>(verb: V, payload: CommandPayload<V>, msgId = uniqueName(verb)): Promise<CommandReply> {
  return bus.send(verb, payload, { msgId, timeoutMs: 10_000 });
}

function key(tenant: string, keyId: string) {
  return { tenant, requested_by: OPERATOR, key_id: keyId, prefix: 'abcdefgh', scopes: ['runs:read' as const], expires_at: '2030-01-01T00:00:00.000Z' };
}

beforeAll(async () => {
  nc = await connect({ servers: testNatsUrl() });
  db = await createTestDatabase('intake_admin');
  config = loadConfig(IntakeConfigSchema, {
    CAIRN_NATS_URL: testNatsUrl(),
    CAIRN_DATABASE_URL: db.url,
    CAIRN_EVIDENCE_STREAM: uniqueName('ADMIN_EVIDENCE').toUpperCase(),
    CAIRN_EVIDENCE_SUBJECT_PREFIX: uniqueName('admin_ev').toLowerCase(),
    CAIRN_COMMAND_STREAM: uniqueName('ADMIN_CMDS').toUpperCase(),
    CAIRN_COMMAND_SUBJECT_PREFIX: uniqueName('admin_cmd').toLowerCase(),
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

describe('intake: admin commands', () => {
  it("records a tenant and its keys' lives on adm_<tenant>, hash-chained; every repeat is a duplicate", async () => {
    const tenant = uniqueName('t').toLowerCase().replace(/[^a-z0-9_-]/g, '');
    const chainId = `adm_${tenant}`;
    expect(await send('tenant_create', { tenant, requested_by: OPERATOR })).toEqual({ ok: true, run_id: chainId, duplicate: false });
    expect(await send('key_create', key(tenant, 'k1'))).toEqual({ ok: true, run_id: chainId, duplicate: false });
    expect(await send('key_rotate', { tenant, requested_by: OPERATOR, key_id: 'k1', rotation: 1, grace_until: null })).toMatchObject({ ok: true, duplicate: false });
    expect(await send('key_revoke', { tenant, requested_by: OPERATOR, key_id: 'k1', reason: 'done' })).toMatchObject({ ok: true, duplicate: false });
    const receipts = await chain(chainId);
    expect(receipts.map((r) => [r.type, r.actor, r.causation])).toEqual([
      ['admin.tenant_created', 'intake', null],
      ['admin.key_created', 'intake', `${chainId}:1`],
      ['admin.key_rotated', 'intake', `${chainId}:2`],
      ['admin.key_revoked', 'intake', `${chainId}:2`],
    ]);
    expect(receipts[1]).toMatchObject({ key_id: 'k1', prefix: 'abcdefgh', scopes: ['runs:read'], created_by: OPERATOR, tenant });
    expect(JSON.stringify(receipts)).not.toMatch(/sha256|secret/);
    expect(verifyChain(receipts)).toMatchObject({ ok: true, count: 4, chainId });

    // Redelivered or retried (a fresh message id, past any dedupe window): decided from the chain, nothing twice.
    expect(await send('tenant_create', { tenant, requested_by: 'key:other' })).toMatchObject({ ok: true, duplicate: true });
    expect(await send('key_create', key(tenant, 'k1'))).toMatchObject({ ok: true, duplicate: true });
    expect(await send('key_rotate', { tenant, requested_by: OPERATOR, key_id: 'k1', rotation: 1, grace_until: null })).toMatchObject({ ok: true, duplicate: true });
    expect(await send('key_revoke', { tenant, requested_by: OPERATOR, key_id: 'k1' })).toMatchObject({ ok: true, duplicate: true });
    expect(await chain(chainId)).toHaveLength(4);
    expect(foldAdminChain(tenant, await chain(chainId))).toMatchObject({ anomalies: [], headSeq: 4 });
  });

  it('refuses keys of a tenant never created (E_NOT_FOUND), a revoked key rotation (E_CONFLICT), bad input (E_INPUT), and appends nothing', async () => {
    const tenant = uniqueName('u').toLowerCase().replace(/[^a-z0-9_-]/g, '');
    expect(await send('key_create', key(tenant, 'k1'))).toMatchObject({ ok: false, error: { code: 'E_NOT_FOUND' } });
    expect(await chain(`adm_${tenant}`)).toHaveLength(0);
    await send('tenant_create', { tenant, requested_by: OPERATOR });
    await send('key_create', key(tenant, 'k1'));
    await send('key_revoke', { tenant, requested_by: OPERATOR, key_id: 'k1' });
    expect(await send('key_rotate', { tenant, requested_by: OPERATOR, key_id: 'k1', rotation: 1, grace_until: null })).toMatchObject({ ok: false, error: { code: 'E_CONFLICT' } });
    expect(await send('key_revoke', { tenant, requested_by: OPERATOR, key_id: 'nope' })).toMatchObject({ ok: false, error: { code: 'E_NOT_FOUND' } });
    const bad = { ...key(tenant, 'k2'), scopes: ['root'] } as unknown as CommandPayload<'key_create'>;
    expect(await send('key_create', bad)).toMatchObject({ ok: false, error: { code: 'E_INPUT' } });
    expect(await chain(`adm_${tenant}`)).toHaveLength(3);
  });

  it('keeps concurrent admin acts of one tenant on one unbroken chain', async () => {
    const tenant = uniqueName('c').toLowerCase().replace(/[^a-z0-9_-]/g, '');
    await send('tenant_create', { tenant, requested_by: OPERATOR });
    const replies = await Promise.all(Array.from({ length: 6 }, (_, i) => send('key_create', key(tenant, `k${i}`))));
    expect(replies.every((r) => r.ok && !r.duplicate)).toBe(true);
    const receipts = await chain(`adm_${tenant}`);
    expect(verifyChain(receipts)).toMatchObject({ ok: true, count: 7 });
    expect(foldAdminChain(tenant, receipts).keys.size).toBe(6);
  });
});
