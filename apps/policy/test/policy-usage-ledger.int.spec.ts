import 'reflect-metadata';
import { loadConfig } from '@cairn/config';
import type { ReceiptEnvelope, RunSpec } from '@cairn/contracts';
import { canonicalJson, sha256Hex } from '@cairn/evidence';
import { EvidenceLog } from '@cairn/evidence-log';
import { bucketStreamName } from '@cairn/operational';
import { DEFAULT_POLICY } from '@cairn/policy';
import type { PolicyDocument } from '@cairn/policy';
import { JsonLogger, startService } from '@cairn/service-kit';
import type { RunningService } from '@cairn/service-kit';
import { testNatsUrl, uniqueName } from '@cairn/testing';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PolicyServiceConfigSchema } from '../src/policy.config.js';
import type { PolicyServiceConfig } from '../src/policy.config.js';
import { POLICY_SERVICE, policyModule } from '../src/policy.module.js';
import { UsageLedgerService } from '../src/usage-ledger.service.js';

/*
 * Policy's usage ledger (docs/adr/0027) on the real NATS, with no PostgreSQL at all: the database
 * URL points at a port nothing listens on, so a decision that read a projection could not be made.
 */

const QUOTA_1: PolicyDocument = { ...DEFAULT_POLICY, budgets: { ...DEFAULT_POLICY.budgets, tenantConcurrentRuns: 1 } };
const dir = mkdtempSync(join(tmpdir(), 'cairn-policy-ledger-'));
let nc: NatsConnection;
let config: PolicyServiceConfig;
let log: EvidenceLog;
const services: RunningService[] = [];
const ledgers: UsageLedgerService[] = [];

beforeAll(async () => {
  nc = await connect({ servers: testNatsUrl() });
  const policyFile = join(dir, 'quota-1.json');
  writeFileSync(policyFile, JSON.stringify(QUOTA_1));
  config = loadConfig(PolicyServiceConfigSchema, {
    CAIRN_NATS_URL: testNatsUrl(),
    // Nothing listens there: budgets must not need PostgreSQL.
    CAIRN_DATABASE_URL: 'postgres://cairn:none@127.0.0.1:9/none',
    CAIRN_EVIDENCE_STREAM: uniqueName('POLLEDGER_EV').toUpperCase(),
    CAIRN_EVIDENCE_SUBJECT_PREFIX: uniqueName('polledger_ev').toLowerCase(),
    CAIRN_WORKERS_BUCKET: uniqueName('polledger_workers'),
    CAIRN_POLICY_FILE: policyFile,
    CAIRN_POLICY_USAGE_WAIT_MS: '15000',
  });
  log = await EvidenceLog.fromConnection(nc, { servers: testNatsUrl(), stream: config.CAIRN_EVIDENCE_STREAM, subjectPrefix: config.CAIRN_EVIDENCE_SUBJECT_PREFIX });
});

afterAll(async () => {
  for (const ledger of ledgers) await ledger.stop();
  for (const service of services) await service.stop().catch(() => undefined);
  await log?.close();
  const jsm = await jetstreamManager(nc);
  await jsm.streams.delete(config.CAIRN_EVIDENCE_STREAM).catch(() => false);
  await jsm.streams.delete(bucketStreamName(config.CAIRN_WORKERS_BUCKET)).catch(() => false);
  await nc.close();
  rmSync(dir, { recursive: true, force: true });
});

async function startPolicy(): Promise<RunningService> {
  const service = await startService(POLICY_SERVICE, policyModule(config));
  services.push(service);
  return service;
}

const spec = (name: string): RunSpec => ({ name, steps: [{ argv: ['true'] }] });

async function submitted(tenant: string, name: string): Promise<string> {
  const runId = `run_${uniqueName('ledger').toLowerCase()}`;
  const runSpec = spec(name);
  await log.append(runId, {
    type: 'run.submitted',
    actor: 'intake',
    tenant,
    causation: null,
    fields: { spec: runSpec, spec_sha256: sha256Hex(canonicalJson(runSpec)), submitted_by: 'key:k1', idempotency_key_sha256: sha256Hex(runId) },
  });
  return runId;
}

