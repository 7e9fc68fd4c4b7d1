import { describe, expect, it } from 'vitest';
import { deepFreeze } from './deep-freeze.js';
import { adminChainId, AdminChainIdSchema, ChainIdSchema, EventIdSchema, tenantOfAdminChain } from './envelope.js';
import {
  ADMIN_EVENT_TYPES,
  EVENT_BODY_SCHEMAS,
  EVENT_RECEIPT_SCHEMAS,
  EVENT_TYPES,
  type EventType,
  EvidenceEventSchema,
  EvidenceReceiptSchema,
  parseEvidenceReceipt,
} from './evidence-event.schema.js';
import { FINAL_RUN_STATES, RUN_STATES } from './run-state.schema.js';
import { stringPositions, withChangedText } from './testing/string-positions.js';

const sha = (c: string) => c.repeat(64);
const caps = { wall_seconds: 600, memory_mib: 1024, pids: 128, disk_mib: 1024, cpus: 1 };
const processResult = {
  exit_code: 0,
  signal: null,
  stdout_sha256: sha('1'),
  stderr_sha256: sha('2'),
  stdout_bytes: 12,
  stderr_bytes: 0,
  output_truncated: false,
  duration_ms: 40,
  limits_hit: [],
  redactions: [],
};

/** One valid set of type-specific fields for every event type. */
const FIELDS: { [K in EventType]: Record<string, unknown> } = {
  'run.submitted': {
    spec: { name: 'demo', steps: [{ argv: ['make', 'test'] }], outputs: ['/out'] },
    spec_sha256: sha('a'),
    submitted_by: 'key:abc123',
    idempotency_key_sha256: sha('b'),
  },
  'policy.decided': { decision: 'allow', policy_version: sha('c'), reasons: ['within caps'], caps, image: 'cairn/sandbox:1' },
  'approval.requested': { approval_id: 'apr-1', scope: 'run', step_index: null, reason: 'prod apply', expires_at: '2026-01-02T00:00:00.000Z' },
  'approval.granted': { approval_id: 'apr-1', approved_by: 'key:admin', comment: 'ok' },
  'approval.rejected': { approval_id: 'apr-1', rejected_by: 'scheduler', cause: 'timeout' },
  'run.scheduled': { worker_id: 'worker-1', lease_id: 'lease-9', lease_expires_at: '2026-01-01T00:10:00.000Z', attempt: 1 },
  'sandbox.created': {
    container_name: 'cairn-run_abc',
    worker_id: 'worker-1',
    driver: 'docker',
    image: 'cairn/sandbox:1',
    image_digest: `sha256:${sha('d')}`,
    caps,
    network: 'none',
    hardening: {
      read_only_root: true,
      cap_drop: ['ALL'],
      cap_add: [],
      no_new_privileges: true,
      user: '65520:65520',
      init: true,
      pids_limit: 128,
      memory_bytes: 2048 * 1024 * 1024,
      network: 'none',
      tmpfs: { '/work': { size_bytes: 512 * 1024 * 1024, exec: true }, '/tmp': { size_bytes: 128 * 1024 * 1024, exec: false } },
      seccomp: 'custom',
      seccomp_profile_sha256: sha('5'),
      userns_remap: false,
    },
  },
  'step.started': { step_index: 0, stage: 'step', tool: 'make', argv: ['make', 'test'], workdir: '/work', env_names: ['CI'] },
  'step.completed': {
    step_index: 0,
    stage: 'step',
    tool: 'make',
    argv: ['make', 'test'],
    ...processResult,
    exit_code: 2,
    artifact_hashes: { '/out/junit.xml': sha('e') },
  },
  'sandbox.destroyed': { container_name: 'cairn-run_abc', verified_gone: true, reason: 'completed', duration_ms: 900 },
  'run.executed': { steps_completed: 1, exit_codes: [2], artifact_hashes: { '/out/junit.xml': sha('e') }, duration_ms: 1000 },
  'kernel.facts': { facts: { junit: { tests: 3, failed: 1 }, exit_codes: [2], note: null }, operations: ['junit', 'exit_codes'] },
  'verification.completed': {
    verdict: 'REJECTED',
    chain_ok: true,
    head_hash: sha('f'),
    receipts_checked: 11,
    invariants: [{ id: 'teardown', ok: true }],
    checks: [{ id: 'tests-pass', outcome: 'contradicted', detail: 'exit_code 2 ≠ 0' }],
  },
  'grade.recorded': {
    score: 1,
    max_score: 4,
    upper_bound: 2,
    criteria: [
      { id: 'tests-pass', kind: 'check', weight: 3, earned: 0, scored: true },
      { id: 'style', kind: 'judge', weight: 1, earned: 0, scored: false, detail: 'judge timed out' },
    ],
  },
  'grade.failed': { reason: 'judge returned 503', error_code: 'E_UNAVAILABLE', retryable: true, unscored: ['style'] },
  'grade.requested': { requested_by: 'key:abc123', reason: 'the judge is back' },
  'judge.requested': {
    criterion_id: 'style',
    attempt: 1,
    model: 'llama-3.1-8b',
    system_prompt: 'You are a grader.',
    user_prompt: 'The text to score',
    fence: 'a'.repeat(32),
    request_sha256: sha('7'),
    source: 'steps[0].stdout',
    input_bytes: 17,
    scale: 10,
    max_tokens: 256,
    timeout_ms: 30000,
  },
  'judge.answered': {
    criterion_id: 'style',
    attempt: 1,
    response: '{"score": 7, "reason": "clear"}',
    response_sha256: sha('8'),
    usage: { prompt_tokens: 120, completion_tokens: 12, total_tokens: 132 },
    latency_ms: 840,
    finish_reason: 'stop',
  },
  'run.failed': { error_code: 'E_IMAGE_PULL', message: 'image cairn/sandbox:9 not found', step_index: 0 },
  'run.retried': { attempt: 1, error_code: 'E_WORKER_LOST', worker_id: 'worker-1', lease_id: 'lease-9', message: 'worker worker-1 lost: lease lease-9 expired', retries_left: 0 },
  'run.rolled_back': { error_code: 'E_TIMEOUT', message: 'step 0 passed 600 s' },
  'run.cancel_requested': { requested_by: 'key:abc123', reason: 'not needed' },
  'run.cancelled': { cancelled_by: 'key:abc123', reason: 'not needed' },
  'run.sealed': { final_state: 'SEALED', evidence_digest: sha('9') },
  'sandbox.requested': {
    spec: { image: 'cairn/sandbox:1', ttlSeconds: 900 },
    spec_sha256: sha('a'),
    requested_by: 'key:agent1',
    expires_at: '2026-01-01T00:15:00.000Z',
  },
  'sandbox.exec.started': { exec_id: 'ex-1', argv: ['python3', '-c', 'print(1)'], workdir: '/work', env_names: [] },
  'sandbox.exec.completed': { exec_id: 'ex-1', argv: ['python3', '-c', 'print(1)'], ...processResult },
  'sandbox.file.written': { path: '/work/main.py', sha256: sha('3'), bytes: 120, mode: 0o644 },
  'sandbox.file.read': { path: '/out/result.json', sha256: sha('4'), bytes: 64 },
  'sandbox.expired': { ttl_seconds: 900, expires_at: '2026-01-01T00:15:00.000Z' },
  'egress.denied': { host: '169.254.169.254', port: 80, reason: 'private_address', error_code: 'E_EGRESS', step_index: 0 },
  'secret.redacted': { where: 'stdout', step_index: 0, pattern: 'github-token', count: 2 },
  'alert.raised': { severity: 'critical', error_code: 'E_SECRET_SEEN', message: 'a key pattern appeared in stdout of step 0' },
  'admin.tenant_created': { created_by: 'key:operator' },
  'admin.key_created': { key_id: 'k_01', prefix: 'abcdefgh', scopes: ['runs:write', 'runs:read'], expires_at: null, created_by: 'key:admin' },
  'admin.key_rotated': { key_id: 'k_01', rotation: 1, grace_until: '2026-01-01T00:05:00.000Z', rotated_by: 'key:admin' },
  'admin.key_revoked': { key_id: 'k_01', revoked_by: 'key:admin', reason: 'left the team' },
  'admin.policy_changed': { policy_version: sha('5'), previous_version: sha('6'), changed_by: 'key:admin', summary: 'allow pypi' },
};

