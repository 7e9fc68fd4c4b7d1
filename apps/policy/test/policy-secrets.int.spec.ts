import 'reflect-metadata';
import { randomBytes } from 'node:crypto';
import { loadConfig } from '@cairn/config';
import type { ReceiptEnvelope, RunSpec } from '@cairn/contracts';
import { canonicalJson, sha256Hex } from '@cairn/evidence';
import { EvidenceLog } from '@cairn/evidence-log';
import { bucketStreamName, WorkerRegistry } from '@cairn/operational';
import { SecretCatalog } from '@cairn/secret-store';
import { generateBoxKey } from '@cairn/secrets';
import { startService } from '@cairn/service-kit';
import type { RunningService } from '@cairn/service-kit';
import { createTestDatabase, testNatsUrl, uniqueName } from '@cairn/testing';
import type { TestDatabase } from '@cairn/testing';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PolicyServiceConfigSchema } from '../src/policy.config.js';
import type { PolicyServiceConfig } from '../src/policy.config.js';
import { POLICY_SERVICE, policyModule } from '../src/policy.module.js';

/*
 * Policy and the secret catalog (a KV bucket, ADR 0028): a run that lists secrets is allowed only when its own tenant's catalog
 * holds every name and the submitting key, as `run.submitted` records it, holds `secrets:use` and a
 * grant of each (policy reads names and grants only, with no key); anything else is denied, named.
 */

let nc: NatsConnection;
let db: TestDatabase;
let config: PolicyServiceConfig;
let service: RunningService;
let log: EvidenceLog;

async function chain(runId: string): Promise<ReceiptEnvelope[]> {
  const out: ReceiptEnvelope[] = [];
  for await (const stored of log.readChain(runId)) out.push(stored.receipt);
  return out;
}

const USER = { key_id: 'k1', scopes: ['runs:write', 'secrets:use'] };

