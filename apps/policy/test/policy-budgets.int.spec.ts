import 'reflect-metadata';
import { loadConfig } from '@cairn/config';
import type { ReceiptEnvelope, RunSpec } from '@cairn/contracts';
import { canonicalJson, sha256Hex } from '@cairn/evidence';
import { EvidenceLog } from '@cairn/evidence-log';
import { bucketStreamName } from '@cairn/operational';
import { createDataSource, migrate, ProjectionWriter } from '@cairn/persistence';
import type { RawEvidenceMessage } from '@cairn/persistence';
import { DEFAULT_POLICY } from '@cairn/policy';
import type { PolicyDocument } from '@cairn/policy';
import { startService } from '@cairn/service-kit';
import type { RunningService } from '@cairn/service-kit';
import { createTestDatabase, testNatsUrl, uniqueName } from '@cairn/testing';
import type { TestDatabase } from '@cairn/testing';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { DataSource } from 'typeorm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PolicyServiceConfigSchema } from '../src/policy.config.js';
import { POLICY_SERVICE, policyModule } from '../src/policy.module.js';

/*
 * Budgets on the real NATS: the policy service runs in-process and counts from its own ledger, a
 * fold of the evidence log (docs/adr/0027). The test still projects the stream into a database of
 * its own the way the projector does (ProjectionWriter), to show that what the projection holds —
 * stalled, or its tables emptied — changes no decision.
 */

let nc: NatsConnection;
const dir = mkdtempSync(join(tmpdir(), 'cairn-policy-budgets-'));
const worlds: World[] = [];

interface World {
  log: EvidenceLog;
  db: TestDatabase;
  ds: DataSource;
  service: RunningService;
  stream: string;
  workersBucket: string;
  projecting: boolean;
  loop: Promise<void>;
  stopped: boolean;
}

async function projectOnce(world: World, writer: ProjectionWriter): Promise<void> {
  const position = await writer.position();
  const batch: RawEvidenceMessage[] = [];
  for await (const m of world.log.readAll({ fromStreamSeq: position + 1 })) batch.push({ streamSeq: m.streamSeq, subject: m.subject, data: m.data, traceparent: m.traceparent });
  if (batch.length > 0) await writer.applyBatch(batch);
}

/** A policy service under `policy`, with its own stream and database, and a projector loop. */
async function world(name: string, policy: PolicyDocument, waitMs = 10_000): Promise<World> {
  const db = await createTestDatabase(`policy_${name}`);
  await migrate(db.url);
  const policyFile = join(dir, `${name}.json`);
  writeFileSync(policyFile, JSON.stringify(policy));
  const config = loadConfig(PolicyServiceConfigSchema, {
    CAIRN_NATS_URL: testNatsUrl(),
    CAIRN_DATABASE_URL: db.url,
    CAIRN_EVIDENCE_STREAM: uniqueName(`POLBUD_${name}`).toUpperCase(),
    CAIRN_EVIDENCE_SUBJECT_PREFIX: uniqueName(`polbud_${name}`).toLowerCase(),
    CAIRN_WORKERS_BUCKET: uniqueName(`polbud_workers_${name}`),
    CAIRN_POLICY_FILE: policyFile,
    CAIRN_POLICY_USAGE_WAIT_MS: String(waitMs),
  });
  const log = await EvidenceLog.fromConnection(nc, { servers: testNatsUrl(), stream: config.CAIRN_EVIDENCE_STREAM, subjectPrefix: config.CAIRN_EVIDENCE_SUBJECT_PREFIX });
  const ds = createDataSource(db.url, { poolSize: 2 });
  await ds.initialize();
  const writer = new ProjectionWriter(ds, { stream: config.CAIRN_EVIDENCE_STREAM, subjectPrefix: config.CAIRN_EVIDENCE_SUBJECT_PREFIX });
  const service = await startService(POLICY_SERVICE, policyModule(config));
  const w: World = {
    log,
    db,
    ds,
    service,
    stream: config.CAIRN_EVIDENCE_STREAM,
    workersBucket: config.CAIRN_WORKERS_BUCKET,
    projecting: true,
    stopped: false,
    loop: Promise.resolve(),
  };
  w.loop = (async () => {
    while (!w.stopped) {
      if (w.projecting) await projectOnce(w, writer);
      await new Promise((resolve) => setTimeout(resolve, 40));
    }
  })();
  worlds.push(w);
  return w;
}

async function chain(w: World, runId: string): Promise<ReceiptEnvelope[]> {
  const out: ReceiptEnvelope[] = [];
  for await (const stored of w.log.readChain(runId)) out.push(stored.receipt);
  return out;
}