function body(type: string, fields: Record<string, unknown> = FIELDS[type as EventType]) {
  const chain = type.startsWith('admin.') ? 'adm_acme' : type.startsWith('sandbox.') && type !== 'sandbox.created' && type !== 'sandbox.destroyed' ? 'sbx_s1' : 'run_r1';
  return { v: 1, seq: 3, run_id: chain, tenant: 'acme', type, actor: 'runtime', ts: '2026-01-01T00:00:03.123Z', causation: `${chain}:2`, ...fields };
}

function receipt(type: string, fields?: Record<string, unknown>) {
  return { ...body(type, fields), prev_hash: sha('7'), hash: sha('8') };
}

describe('event catalogue', () => {
  it('has one body and one receipt schema per type, and the unions cover exactly EVENT_TYPES', () => {
    expect(Object.keys(EVENT_BODY_SCHEMAS).sort()).toEqual([...EVENT_TYPES].sort());
    expect(Object.keys(EVENT_RECEIPT_SCHEMAS).sort()).toEqual([...EVENT_TYPES].sort());
    expect(EvidenceEventSchema.options.map((o) => o.shape.type.value)).toEqual([...EVENT_TYPES]);
    expect(EvidenceReceiptSchema.options.map((o) => o.shape.type.value)).toEqual([...EVENT_TYPES]);
    expect(new Set(EVENT_TYPES).size).toBe(EVENT_TYPES.length);
  });

  it('names the run states and final states of PRODUCT.md', () => {
    expect(RUN_STATES).toEqual(['SUBMITTED', 'AWAITING_APPROVAL', 'SCHEDULED', 'RUNNING', 'EXECUTED', 'VERIFIED', 'GRADED', 'SEALED', 'FAILED', 'ROLLBACK', 'REJECTED', 'CANCELLED']);
    expect(FINAL_RUN_STATES).toEqual(['SEALED', 'FAILED', 'ROLLBACK', 'REJECTED', 'CANCELLED']);
  });
});