/** `principal: null` appends a receipt without one, as intake did before secrets were governed. */
async function decide(
  tenant: string,
  spec: RunSpec,
  principal: { key_id: string; scopes: string[] } | null = USER,
): Promise<ReceiptEnvelope & { decision?: string; error_code?: string; reasons?: string[] }> {
  const runId = `run_${uniqueName('polsec').toLowerCase()}`;
  await log.append(runId, {
    type: 'run.submitted',
    actor: 'intake',
    tenant,
    causation: null,
    fields: {
      spec,
      spec_sha256: sha256Hex(canonicalJson(spec)),
      submitted_by: `key:${principal?.key_id ?? 'k1'}`,
      idempotency_key_sha256: sha256Hex(runId),
      ...(principal === null ? {} : { principal }),
    },
  });
  const end = Date.now() + 15_000;
  for (;;) {
    const decided = (await chain(runId)).find((r) => r.type === 'policy.decided');
    if (decided !== undefined) return decided;
    if (Date.now() > end) throw new Error(`no policy.decided on ${runId}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const spec = (secrets: string[]): RunSpec => ({ name: 'needs secrets', steps: [{ argv: ['true'] }], secrets });

beforeAll(async () => {
  nc = await connect({ servers: testNatsUrl() });
  db = await createTestDatabase('cairn_policy_secrets');
  config = loadConfig(PolicyServiceConfigSchema, {
    CAIRN_NATS_URL: testNatsUrl(),
    CAIRN_DATABASE_URL: db.url,
    CAIRN_EVIDENCE_STREAM: uniqueName('POLSEC_EVIDENCE').toUpperCase(),
    CAIRN_EVIDENCE_SUBJECT_PREFIX: uniqueName('polsec_ev').toLowerCase(),
    CAIRN_WORKERS_BUCKET: uniqueName('polsec_workers'),
    CAIRN_SECRETS_BUCKET: uniqueName('polsec_secrets'),
  });
  log = await EvidenceLog.fromConnection(nc, { servers: testNatsUrl(), stream: config.CAIRN_EVIDENCE_STREAM, subjectPrefix: config.CAIRN_EVIDENCE_SUBJECT_PREFIX });
  const registry = await WorkerRegistry.open(nc, { bucket: config.CAIRN_WORKERS_BUCKET });
  await registry.register({
    workerId: 'w-polsec',
    capacity: { slots: 2, memoryMiB: 8192, cpus: 4, diskMiB: 8192 },
    isolation: ['docker'],
    draining: false,
    healthy: true,
    lastHeartbeatAt: Date.now() + 600_000,
    inFlight: [],
    images: { 'cairn/sandbox-busybox:1': `sha256:${'b'.repeat(64)}` },
  });
  // The tenant's catalog, as the gateway fills it (sealed to a public key; policy reads it with none).
  const store = await SecretCatalog.open(nc, { bucket: config.CAIRN_SECRETS_BUCKET, publicKey: generateBoxKey().publicKey });
  {
    await store.put('acme', 'API_TOKEN', new Uint8Array(randomBytes(24)).map((b) => 0x41 + (b % 26)), { setBy: 'key:k1' });
    await store.put('acme', 'DB_PASSWORD', new Uint8Array(randomBytes(24)).map((b) => 0x61 + (b % 26)), { setBy: 'key:ops', grants: ['scope:runs:write'] });
    await store.put('acme', 'OPS_ONLY', new Uint8Array(randomBytes(24)).map((b) => 0x61 + (b % 26)), { setBy: 'key:ops' });
    await store.put('globex', 'GLOBEX_TOKEN', new Uint8Array(randomBytes(24)).map((b) => 0x61 + (b % 26)), { setBy: 'key:k1' });
  }
  service = await startService(POLICY_SERVICE, policyModule(config));
});

afterAll(async () => {
  await service?.stop();
  await log?.close();
  if (nc !== undefined) {
    const jsm = await jetstreamManager(nc);
    await jsm.streams.delete(config.CAIRN_EVIDENCE_STREAM).catch(() => false);
    await jsm.streams.delete(bucketStreamName(config.CAIRN_WORKERS_BUCKET)).catch(() => false);
    await jsm.streams.delete(bucketStreamName(config.CAIRN_SECRETS_BUCKET)).catch(() => false);
    await nc.close();
  }
  await db?.drop();
});

describe('policy and the secret store', () => {
  it('allows a run whose tenant holds every secret it lists, each granted to its key (by id, or by scope), and names them on the decision', async () => {
    // The names the decision carries are the only values a worker opens for the run (ADR 0028).
    expect(await decide('acme', spec(['API_TOKEN', 'DB_PASSWORD']))).toMatchObject({ decision: 'allow', reasons: [], secrets: ['API_TOKEN', 'DB_PASSWORD'] });
  });

  it('denies E_POLICY_DENIED a secret granted to another key, naming the secret and the key', async () => {
    const decided = await decide('acme', spec(['API_TOKEN', 'OPS_ONLY']));
    expect(decided).toMatchObject({ decision: 'deny', error_code: 'E_POLICY_DENIED', reasons: ['secrets: OPS_ONLY is not granted to key k1'] });
    expect(decided).not.toHaveProperty('secrets');
  });

  it('denies a key with the grant but without secrets:use, and a receipt that records no key (from before grants)', async () => {
    expect(await decide('acme', spec(['API_TOKEN']), { key_id: 'k1', scopes: ['runs:write'] })).toMatchObject({
      decision: 'deny',
      reasons: ['secrets: API_TOKEN cannot be used: key k1 lacks the secrets:use scope'],
    });
    expect(await decide('acme', spec(['API_TOKEN']), null)).toMatchObject({
      decision: 'deny',
      reasons: ['secrets: API_TOKEN cannot be used: the submission records no API key scopes'],
    });
    // Receipts without a principal still fold and are decided as before when they name no secret.
    expect(await decide('acme', { name: 'plain', steps: [{ argv: ['true'] }] }, null)).toMatchObject({ decision: 'allow' });
  });

  it('allows an admin key every secret of its tenant', async () => {
    expect(await decide('acme', spec(['OPS_ONLY', 'API_TOKEN']), { key_id: 'root', scopes: ['admin'] })).toMatchObject({ decision: 'allow' });
  });

  it('denies E_POLICY_DENIED, naming each secret the tenant lacks', async () => {
    const decided = await decide('acme', spec(['API_TOKEN', 'NOT_SET', 'ALSO_MISSING']));
    expect(decided).toMatchObject({ decision: 'deny', error_code: 'E_POLICY_DENIED' });
    expect(decided.reasons).toEqual(['secrets: NOT_SET is not in the secret store', 'secrets: ALSO_MISSING is not in the secret store']);
  });

  it('counts only the run’s own tenant: another tenant’s secret of the same name does not exist for it', async () => {
    const decided = await decide('globex', spec(['API_TOKEN']));
    expect(decided).toMatchObject({ decision: 'deny', error_code: 'E_POLICY_DENIED', reasons: ['secrets: API_TOKEN is not in the secret store'] });
  });

  it('needs no store for a run without secrets, and names none on its decision', async () => {
    const decided = await decide('globex', { name: 'plain', steps: [{ argv: ['true'] }] });
    expect(decided).toMatchObject({ decision: 'allow' });
    expect(decided).not.toHaveProperty('secrets');
  });
});
