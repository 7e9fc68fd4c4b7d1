import { parseEvidenceReceipt } from '@cairn/contracts';
import type { EvidenceReceipt } from '@cairn/contracts';
import { sealReceipt } from '@cairn/evidence';
import { readSandboxChain } from '@cairn/lifecycle';
import { describe, expect, it } from 'vitest';
import { decideSandboxSeal } from './sandbox-seal.js';

const SHA = (c: string) => c.repeat(64);
const ID = 'sbx_seal1';
const CAPS = { wall_seconds: 60, memory_mib: 256, pids: 64, disk_mib: 256, cpus: 1 };
const FIELDS: Record<string, Record<string, unknown>> = {
  'sandbox.requested': { spec: {}, spec_sha256: SHA('a'), requested_by: 'key:k1', expires_at: '2026-01-01T01:00:00.000Z' },
  allow: { decision: 'allow', policy_version: SHA('c'), reasons: [], caps: CAPS, image: 'cairn/sandbox-busybox:1' },
  deny: { decision: 'deny', policy_version: SHA('c'), reasons: ['no'], error_code: 'E_POLICY_DENIED' },
  'run.scheduled': { worker_id: 'w1', lease_id: 'l1', lease_expires_at: '2026-01-01T00:10:00.000Z', attempt: 1 },
  'sandbox.created': { container_name: 'cairn-sbx_seal1-1', worker_id: 'w1', driver: 'docker', image: 'cairn/sandbox-busybox:1', image_digest: null, caps: CAPS, network: 'none' },
  'run.failed': { error_code: 'E_WORKER_LOST', message: 'lost' },
  'sandbox.destroyed': { container_name: 'cairn-sbx_seal1-1', verified_gone: true, reason: 'deleted' },
};

function chainOf(steps: [type: string, fields: string][]): EvidenceReceipt[] {
  let head = '0'.repeat(64);
  return steps.map(([type, fields], i) => {
    const body = { v: 1, seq: i + 1, run_id: ID, tenant: 'acme', type, actor: 'runtime', ts: new Date(Date.UTC(2026, 0, 1, 0, 0, i)).toISOString(), causation: null, ...FIELDS[fields] };
    const receipt = sealReceipt(head, body);
    head = receipt.hash;
    const parsed = parseEvidenceReceipt(receipt);
    if (!parsed.ok) throw new Error(parsed.message);
    return parsed.receipt;
  });
}

const decide = (receipts: EvidenceReceipt[], nowMs = Date.parse(receipts.at(-1)!.ts)) => decideSandboxSeal(readSandboxChain(receipts)!, receipts.at(-1)!, nowMs, 10_000);
const START: [string, string][] = [
  ['sandbox.requested', 'sandbox.requested'],
  ['policy.decided', 'allow'],
  ['run.scheduled', 'run.scheduled'],
  ['sandbox.created', 'sandbox.created'],
];

describe('decideSandboxSeal', () => {
  it('seals a destroyed sandbox SEALED over its head, and a live one not at all', () => {
    expect(decide(chainOf(START))).toMatchObject({ kind: 'none' });
    const destroyed = chainOf([...START, ['sandbox.destroyed', 'sandbox.destroyed']]);
    expect(decide(destroyed)).toEqual({ kind: 'seal', fields: { final_state: 'SEALED', evidence_digest: destroyed.at(-1)!.hash } });
  });

  it('seals a denied one REJECTED with its code', () => {
    const denied = chainOf([['sandbox.requested', 'sandbox.requested'], ['policy.decided', 'deny']]);
    expect(decide(denied)).toMatchObject({ kind: 'seal', fields: { final_state: 'REJECTED', error_code: 'E_POLICY_DENIED' } });
  });

  it('a failed one waits for its teardown on the record (within the grace), then seals FAILED', () => {
    const failed = chainOf([...START, ['run.failed', 'run.failed']]);
    expect(decide(failed)).toMatchObject({ kind: 'wait' });
    expect(decide(failed, Date.parse(failed.at(-1)!.ts) + 10_001)).toMatchObject({ kind: 'seal', fields: { final_state: 'FAILED', error_code: 'E_WORKER_LOST' } });
    const torn = chainOf([...START, ['run.failed', 'run.failed'], ['sandbox.destroyed', 'sandbox.destroyed']]);
    expect(decide(torn)).toMatchObject({ kind: 'seal', fields: { final_state: 'FAILED', error_code: 'E_WORKER_LOST', evidence_digest: torn.at(-1)!.hash } });
  });
});