async function submitted(w: World, spec: RunSpec, tenant = 'acme'): Promise<string> {
  const runId = `run_${uniqueName('bud').toLowerCase()}`;
  await w.log.append(runId, {
    type: 'run.submitted',
    actor: 'intake',
    tenant,
    causation: null,
    fields: { spec, spec_sha256: sha256Hex(canonicalJson(spec)), submitted_by: 'key:k1', idempotency_key_sha256: sha256Hex(runId) },
  });
  return runId;
}

/** A sandbox session asked for, as intake records it. */
async function requestedSandbox(w: World, tenant: string): Promise<string> {
  const sandboxId = `sbx_${uniqueName('bud').toLowerCase()}`;
  const sandboxSpec = { ttlSeconds: 600 };
  await w.log.append(sandboxId, {
    type: 'sandbox.requested',
    actor: 'intake',
    tenant,
    causation: null,
    fields: {
      spec: sandboxSpec,
      spec_sha256: sha256Hex(canonicalJson(sandboxSpec)),
      requested_by: 'key:k1',
      expires_at: new Date(Date.now() + 600_000).toISOString(),
      idle_seconds: 600,
    },
  });
  return sandboxId;
}

type Decided = ReceiptEnvelope & { decision: string; error_code?: string; reasons: string[]; budget?: Record<string, number> };

