import 'reflect-metadata';
import { loadConfig } from '@cairn/config';
import type { ReceiptEnvelope, RunSpec } from '@cairn/contracts';
import { canonicalJson, sha256Hex } from '@cairn/evidence';
import { EvidenceLog } from '@cairn/evidence-log';
import { bucketStreamName, WorkerRegistry } from '@cairn/operational';
import { DEFAULT_POLICY, policyVersion } from '@cairn/policy';
import type { PolicyDocument } from '@cairn/policy';
import { startService } from '@cairn/service-kit';
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

const BUSYBOX_DIGEST = `sha256:${'b'.repeat(64)}`;
// The default policy, plus: the Debian image needs a person's approval.
const POLICY: PolicyDocument = { ...DEFAULT_POLICY, approvals: { rules: [...DEFAULT_POLICY.approvals.rules, { when: { image: 'cairn/sandbox-debian:1' } }] } };

let nc: NatsConnection;
let config: PolicyServiceConfig;
let service: RunningService;
let log: EvidenceLog;
let dir: string;

async function chain(runId: string): Promise<ReceiptEnvelope[]> {
  const out: ReceiptEnvelope[] = [];
  for await (const stored of log.readChain(runId)) out.push(stored.receipt);
  return out;
}

async function until<T>(what: string, probe: () => Promise<T | null>, ms = 15_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const value = await probe();
    if (value !== null) return value;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function submitted(spec: RunSpec): Promise<string> {
  const runId = `run_${uniqueName('pol').toLowerCase()}`;
  await log.append(runId, {
    type: 'run.submitted',
    actor: 'intake',
    tenant: 'acme',
    causation: null,
    fields: { spec, spec_sha256: sha256Hex(canonicalJson(spec)), submitted_by: 'key:k1', idempotency_key_sha256: sha256Hex(runId) },
  });
  return runId;
}

async function decision(runId: string): Promise<ReceiptEnvelope> {
  return until(`policy.decided on ${runId}`, async () => (await chain(runId)).find((r) => r.type === 'policy.decided') ?? null);
}

beforeAll(async () => {
  nc = await connect({ servers: testNatsUrl() });
  dir = mkdtempSync(join(tmpdir(), 'cairn-policy-'));
  const policyFile = join(dir, 'policy.json');
  writeFileSync(policyFile, JSON.stringify(POLICY));
  config = loadConfig(PolicyServiceConfigSchema, {
    CAIRN_NATS_URL: testNatsUrl(),
    CAIRN_EVIDENCE_STREAM: uniqueName('POLICY_EVIDENCE').toUpperCase(),
    CAIRN_EVIDENCE_SUBJECT_PREFIX: uniqueName('policy_ev').toLowerCase(),
    CAIRN_WORKERS_BUCKET: uniqueName('policy_workers'),
    CAIRN_POLICY_FILE: policyFile,
  });
  // A 1 s dedupe window, so a test can show that policy never decides twice without leaning on it.
  log = await EvidenceLog.fromConnection(nc, {
    servers: testNatsUrl(),
    stream: config.CAIRN_EVIDENCE_STREAM,
    subjectPrefix: config.CAIRN_EVIDENCE_SUBJECT_PREFIX,
    duplicateWindowMs: 1000,
  });
  const registry = await WorkerRegistry.open(nc, { bucket: config.CAIRN_WORKERS_BUCKET });
  await registry.register({
    workerId: 'w-policy',
    capacity: { slots: 2, memoryMiB: 8192, cpus: 4, diskMiB: 8192 },
    isolation: ['docker'],
    draining: false,
    healthy: true,
    lastHeartbeatAt: Date.now() + 600_000, // stays live for the whole suite
    inFlight: [],
    images: { 'cairn/sandbox-busybox:1': BUSYBOX_DIGEST },
  });
  service = await startService(POLICY_SERVICE, policyModule(config));
});

afterAll(async () => {
  await service?.stop();
  await log?.close();
  const jsm = await jetstreamManager(nc);
  await jsm.streams.delete(config.CAIRN_EVIDENCE_STREAM).catch(() => false);
  await jsm.streams.delete(bucketStreamName(config.CAIRN_WORKERS_BUCKET)).catch(() => false);
  await nc.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('the policy service', () => {
  it('allows a spec within the policy, granting the default caps and the image the workers have, by digest', async () => {
    const runId = await submitted({ name: 'ok', steps: [{ argv: ['echo', 'hi'] }] });
    const decided = await decision(runId);
    expect(decided).toMatchObject({
      seq: 2,
      actor: 'policy',
      causation: `${runId}:1`,
      decision: 'allow',
      policy_version: policyVersion(POLICY),
      reasons: [],
      caps: { wall_seconds: 60, memory_mib: 256, pids: 64, disk_mib: 256, cpus: 1 },
      image: `cairn/sandbox-busybox:1@${BUSYBOX_DIGEST}`,
    });
    expect(decided).not.toHaveProperty('error_code');
  });

  it('denies a spec over a cap with E_POLICY_DENIED, naming the cap, and grants nothing', async () => {
    const runId = await submitted({ name: 'greedy', steps: [{ argv: ['true'] }], caps: { memoryMiB: 8192, pids: 100_000 } });
    const decided = await decision(runId);
    expect(decided).toMatchObject({ decision: 'deny', error_code: 'E_POLICY_DENIED' });
    expect(decided.reasons).toEqual(expect.arrayContaining([expect.stringContaining('caps.memoryMiB 8192'), expect.stringContaining('caps.pids 100000')]));
    expect(decided).not.toHaveProperty('caps');
  });

  it('denies an image that is not on the allowlist', async () => {
    const runId = await submitted({ name: 'miner', image: 'evil/miner:latest', steps: [{ argv: ['mine'] }] });
    const decided = await decision(runId);
    expect(decided).toMatchObject({ decision: 'deny', error_code: 'E_POLICY_DENIED' });
    expect(decided.reasons).toEqual([expect.stringContaining('evil/miner:latest is not on the policy')]);
  });

  it('holds a run an approval rule matches, and requests the approval by id', async () => {
    const runId = await submitted({ name: 'needs-ok', image: 'cairn/sandbox-debian:1', steps: [{ argv: ['true'] }] });
    const receipts = await until('approval.requested', async () => {
      const all = await chain(runId);
      return all.some((r) => r.type === 'approval.requested') ? all : null;
    });
    expect(receipts.map((r) => r.type)).toEqual(['run.submitted', 'policy.decided', 'approval.requested']);
    expect(receipts[1]).toMatchObject({ decision: 'hold', caps: { memory_mib: 256 }, image: 'cairn/sandbox-debian:1' });
    expect(receipts[2]).toMatchObject({ approval_id: 'image', scope: 'run', step_index: null, causation: `${runId}:1` });
  });

  it('decides nothing for a run cancelled before policy saw it, and never decides a run twice, even past the dedupe window', async () => {
    await service.stop();
    const cancelled = await submitted({ name: 'cancelled', steps: [{ argv: ['true'] }] });
    await log.append(cancelled, { type: 'run.cancelled', actor: 'intake', tenant: 'acme', causation: null, key: 'cancel', fields: { cancelled_by: 'key:k1' } });
    // Past the stream's 1 s dedupe window, a fresh durable delivers every receipt again, the decided ones included.
    await new Promise((r) => setTimeout(r, 1500));
    await (await jetstreamManager(nc)).consumers.delete(config.CAIRN_EVIDENCE_STREAM, 'cairn-policy');
    service = await startService(POLICY_SERVICE, policyModule(config));
    const last = await submitted({ name: 'last', steps: [{ argv: ['true'] }] });
    await decision(last);
    await new Promise((r) => setTimeout(r, 500));

    expect((await chain(cancelled)).map((r) => r.type)).toEqual(['run.submitted', 'run.cancelled']);
    const counts = new Map<string, number>();
    for await (const message of log.readAll()) {
      const receipt = JSON.parse(new TextDecoder().decode(message.data)) as ReceiptEnvelope;
      if (receipt.type === 'policy.decided' || receipt.type === 'approval.requested') {
        const k = `${receipt.run_id} ${receipt.type}`;
        counts.set(k, (counts.get(k) ?? 0) + 1);
      }
    }
    expect([...counts.values()].every((n) => n === 1)).toBe(true);
    expect([...counts.keys()].filter((k) => k.endsWith('policy.decided'))).toHaveLength(5);
    expect([...counts.keys()].filter((k) => k.endsWith('approval.requested'))).toHaveLength(1);
  });
});
