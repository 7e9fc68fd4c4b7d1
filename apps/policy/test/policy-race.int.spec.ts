import 'reflect-metadata';
import { loadConfig } from '@cairn/config';
import { parseEvidenceReceipt } from '@cairn/contracts';
import type { RunSpec } from '@cairn/contracts';
import { canonicalJson, sha256Hex } from '@cairn/evidence';
import { EvidenceLog } from '@cairn/evidence-log';
import type { AppendInput, AppendOptions } from '@cairn/evidence-log';
import { foldRun } from '@cairn/lifecycle';
import { bucketStreamName, WorkerRegistry } from '@cairn/operational';
import { DEFAULT_POLICY } from '@cairn/policy';
import type { PolicyDocument } from '@cairn/policy';
import { JsonLogger, ReactionContext } from '@cairn/service-kit';
import { testNatsUrl, uniqueName } from '@cairn/testing';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PolicyDecisionHandler } from '../src/policy-decision.handler.js';
import { PolicyServiceConfigSchema } from '../src/policy.config.js';
import { UsageLedgerService } from '../src/usage-ledger.service.js';
import type { PolicyServiceConfig } from '../src/policy.config.js';

/*
 * A cancel racing policy: the handler is driven directly on the real JetStream, and the cancel is
 * appended exactly between its read of the chain and its append (or between its two appends).
 */

const POLICY: PolicyDocument = { ...DEFAULT_POLICY, approvals: { rules: [...DEFAULT_POLICY.approvals.rules, { when: { image: 'cairn/sandbox-debian:1' } }] } };

let nc: NatsConnection;
let config: PolicyServiceConfig;
let log: EvidenceLog;
let handler: PolicyDecisionHandler;
let ledger: UsageLedgerService;

beforeAll(async () => {
  nc = await connect({ servers: testNatsUrl() });
  config = loadConfig(PolicyServiceConfigSchema, {
    CAIRN_NATS_URL: testNatsUrl(),
    CAIRN_EVIDENCE_STREAM: uniqueName('POLRACE_EV').toUpperCase(),
    CAIRN_EVIDENCE_SUBJECT_PREFIX: uniqueName('polrace_ev').toLowerCase(),
    CAIRN_WORKERS_BUCKET: uniqueName('polrace_workers'),
  });
  log = await EvidenceLog.fromConnection(nc, { servers: testNatsUrl(), stream: config.CAIRN_EVIDENCE_STREAM, subjectPrefix: config.CAIRN_EVIDENCE_SUBJECT_PREFIX });
  const workers = await WorkerRegistry.open(nc, { bucket: config.CAIRN_WORKERS_BUCKET });
  await workers.register({
    workerId: 'w-race',
    capacity: { slots: 2, memoryMiB: 8192, cpus: 4, diskMiB: 8192 },
    isolation: ['docker'],
    draining: false,
    healthy: true,
    lastHeartbeatAt: Date.now() + 600_000,
    inFlight: [],
    images: { 'cairn/sandbox-busybox:1': `sha256:${'b'.repeat(64)}`, 'cairn/sandbox-debian:1': `sha256:${'d'.repeat(64)}` },
  });
  ledger = new UsageLedgerService(config, nc, log, new JsonLogger('policy', 'error'));
  handler = new PolicyDecisionHandler(POLICY, workers, ledger, config, new JsonLogger('policy', 'error'));
});

afterAll(async () => {
  await ledger?.stop();
  await log?.close();
  const jsm = await jetstreamManager(nc);
  await jsm.streams.delete(config.CAIRN_EVIDENCE_STREAM).catch(() => false);
  await jsm.streams.delete(bucketStreamName(config.CAIRN_WORKERS_BUCKET)).catch(() => false);
  await nc.close();
});

async function submitted(spec: RunSpec) {
  const runId = `run_${uniqueName('polrace').toLowerCase()}`;
  const { receipt } = await log.append(runId, {
    type: 'run.submitted',
    actor: 'intake',
    tenant: 'acme',
    causation: null,
    fields: { spec, spec_sha256: sha256Hex(canonicalJson(spec)), submitted_by: 'key:k1', idempotency_key_sha256: sha256Hex(runId) },
  });
  const parsed = parseEvidenceReceipt(receipt);
  if (!parsed.ok || parsed.receipt.type !== 'run.submitted') throw new Error('run.submitted did not parse');
  return parsed.receipt;
}

function cancel(runId: string): Promise<unknown> {
  return log.append(runId, { type: 'run.cancelled', actor: 'intake', tenant: 'acme', causation: null, key: 'cancel', fields: { cancelled_by: 'key:k1' } });
}

/** The log as the handler sees it, with `race` run once: after its first read, or after its first append. */
function racing(at: 'read' | 'append', race: (chainId: string) => Promise<unknown>): EvidenceLog {
  let done = false;
  const once = async (chainId: string) => {
    if (done) return;
    done = true;
    await race(chainId);
  };
  return new Proxy(log, {
    get(target, prop, receiver) {
      if (at === 'read' && prop === 'readChain') {
        return async function* (chainId: string) {
          yield* target.readChain(chainId);
          await once(chainId);
        };
      }
      if (at === 'append' && prop === 'append') {
        return async (chainId: string, input: AppendInput, options?: AppendOptions) => {
          const result = await target.append(chainId, input, options);
          await once(chainId);
          return result;
        };
      }
      return Reflect.get(target, prop, receiver) as unknown;
    },
  });
}

async function chain(runId: string) {
  const out = [];
  for await (const stored of log.readChain(runId)) out.push(stored.receipt);
  return out;
}

describe('policy racing a cancel', () => {
  it('given a cancel landing between its read and its append, then it reads again and decides nothing: no event after run.cancelled', async () => {
    const receipt = await submitted({ name: 'raced', steps: [{ argv: ['true'] }] });
    await handler.handle(new ReactionContext(receipt, 'policy', racing('read', cancel), () => undefined));
    const receipts = await chain(receipt.run_id);
    expect(receipts.map((r) => r.type)).toEqual(['run.submitted', 'run.cancelled']);
    expect(foldRun(receipts)).toMatchObject({ state: 'CANCELLED', errorCode: null });
  });

  it('given a cancel landing between policy.decided (hold) and its approval request, then the request is not appended after the cancel', async () => {
    const receipt = await submitted({ name: 'held', image: 'cairn/sandbox-debian:1', steps: [{ argv: ['true'] }] });
    await handler.handle(new ReactionContext(receipt, 'policy', racing('append', cancel), () => undefined));
    const receipts = await chain(receipt.run_id);
    expect(receipts.map((r) => r.type)).toEqual(['run.submitted', 'policy.decided', 'run.cancelled']);
    expect(receipts[1]).toMatchObject({ decision: 'hold' });
    expect(foldRun(receipts)).toMatchObject({ state: 'CANCELLED', errorCode: null });
  });

  it('without a race, decides once and requests the approval (the control)', async () => {
    const receipt = await submitted({ name: 'held', image: 'cairn/sandbox-debian:1', steps: [{ argv: ['true'] }] });
    const ctx = new ReactionContext(receipt, 'policy', log, () => undefined);
    await handler.handle(ctx);
    await handler.handle(ctx);
    expect((await chain(receipt.run_id)).map((r) => r.type)).toEqual(['run.submitted', 'policy.decided', 'approval.requested']);
  });
});