async function chain(runId: string): Promise<ReceiptEnvelope[]> {
  const out: ReceiptEnvelope[] = [];
  for await (const stored of log.readChain(runId)) out.push(stored.receipt);
  return out;
}

type Decided = ReceiptEnvelope & { decision: string; error_code?: string; reasons: string[] };

async function decision(runId: string, ms = 30_000): Promise<Decided> {
  const end = Date.now() + ms;
  for (;;) {
    const found = (await chain(runId)).find((r) => r.type === 'policy.decided');
    if (found !== undefined) return found as Decided;
    if (Date.now() > end) throw new Error(`no policy.decided on ${runId} in ${ms} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function firstStreamSeq(runId: string): Promise<number> {
  for await (const stored of log.readChain(runId)) if (stored.receipt.seq === 1) return stored.streamSeq;
  throw new Error(`no first receipt on ${runId}`);
}

/** Each tenant's two runs, in the order they were submitted (stream order). */
async function inOrder(pair: readonly [string, string]): Promise<[string, string]> {
  const [a, b] = pair;
  return (await firstStreamSeq(a)) < (await firstStreamSeq(b)) ? [a, b] : [b, a];
}

const tenants = Array.from({ length: 4 }, (_, i) => `led${i}`);
const pairs = new Map<string, [string, string]>();

describe('policy usage ledger: a tenant quota of 1, decided from the log', () => {
  it('given two runs of a tenant submitted at once (four tenants), then exactly one of each pair is admitted: the earlier in stream order', async () => {
    await startPolicy();
    await Promise.all(
      tenants.map(async (tenant) => {
        const [a, b] = await Promise.all([submitted(tenant, `${tenant} a`), submitted(tenant, `${tenant} b`)]);
        pairs.set(tenant, [a, b]);
      }),
    );
    for (const tenant of tenants) {
      const [earlier, later] = await inOrder(pairs.get(tenant)!);
      expect(await decision(earlier), tenant).toMatchObject({ decision: 'allow' });
      expect(await decision(later), tenant).toMatchObject({ decision: 'deny', error_code: 'E_BUDGET', reasons: ['tenant: this would be run 2 in flight of the 1 allowed at once'] });
    }
  });

  it('given policy stopped and started again, then its ledger is rebuilt from the log and decides the same: the run in flight still counts, a cancel frees it', async () => {
    await services.pop()!.stop();
    // Submitted while no policy runs: decided by the next one, from the ledger it rebuilds.
    const whileDown = await submitted('led0', 'while down');
    const other = await submitted('led-new', 'first of its tenant');
    await startPolicy();
    expect(await decision(whileDown)).toMatchObject({ decision: 'deny', error_code: 'E_BUDGET' });
    expect(await decision(other)).toMatchObject({ decision: 'allow' });

    const [admitted] = await inOrder(pairs.get('led1')!);
    const head = (await chain(admitted)).at(-1)!;
    await log.append(admitted, { type: 'run.cancelled', actor: 'intake', tenant: 'led1', causation: `${admitted}:${head.seq}`, key: 'cancel', fields: { cancelled_by: 'key:k1' } });
    expect(await decision(await submitted('led1', 'after the cancel'))).toMatchObject({ decision: 'allow' });
  });

  it('given an admitted run whose attempt 1 is lost and retried (ADR 0035), then it still counts once in flight, back in the queue, until its attempt 2 has run', async () => {
    const tenant = 'led-retry';
    const first = await submitted(tenant, 'retried');
    expect(await decision(first)).toMatchObject({ decision: 'allow' });
    let head = (await chain(first)).at(-1)!.seq;
    const append = async (type: 'run.scheduled' | 'sandbox.created' | 'run.retried' | 'sandbox.destroyed' | 'run.executed', fields: Record<string, unknown>, causedBy: number, actor = 'runtime') => {
      head = (await log.append(first, { type, actor, tenant, causation: `${first}:${causedBy}`, key: `${type}-${head}`, fields })).receipt.seq;
      return head;
    };
    const caps = { wall_seconds: 60, memory_mib: 256, pids: 64, disk_mib: 256, cpus: 1 };
    const sandbox = (attempt: number, worker: string) => ({ container_name: `cairn-${first}-${attempt}`, worker_id: worker, driver: 'docker', image: 'cairn/sandbox-busybox:1', image_digest: null, caps, network: 'none' });
    const placed1 = await append('run.scheduled', { worker_id: 'w-b', lease_id: `${first}:1`, lease_expires_at: new Date(Date.now() + 8000).toISOString(), attempt: 1 }, head, 'scheduler');
    await append('sandbox.created', sandbox(1, 'w-b'), placed1);
    const retried = await append('run.retried', { attempt: 1, error_code: 'E_WORKER_LOST', worker_id: 'w-b', lease_id: `${first}:1`, message: 'worker w-b lost', retries_left: 0 }, placed1, 'scheduler');
    // Back in the queue: still the one run in flight the quota allows, not none and not two.
    expect(await decision(await submitted(tenant, 'while it waits'))).toMatchObject({ decision: 'deny', error_code: 'E_BUDGET', reasons: ['tenant: this would be run 2 in flight of the 1 allowed at once'] });
    const placed2 = await append('run.scheduled', { worker_id: 'w-a', lease_id: `${first}:2`, lease_expires_at: new Date(Date.now() + 8000).toISOString(), attempt: 2 }, retried, 'scheduler');
    await append('sandbox.created', sandbox(2, 'w-a'), placed2);
    await append('sandbox.destroyed', { container_name: `cairn-${first}-2`, verified_gone: true, reason: 'completed' }, placed2);
    await append('run.executed', { steps_completed: 1, exit_codes: [0], artifact_hashes: {}, duration_ms: 10 }, placed2);
    expect(await decision(await submitted(tenant, 'after it ran'))).toMatchObject({ decision: 'allow' });
  });

  it('given a ledger rebuilt from the log beside the live one, then both count the same runs for every run decided', async () => {
    const logger = new JsonLogger('policy', 'error');
    const rebuilt = new UsageLedgerService(config, nc, log, logger);
    const again = new UsageLedgerService(config, nc, log, logger);
    ledgers.push(rebuilt, again);
    rebuilt.onModuleInit();
    again.onModuleInit();
    // A decision waits only for the fold to pass the run's own first receipt (what it must count);
    // compared whole, both are first let reach the end of the log.
    const last = await log.lastStreamSeq();
    const end = Date.now() + 20_000;
    while ((rebuilt.throughStreamSeq < last || again.throughStreamSeq < last) && Date.now() < end) await new Promise((resolve) => setTimeout(resolve, 20));
    const now = Date.now();
    for (const tenant of tenants) {
      for (const runId of pairs.get(tenant)!) {
        const a = await rebuilt.earlierRuns(runId, tenant, undefined, now);
        const b = await again.earlierRuns(runId, tenant, undefined, now);
        expect(b, runId).toEqual(a);
        // The earlier of the pair counts nothing of its tenant's; the later counts the earlier.
        expect(a.length, runId).toBeLessThanOrEqual(1);
      }
      // led1's admitted run was cancelled (before any sandbox): it no longer counts for anyone.
      const [earlier, later] = await inOrder(pairs.get(tenant)!);
      expect((await rebuilt.earlierRuns(later, tenant, undefined, now)).map((r) => r.runId)).toEqual(tenant === 'led1' ? [] : [earlier]);
    }
  });

  it('given a chain the log does not hold, then a decision from the ledger fails E_UNAVAILABLE in bounded time (retried later), never counted from nothing', async () => {
    const short = new UsageLedgerService({ ...config, CAIRN_POLICY_USAGE_WAIT_MS: 300 }, nc, log, new JsonLogger('policy', 'fatal'));
    ledgers.push(short);
    const started = Date.now();
    await expect(short.earlierRuns('run_notinthelog', 'led0', undefined, Date.now())).rejects.toMatchObject({ code: 'E_UNAVAILABLE' });
    expect(Date.now() - started).toBeLessThan(10_000);
  });
});
