import { type EvidenceReceipt, GENESIS_HASH, parseEvidenceReceipt, type ReceiptEnvelope, ReceiptEnvelopeSchema } from '@cairn/contracts';
import { sealReceipt } from '@cairn/evidence';

/** Test fixture: builds a well-linked run chain, validating each known receipt against its contract. */
export class RunChain {
  private seq = 0;
  private head = GENESIS_HASH;
  readonly receipts: (EvidenceReceipt | ReceiptEnvelope)[] = [];

  constructor(readonly runId = 'run_fixture1', readonly tenant = 'acme') {}

  /** Appends a receipt of `type` with `fields`; a known type must satisfy its schema. */
  add(type: string, fields: Record<string, unknown> = {}): EvidenceReceipt | ReceiptEnvelope {
    this.seq += 1;
    const ts = new Date(Date.UTC(2026, 0, 1, 0, 0, this.seq)).toISOString();
    const body = { v: 1, seq: this.seq, run_id: this.runId, tenant: this.tenant, type, actor: 'intake', ts, causation: null, ...fields };
    const receipt = sealReceipt(this.head, body);
    this.head = receipt.hash;
    const parsed = parseEvidenceReceipt(receipt);
    const stored = parsed.ok ? parsed.receipt : ReceiptEnvelopeSchema.parse(receipt);
    if (!parsed.ok && parsed.reason !== 'unknown_event_type') throw new Error(parsed.message);
    this.receipts.push(stored);
    return stored;
  }
}

const SHA = (c: string) => c.repeat(64);

/** Fields of each lifecycle receipt, valid per the contracts; override what a test is about. */
export const FIELDS = {
  submitted: () => ({
    spec: { name: 'unit tests', steps: [{ argv: ['npm', 'test'] }] },
    spec_sha256: SHA('a'),
    submitted_by: 'key:k1',
    idempotency_key_sha256: SHA('b'),
  }),
  policy: (decision: 'allow' | 'deny' | 'hold', error_code?: string) => ({
    decision,
    policy_version: SHA('c'),
    reasons: [],
    ...(error_code === undefined ? {} : { error_code }),
  }),
  approvalRequested: (scope: 'run' | 'step') => ({
    approval_id: 'apr-1',
    scope,
    step_index: scope === 'run' ? null : 0,
    reason: 'apply step',
    expires_at: '2026-01-02T00:00:00.000Z',
  }),
  approvalGranted: () => ({ approval_id: 'apr-1', approved_by: 'key:admin' }),
  approvalRejected: () => ({ approval_id: 'apr-1', rejected_by: 'key:admin', cause: 'rejected' }),
  scheduled: () => ({ worker_id: 'w1', lease_id: 'l1', lease_expires_at: '2026-01-01T00:10:00.000Z', attempt: 1 }),
  sandboxCreated: () => ({
    container_name: 'cairn-run_fixture1',
    worker_id: 'w1',
    driver: 'docker',
    image: 'cairn/sandbox:1',
    image_digest: null,
    caps: { wall_seconds: 600, memory_mib: 1024, pids: 128, disk_mib: 1024, cpus: 1 },
    network: 'none',
  }),
  stepStarted: () => ({ step_index: 0, stage: 'step', tool: 'npm', argv: ['npm', 'test'], workdir: '/work', env_names: [] }),
  stepCompleted: (exit_code: number | null, error_code?: string) => ({
    step_index: 0,
    stage: 'step',
    tool: 'npm',
    argv: ['npm', 'test'],
    exit_code,
    signal: null,
    stdout_sha256: SHA('d'),
    stderr_sha256: SHA('e'),
    stdout_bytes: 10,
    stderr_bytes: 0,
    output_truncated: false,
    duration_ms: 1200,
    limits_hit: [],
    redactions: [],
    artifact_hashes: {},
    ...(error_code === undefined ? {} : { error_code }),
  }),
  sandboxDestroyed: () => ({ container_name: 'cairn-run_fixture1', verified_gone: true, reason: 'completed' }),
  executed: (exit_code: number) => ({ steps_completed: 1, exit_codes: [exit_code], artifact_hashes: {}, duration_ms: 1500 }),
  facts: () => ({ facts: { exit_codes: [0] }, operations: ['exit_codes'] }),
  verified: (verdict: 'SUPPORTS' | 'INCONCLUSIVE' | 'REJECTED') => ({
    verdict,
    chain_ok: true,
    head_hash: SHA('f'),
    receipts_checked: 9,
    invariants: [{ id: 'chain', ok: true }],
    checks: [],
  }),
  graded: (score: number, max_score: number) => ({ score, max_score, upper_bound: score, criteria: [] }),
  gradeFailed: () => ({ reason: 'judge unreachable', retryable: true, unscored: ['judge'] }),
  failed: (error_code: string) => ({ error_code, message: 'stopped' }),
  retried: (attempt = 1, retries_left = 0) => ({ attempt, error_code: 'E_WORKER_LOST', worker_id: 'w1', lease_id: 'l1', message: 'worker w1 lost: lease l1 expired', retries_left }),
  rolledBack: (error_code: string) => ({ error_code, message: 'rolled back' }),
  cancelRequested: () => ({ requested_by: 'key:k1', reason: 'not needed' }),
  cancelled: (error_code?: string) => ({ cancelled_by: 'key:k1', ...(error_code === undefined ? {} : { error_code }) }),
  sealed: (final_state: string, error_code?: string) => ({
    final_state,
    evidence_digest: SHA('9'),
    ...(error_code === undefined ? {} : { error_code }),
  }),
} as const;