async function decision(w: World, runId: string, ms = 20_000): Promise<Decided> {
  const end = Date.now() + ms;
  for (;;) {
    const found = (await chain(w, runId)).find((r) => r.type === 'policy.decided');
    if (found !== undefined) return found as Decided;
    if (Date.now() > end) throw new Error(`no policy.decided on ${runId} in ${ms} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** The stream seq of each run's run.submitted. */
async function submittedOrder(w: World, runIds: readonly string[]): Promise<string[]> {
  const seqs = new Map<string, number>();
  for (const runId of runIds) for await (const stored of w.log.readChain(runId)) if (stored.receipt.seq === 1) seqs.set(runId, stored.streamSeq);
  return [...runIds].sort((a, b) => (seqs.get(a) ?? 0) - (seqs.get(b) ?? 0));
}

const spec = (name: string, job?: string): RunSpec => ({ name, steps: [{ argv: ['true'] }], ...(job === undefined ? {} : { job }) });

beforeAll(async () => {
  nc = await connect({ servers: testNatsUrl() });
});

afterAll(async () => {
  const jsm = await jetstreamManager(nc);
  for (const w of worlds) {
    w.stopped = true;
    await w.loop.catch(() => undefined);
    await w.service.stop();
    await w.log.close();
    await w.ds.destroy();
    await jsm.streams.delete(w.stream).catch(() => false);
    await jsm.streams.delete(bucketStreamName(w.workersBucket)).catch(() => false);
    await w.db.drop();
  }
  await nc.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('policy: job budgets from its own ledger', () => {
  let w: World;
  beforeAll(async () => {
    w = await world('jobs', DEFAULT_POLICY);
  });

  it('given seven runs of a job submitted at once, then six are allowed and the last submitted is REJECTED E_BUDGET; another job is not touched', async () => {
    const runs = await Promise.all(Array.from({ length: 7 }, (_, i) => submitted(w, spec(`nightly ${i}`, 'nightly'))));
    const other = await submitted(w, spec('weekly', 'weekly'));
    const decided = new Map(await Promise.all(runs.map(async (runId) => [runId, await decision(w, runId)] as const)));
    const order = await submittedOrder(w, runs);
    const last = order.at(-1)!;
    for (const runId of order.slice(0, 6)) {
      expect(decided.get(runId)).toMatchObject({ decision: 'allow', budget: { run_seconds: 5400 } });
    }
    expect(decided.get(last)).toMatchObject({ decision: 'deny', error_code: 'E_BUDGET', reasons: ['job nightly: this would be run 7 of a job allowed 6 runs'] });
    expect(await decision(w, other)).toMatchObject({ decision: 'allow' });
  });

  it('given a job whose runs are in another tenant, then they do not count', async () => {
    const runs = await Promise.all(Array.from({ length: 6 }, (_, i) => submitted(w, spec(`shared ${i}`, 'shared'), 'globex')));
    for (const runId of runs) await decision(w, runId);
    expect(await decision(w, await submitted(w, spec('mine', 'shared')))).toMatchObject({ decision: 'allow' });
  });

  it('given a run without a job under a policy without tenant quotas, then nothing waits for the projection', async () => {
    w.projecting = false;
    try {
      const runId = await submitted(w, spec('no job'));
      expect(await decision(w, runId, 5000)).toMatchObject({ decision: 'allow' });
    } finally {
      w.projecting = true;
    }
  });
});

describe('policy: tenant quotas from its own ledger', () => {
  let w: World;
  const QUOTAS: PolicyDocument = { ...DEFAULT_POLICY, budgets: { ...DEFAULT_POLICY.budgets, tenantConcurrentRuns: 2, tenantCpuSecondsPerDay: 100_000, outputBytesPerStep: 4096 } };
  beforeAll(async () => {
    w = await world('quota', QUOTAS, 600);
  });

  it('given three runs of a tenant at once with two allowed in flight, then the last submitted is REJECTED E_BUDGET; another tenant is not touched', async () => {
    const runs = await Promise.all([0, 1, 2].map((i) => submitted(w, spec(`t1 ${i}`), 't1')));
    const elsewhere = await submitted(w, spec('t2'), 't2');
    const decided = new Map(await Promise.all(runs.map(async (runId) => [runId, await decision(w, runId)] as const)));
    const order = await submittedOrder(w, runs);
    for (const runId of order.slice(0, 2)) {
      expect(decided.get(runId)).toMatchObject({ decision: 'allow', budget: { output_bytes_per_step: 4096, run_seconds: 100_000 } });
    }
    expect(decided.get(order[2]!)).toMatchObject({ decision: 'deny', error_code: 'E_BUDGET', reasons: ['tenant: this would be run 3 in flight of the 2 allowed at once'] });
    expect(await decision(w, elsewhere)).toMatchObject({ decision: 'allow' });

    // A run in flight that ends frees its place.
    const first = order[0]!;
    const head = (await chain(w, first)).at(-1)!;
    await w.log.append(first, { type: 'run.cancelled', actor: 'intake', tenant: 't1', causation: `${first}:${head.seq}`, key: 'cancel', fields: { cancelled_by: 'key:k1' } });
    expect(await decision(w, await submitted(w, spec('t1 again'), 't1'))).toMatchObject({ decision: 'allow' });
  });

  it('given two live sandbox sessions of a tenant with two allowed in flight, then its next run is REJECTED E_BUDGET, and allowed once one ends', async () => {
    const sandboxes = [await requestedSandbox(w, 't5'), await requestedSandbox(w, 't5')];
    for (const sandboxId of sandboxes) expect(await decision(w, sandboxId)).toMatchObject({ decision: 'allow' });
    expect(await decision(w, await submitted(w, spec('t5 run'), 't5'))).toMatchObject({
      decision: 'deny',
      error_code: 'E_BUDGET',
      reasons: ['tenant: this would be run 3 in flight of the 2 allowed at once'],
    });
    // A third session is refused the same way.
    expect(await decision(w, await requestedSandbox(w, 't5'))).toMatchObject({ decision: 'deny', error_code: 'E_BUDGET' });
    const ended = sandboxes[0]!;
    const head = (await chain(w, ended)).at(-1)!;
    await w.log.append(ended, {
      type: 'run.failed',
      actor: 'runtime',
      tenant: 't5',
      causation: `${ended}:${head.seq}`,
      key: 'failed',
      fields: { error_code: 'E_SANDBOX_START', message: 'could not start' },
    });
    expect(await decision(w, await submitted(w, spec('t5 again'), 't5'))).toMatchObject({ decision: 'allow' });
  });

  it('given the projection stalled, then the decision does not wait for it: it is counted from the ledger (the earlier runs still count)', async () => {
    w.projecting = false;
    try {
      const first = await submitted(w, spec('counted 1'), 't3');
      const second = await submitted(w, spec('counted 2'), 't3');
      expect(await decision(w, first)).toMatchObject({ decision: 'allow' });
      expect(await decision(w, second)).toMatchObject({ decision: 'allow' });
      expect(await decision(w, await submitted(w, spec('over'), 't3'))).toMatchObject({
        decision: 'deny',
        error_code: 'E_BUDGET',
        reasons: ['tenant: this would be run 3 in flight of the 2 allowed at once'],
      });
    } finally {
      w.projecting = true;
    }
  });

  it('given the runs and sandboxes projections emptied, then the decisions are the same: the runs in flight still count', async () => {
    const runs = [await submitted(w, spec('t4 0'), 't4'), await submitted(w, spec('t4 1'), 't4')];
    for (const runId of runs) expect(await decision(w, runId)).toMatchObject({ decision: 'allow' });
    // The projection is left stopped: its rows are gone under its position (a rebuild would start over).
    w.projecting = false;
    await w.ds.query('TRUNCATE runs, sandboxes');
    expect(await w.ds.query('SELECT count(*)::int AS n FROM runs')).toEqual([{ n: 0 }]);
    expect(await decision(w, await submitted(w, spec('t4 2'), 't4'))).toMatchObject({
      decision: 'deny',
      error_code: 'E_BUDGET',
      reasons: ['tenant: this would be run 3 in flight of the 2 allowed at once'],
    });
  });
});