describe.each(EVENT_TYPES)('%s', (type) => {
  const bodySchema = EVENT_BODY_SCHEMAS[type];
  const receiptSchema = EVENT_RECEIPT_SCHEMAS[type];

  it('accepts a valid body and receipt, unchanged, also after a JSON round trip', () => {
    const good = receipt(type);
    expect(bodySchema.parse(body(type))).toEqual(body(type));
    expect(receiptSchema.parse(good)).toEqual(good);
    expect(EvidenceReceiptSchema.parse(JSON.parse(JSON.stringify(good)))).toEqual(good);
    expect(EvidenceEventSchema.parse(body(type))).toEqual(body(type));
    expect(parseEvidenceReceipt(JSON.parse(JSON.stringify(good)))).toEqual({ ok: true, receipt: good });
  });

  it('checks a frozen receipt once: the same frozen result for the same object; an unfrozen one every time', () => {
    const frozen = deepFreeze(receipt(type));
    const first = parseEvidenceReceipt(frozen);
    expect(first).toEqual({ ok: true, receipt: receipt(type) });
    expect(parseEvidenceReceipt(frozen)).toBe(first);
    expect(Object.isFrozen(first.ok ? first.receipt : null)).toBe(true);
    const loose = receipt(type);
    expect(parseEvidenceReceipt(loose)).not.toBe(parseEvidenceReceipt(loose));
    // A frozen receipt that breaks its contract is refused every time, the same way.
    const bad = deepFreeze({ ...receipt(type), extra: 1 });
    expect(parseEvidenceReceipt(bad)).toMatchObject({ ok: false, reason: 'invalid_fields' });
    expect(parseEvidenceReceipt(bad)).toBe(parseEvidenceReceipt(bad));
  });

  it('refuses a receipt without its prev_hash/hash, and a body carrying an unknown field', () => {
    expect(receiptSchema.safeParse(body(type)).success).toBe(false);
    expect(bodySchema.safeParse({ ...body(type), extra: 1 }).success).toBe(false);
    expect(parseEvidenceReceipt({ ...receipt(type), extra: 1 })).toMatchObject({ ok: false, reason: 'invalid_fields', type });
  });

  it.each(Object.keys(FIELDS[type]))('refuses a wrong-typed %s', (field) => {
    const result = parseEvidenceReceipt(receipt(type, { ...FIELDS[type], [field]: -1.5 }));
    expect(result).toMatchObject({ ok: false, reason: 'invalid_fields', type });
    if (!result.ok) expect(result.issues.map((i) => i.path.split(/[.[]/)[0])).toContain(field);
  });

  it('refuses each missing required field, envelope included', () => {
    const shape = bodySchema.shape as Record<string, { safeParse(v: unknown): { success: boolean } }>;
    const required = Object.keys(shape).filter((key) => !shape[key]!.safeParse(undefined).success);
    expect(required).toEqual(expect.arrayContaining(['v', 'seq', 'run_id', 'tenant', 'type', 'actor', 'ts', 'causation']));
    for (const key of required) {
      const { [key]: _dropped, ...rest } = receipt(type) as Record<string, unknown>;
      expect(parseEvidenceReceipt(rest).ok, `${type} without ${key}`).toBe(false);
    }
  });
});

/** More of the optional fields that hold text, beside FIELDS, so each is tried too. */
const MORE_TEXT: readonly [EventType, Record<string, unknown>][] = [
  [
    'run.submitted',
    {
      ...FIELDS['run.submitted'],
      spec: {
        name: 'demo',
        steps: [{ name: 'build', argv: ['make'], env: { CI: '1' }, workdir: '/work' }],
        files: [{ path: '/work/Makefile', content: 'all:\n' }],
        outputs: ['/out'],
        checks: [{ id: 'out', source: 'steps[0].stdout', op: 'contains', value: 'ok', weight: 1 }],
        claim: { statement: 'it builds', checks: [{ id: 'exit', source: 'steps[0].exit_code', op: 'eq', value: 0 }] },
      },
    },
  ],
  [
    'policy.decided',
    {
      ...FIELDS['policy.decided'],
      decision: 'hold',
      step_approvals: [{ approval_id: 'step-0', step_index: 0, reason: 'applies to prod', timeout_seconds: 60 }],
      network: { egress: ['pypi.org:443'], allow_private: false },
    },
  ],
  ['approval.rejected', { approval_id: 'apr-1', rejected_by: 'key:admin', cause: 'rejected', comment: 'not today' }],
  [
    'step.completed',
    { ...FIELDS['step.completed'], redactions: [{ stream: 'file', path: '/out/x', pattern: 'secret.plain', secret: 'API_TOKEN', count: 1 }], error_code: 'E_TIMEOUT', signal: 'SIGKILL' },
  ],
  [
    'kernel.facts',
    {
      facts: { steps: [{ index: 0, name: 'build', signal: null }], artifacts: { '/out/a.tap': { sha256: sha('1'), bytes: 3 } }, tap: { bail_reason: 'disk full', reports: ['/out/a.tap'] } },
      operations: ['tap_summary'],
    },
  ],
  [
    'verification.completed',
    {
      ...FIELDS['verification.completed'],
      verdict: 'REJECTED',
      invariants: [{ id: 'teardown', ok: true, detail: 'gone' }],
      gate: {
        passed: false,
        patch_step: 1,
        patch_exit_code: 0,
        patch: { path: '/out/fix.diff', sha256: null, rejected: true },
        checks: [{ id: 'tests', before: 'contradicted', after: 'contradicted', result: 'failing', detail: 'exit 1 both times' }],
        detail: 'failing',
      },
      error_code: 'E_GATE_FAIL',
    },
  ],
  ['run.cancelled', { cancelled_by: 'key:abc123', reason: 'not needed', error_code: 'E_NO_APPROVAL' }],
  ['sandbox.requested', { ...FIELDS['sandbox.requested'], spec: { env: { MODE: 'dev' }, files: [{ path: '/work/a.py', content: 'print(1)\n' }], secrets: ['API_TOKEN'] } }],
  ['secret.redacted', { where: 'receipt', receipt_type: 'step.completed', field: 'artifact_hashes', in_key: true, pattern: 'secret.plain', secret: 'API_TOKEN', count: 1 }],
];

describe('no string and no member name of a receipt may hold NUL (PostgreSQL cannot store it: the projector would poison the chain)', () => {
  const cases = [...EVENT_TYPES.map((type) => [type, FIELDS[type]] as const), ...MORE_TEXT];

  it.each(cases)('%s: every place that holds text, as a body (what a service appends) and as a stored receipt', (type, fields) => {
    const withNul = (text: string) => `${text}\u0000`;
    const [good, goodBody] = [receipt(type, fields), body(type, fields)];
    expect(parseEvidenceReceipt(good)).toMatchObject({ ok: true });
    expect(EVENT_BODY_SCHEMAS[type].safeParse(goodBody).success).toBe(true);
    for (const position of stringPositions(good)) {
      expect(parseEvidenceReceipt(withChangedText(good, position, withNul)).ok, `${type} ${position.kind} ${position.path.join('.')}`).toBe(false);
    }
    for (const position of stringPositions(goodBody)) {
      expect(EVENT_BODY_SCHEMAS[type].safeParse(withChangedText(goodBody, position, withNul)).success, `${type} body ${position.kind} ${position.path.join('.')}`).toBe(false);
    }
  });
});

describe('chains and their receipt types', () => {
  it('admin receipts live on the admin chain adm_<tenant> only; the others never on it', () => {
    expect(parseEvidenceReceipt({ ...receipt('admin.key_created'), run_id: 'run_r1', causation: null })).toMatchObject({ ok: false, reason: 'invalid_fields' });
    expect(parseEvidenceReceipt({ ...receipt('run.submitted'), run_id: 'adm_acme', causation: null })).toMatchObject({ ok: false, reason: 'invalid_fields' });
    expect(parseEvidenceReceipt({ ...receipt('admin.key_revoked'), causation: null }).ok).toBe(true);
    for (const type of ADMIN_EVENT_TYPES) expect(EVENT_TYPES).toContain(type);
    expect(EVENT_TYPES.filter((t) => t.startsWith('admin.'))).toEqual([...ADMIN_EVENT_TYPES]);
  });

  it('names chains by kind: run_, sbx_ and adm_<tenant>', () => {
    for (const id of ['run_a', 'sbx_a', 'adm_default', 'adm_acme-2']) expect(ChainIdSchema.safeParse(id).success, id).toBe(true);
    for (const id of ['adm_', 'adm_Acme', 'key_a', 'adm_acme.x']) expect(ChainIdSchema.safeParse(id).success, id).toBe(false);
    expect(AdminChainIdSchema.safeParse(`adm_${'a'.repeat(64)}`).success).toBe(true);
    expect(AdminChainIdSchema.safeParse(`adm_${'a'.repeat(65)}`).success).toBe(false);
    expect(adminChainId('acme')).toBe('adm_acme');
    expect(tenantOfAdminChain('adm_acme')).toBe('acme');
    expect(tenantOfAdminChain('run_acme')).toBeNull();
    expect(EventIdSchema.safeParse('adm_acme:3').success).toBe(true);
  });

  it('never carry a key secret or hash: key receipts name the key by id and public prefix', () => {
    const created = receipt('admin.key_created');
    expect(parseEvidenceReceipt({ ...created, key_sha256: sha('1') })).toMatchObject({ ok: false, reason: 'invalid_fields' });
    expect(parseEvidenceReceipt({ ...created, prefix: 'cairn_abcdefgh' })).toMatchObject({ ok: false, reason: 'invalid_fields' });
    expect(parseEvidenceReceipt({ ...created, scopes: ['root'] })).toMatchObject({ ok: false, reason: 'invalid_fields' });
  });
});

describe('cross-field rules', () => {
  it('policy.decided: a deny names E_POLICY_DENIED or E_BUDGET; an allow names none', () => {
    expect(parseEvidenceReceipt(receipt('policy.decided', { decision: 'deny', policy_version: sha('c'), reasons: [] })).ok).toBe(false);
    expect(parseEvidenceReceipt(receipt('policy.decided', { decision: 'deny', policy_version: sha('c'), reasons: [], error_code: 'E_BUDGET' })).ok).toBe(true);
    expect(parseEvidenceReceipt(receipt('policy.decided', { ...FIELDS['policy.decided'], error_code: 'E_POLICY_DENIED' })).ok).toBe(false);
  });

  it('grade.recorded: score ≤ upper_bound ≤ max_score', () => {
    expect(parseEvidenceReceipt(receipt('grade.recorded', { ...FIELDS['grade.recorded'], upper_bound: 5 })).ok).toBe(false);
    expect(parseEvidenceReceipt(receipt('grade.recorded', { ...FIELDS['grade.recorded'], score: 3 })).ok).toBe(false);
  });

  it('run.sealed: FAILED, ROLLBACK and REJECTED name their code; SEALED names none', () => {
    expect(parseEvidenceReceipt(receipt('run.sealed', { final_state: 'ROLLBACK', evidence_digest: sha('9') })).ok).toBe(false);
    expect(parseEvidenceReceipt(receipt('run.sealed', { final_state: 'ROLLBACK', evidence_digest: sha('9'), error_code: 'E_TIMEOUT' })).ok).toBe(true);
    expect(parseEvidenceReceipt(receipt('run.sealed', { final_state: 'SEALED', evidence_digest: sha('9'), error_code: 'E_TIMEOUT' })).ok).toBe(false);
    expect(parseEvidenceReceipt(receipt('run.sealed', { final_state: 'GRADED', evidence_digest: sha('9') })).ok).toBe(false);
  });

  it('run.submitted: the embedded spec is held to the RunSpec contract (I-3)', () => {
    const spec = { name: 'x', steps: [{ argv: 'make test' }] };
    const result = parseEvidenceReceipt(receipt('run.submitted', { ...FIELDS['run.submitted'], spec }));
    expect(result).toMatchObject({ ok: false, reason: 'invalid_fields' });
    if (!result.ok) expect(result.message).toMatch(/spec\.steps\[0\]\.argv: argv must be an array of strings/);
  });

  it('sandbox.created: a receipt from before `hardening` existed still reads; a hardening that is not one does not', () => {
    const { hardening, ...before } = FIELDS['sandbox.created'] as { hardening: Record<string, unknown> };
    expect(parseEvidenceReceipt(receipt('sandbox.created', before)).ok).toBe(true);
    // Written before the seccomp profile's hash and the userns flag were recorded: still reads.
    const { seccomp_profile_sha256: _sha, userns_remap: _userns, ...older } = hardening;
    expect(parseEvidenceReceipt(receipt('sandbox.created', { ...before, hardening: { ...older, seccomp: 'default' } })).ok).toBe(true);
    for (const bad of [
      { user: 'root' },
      { cap_drop: ['all'] },
      { pids_limit: 0 },
      { seccomp: 'off' },
      { tmpfs: { work: { size_bytes: 1, exec: true } } },
      { extra: true },
      { seccomp_profile_sha256: 'sha256:abc' },
      { userns_remap: 'yes' },
    ]) {
      expect(parseEvidenceReceipt(receipt('sandbox.created', { ...before, hardening: { ...hardening, ...bad } })).ok, JSON.stringify(bad)).toBe(false);
    }
  });

  it('run.cancel_requested: only who asked and why; the reason is optional', () => {
    expect(parseEvidenceReceipt(receipt('run.cancel_requested', { requested_by: 'key:abc123' })).ok).toBe(true);
    expect(parseEvidenceReceipt(receipt('run.cancel_requested', { requested_by: 'key:abc123', reason: 'a\u0000b' })).ok).toBe(false);
    expect(parseEvidenceReceipt(receipt('run.cancel_requested', { reason: 'no one asked' })).ok).toBe(false);
  });

  it('egress.denied carries E_EGRESS only', () => {
    expect(parseEvidenceReceipt(receipt('egress.denied', { ...FIELDS['egress.denied'], error_code: 'E_INTERNAL' })).ok).toBe(false);
  });
});

describe('parseEvidenceReceipt', () => {
  it('tells an unknown event type from invalid fields', () => {
    expect(parseEvidenceReceipt(receipt('step.teleported', {}))).toMatchObject({
      ok: false,
      reason: 'unknown_event_type',
      type: 'step.teleported',
      message: 'unknown event type "step.teleported"',
    });
    expect(parseEvidenceReceipt(receipt('step.completed', { ...FIELDS['step.completed'], exit_code: 'zero' }))).toMatchObject({
      ok: false,
      reason: 'invalid_fields',
      type: 'step.completed',
      issues: [{ path: 'exit_code', message: expect.any(String) as string }],
    });
  });

  it('calls a non-object or a missing type invalid, not unknown', () => {
    for (const input of [null, 42, 'run.submitted', [], { ...receipt('run.sealed'), type: undefined }, { ...receipt('run.sealed'), type: 7 }]) {
      expect(parseEvidenceReceipt(input)).toMatchObject({ ok: false, reason: 'invalid_fields', type: null });
    }
  });

  it('refuses a later schema version as invalid fields (readers upcast; v1 readers do not guess)', () => {
    expect(parseEvidenceReceipt({ ...receipt('run.sealed'), v: 2 })).toMatchObject({ ok: false, reason: 'invalid_fields' });
  });

  it('refuses envelope damage: a bad run id, a non-UTC timestamp, an upper-case hash', () => {
    expect(parseEvidenceReceipt({ ...receipt('run.sealed'), run_id: 'RUN_1' }).ok).toBe(false);
    expect(parseEvidenceReceipt({ ...receipt('run.sealed'), ts: '2026-01-01T00:00:03+02:00' }).ok).toBe(false);
    expect(parseEvidenceReceipt({ ...receipt('run.sealed'), hash: sha('A') }).ok).toBe(false);
  });
});
