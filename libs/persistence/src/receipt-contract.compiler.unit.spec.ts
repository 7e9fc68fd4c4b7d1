import { EVENT_RECEIPT_SCHEMAS, isEventType, parseEvidenceReceipt } from '@cairn/contracts';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { compileSchema, passesReceiptContract } from './receipt-contract.compiler.js';
import { FixtureChain, runLifecycleEvents, sandboxSessionEvents } from './testing/evidence.fixture.js';

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
  limits_hit: ['memory'],
  redactions: [{ stream: 'stdout', pattern: 'github-token', count: 1 }],
};

/** Valid type-specific fields, with optional and nullable fields filled where they exist. */
const FIELDS: Record<string, Record<string, unknown>> = {
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
  },
  'step.started': { step_index: 0, stage: 'step', tool: 'make', argv: ['make', 'test'], workdir: '/work', env_names: ['CI'] },
  'step.completed': { step_index: 0, stage: 'step', tool: 'make', argv: ['make', 'test'], ...processResult, artifact_hashes: { '/out/junit.xml': sha('e') } },
  'sandbox.destroyed': { container_name: 'cairn-run_abc', verified_gone: true, reason: 'completed', duration_ms: 900 },
  'run.executed': { steps_completed: 1, exit_codes: [2], artifact_hashes: { '/out/junit.xml': sha('e') }, duration_ms: 1000 },
  'kernel.facts': { facts: { junit: { tests: 3, failed: 1 }, exit_codes: [2], note: null, ok: true }, operations: ['junit', 'exit_codes'] },
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
  'run.failed': { error_code: 'E_IMAGE_PULL', message: 'image cairn/sandbox:9 not found', step_index: 0 },
  'run.rolled_back': { error_code: 'E_TIMEOUT', message: 'step 0 passed 600 s' },
  'run.cancel_requested': { requested_by: 'key:abc123', reason: 'not needed' },
  'run.cancelled': { cancelled_by: 'key:abc123', reason: 'not needed' },
  'run.sealed': { final_state: 'SEALED', evidence_digest: sha('9') },
  'sandbox.requested': { spec: { image: 'cairn/sandbox:1', ttlSeconds: 900 }, spec_sha256: sha('a'), requested_by: 'key:agent1', expires_at: '2026-01-01T00:15:00.000Z' },
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

function sampleReceipt(type: string, fields: Record<string, unknown>): Record<string, unknown> {
  const chain = type.startsWith('admin.') ? 'adm_acme' : type.startsWith('sandbox.') && type !== 'sandbox.created' && type !== 'sandbox.destroyed' ? 'sbx_s1' : 'run_r1';
  return { v: 1, seq: 3, run_id: chain, tenant: 'acme', type, actor: 'runtime', ts: '2026-01-01T00:00:03.123Z', causation: `${chain}:2`, ...fields, prev_hash: sha('7'), hash: sha('8') };
}

/** Valid receipts: the table above (types the contracts know) and whole fixture chains. */
function validReceipts(): Record<string, unknown>[] {
  const table = Object.entries(FIELDS)
    .filter(([type]) => isEventType(type))
    .map(([type, fields]) => sampleReceipt(type, fields));
  const run = new FixtureChain('run_c1');
  const sandbox = new FixtureChain('sbx_c1');
  return [...table, ...runLifecycleEvents('run_c1', 3).map((e) => run.next(e)), ...sandboxSessionEvents('sbx_c1').map((e) => sandbox.next(e))];
}

/** Stands for `1e400` in a mutant's JSON text, which JSON.parse reads as Infinity. */
const INFINITE = '<1e400>';
/** Values that break, or sometimes still meet, one field's rules. */
const REPLACEMENTS: unknown[] = [null, true, 0, -1, 1.5, 2 ** 53, 1e300, INFINITE, '', 'x', 'A', ' /work ', 'a'.repeat(5000), 'a\u0000b', [], [1], {}, { a: 1 }];

/** Every variant of `receipt` with one node replaced, one key removed or one key added. */
function* mutants(receipt: unknown): Generator<unknown> {
  const paths: (string | number)[][] = [];
  const walk = (node: unknown, path: (string | number)[]) => {
    paths.push(path);
    if (Array.isArray(node)) node.forEach((child, i) => walk(child, [...path, i]));
    else if (typeof node === 'object' && node !== null) for (const [key, child] of Object.entries(node)) walk(child, [...path, key]);
  };
  walk(receipt, []);
  const at = (root: unknown, path: (string | number)[], change: (parent: Record<string | number, unknown>, key: string | number) => void) => {
    const copy = structuredClone(root) as Record<string | number, unknown>;
    let parent = copy;
    for (const key of path.slice(0, -1)) parent = parent[key] as Record<string | number, unknown>;
    change(parent, path[path.length - 1]!);
    return copy;
  };
  for (const path of paths.filter((p) => p.length > 0)) {
    for (const value of REPLACEMENTS) yield at(receipt, path, (parent, key) => (parent[key] = value));
    yield at(receipt, path, (parent, key) => {
      if (Array.isArray(parent)) parent.splice(Number(key), 1);
      else delete parent[key];
    });
    yield at(receipt, path, (parent, key) => {
      const node = parent[key];
      if (Array.isArray(node)) node.push(node[0] ?? 'x');
      else if (typeof node === 'object' && node !== null) (node as Record<string, unknown>).extra_key = 1;
    });
  }
  yield { ...(receipt as object), extra_key: 1 };
}

describe('passesReceiptContract', () => {
  it('compiles every receipt type of the contracts (none falls back to zod)', () => {
    const fallsBack = Object.entries(EVENT_RECEIPT_SCHEMAS)
      .filter(([, schema]) => compileSchema(schema) === null)
      .map(([type]) => type);
    expect(fallsBack).toEqual([]);
  });

  it('passes every valid receipt, as zod does', () => {
    const receipts = validReceipts();
    expect(receipts.length).toBeGreaterThan(40);
    for (const receipt of receipts) {
      const value: unknown = JSON.parse(JSON.stringify(receipt));
      expect([receipt.type, parseEvidenceReceipt(value).ok]).toEqual([receipt.type, true]);
      expect([receipt.type, typeof value === 'object' && value !== null && passesReceiptContract(value)]).toEqual([receipt.type, true]);
    }
  });

  it('never passes a receipt zod refuses, nor one zod would return changed (thousands of mutants)', () => {
    let passed = 0;
    let refused = 0;
    for (const receipt of validReceipts()) {
      for (const mutant of mutants(receipt)) {
        const value: unknown = JSON.parse(JSON.stringify(mutant).replaceAll(`"${INFINITE}"`, '1e400'));
        if (typeof value !== 'object' || value === null || !passesReceiptContract(value)) {
          refused += 1;
          continue;
        }
        passed += 1;
        const zod = parseEvidenceReceipt(value);
        expect(zod.ok, JSON.stringify(value)).toBe(true);
        if (zod.ok) expect(zod.receipt).toEqual(value);
      }
    }
    // Both answers happen: the mutants are neither all valid nor all invalid.
    expect(passed).toBeGreaterThan(100);
    expect(refused).toBeGreaterThan(5000);
  });

  it('leaves a __proto__ key, an unknown type and a non-string type to zod', () => {
    const receipt = JSON.stringify(sampleReceipt('step.completed', FIELDS['step.completed']!));
    const withProto: unknown = JSON.parse(receipt.replace('"/out/junit.xml":', '"__proto__":"x","/out/junit.xml":'));
    expect(typeof withProto === 'object' && withProto !== null && passesReceiptContract(withProto)).toBe(false);
    expect(passesReceiptContract({ ...sampleReceipt('run.sealed', FIELDS['run.sealed']!), type: 'run.unheard_of' })).toBe(false);
    expect(passesReceiptContract({ ...sampleReceipt('run.sealed', FIELDS['run.sealed']!), type: 7 })).toBe(false);
  });
});

describe('compileSchema', () => {
  const passes = (schema: z.core.$ZodType, value: unknown) => compileSchema(schema)!(value);

  it('follows strict objects, optional and nullable fields, arrays, records, unions and lazy schemas', () => {
    const tree: z.ZodType = z.lazy(() => z.union([z.number(), z.array(tree)]));
    const schema = z.strictObject({
      a: z.string().regex(/^a+$/),
      b: z.number().int().min(1).optional(),
      c: z.string().nullable(),
      d: z.array(z.enum(['x', 'y'])).max(2),
      e: z.record(z.string().regex(/^\//), z.literal(1)),
      f: tree,
    });
    const good = { a: 'aa', c: null, d: ['x'], e: { '/p': 1 }, f: [1, [2, [3]]] };
    expect(passes(schema, good)).toBe(true);
    expect(passes(schema, { ...good, b: 2 })).toBe(true);
    for (const bad of [{ ...good, a: 'b' }, { ...good, b: 1.5 }, { ...good, b: 0 }, { ...good, c: undefined }, { ...good, d: ['x', 'y', 'x'] }, { ...good, e: { p: 1 } }, { ...good, f: ['1'] }, { ...good, g: 1 }]) {
      expect([bad, passes(schema, bad)]).toEqual([bad, false]);
      expect(schema.safeParse(bad).success).toBe(false);
    }
  });

  it('runs refinements, and format schemas that are checks themselves', () => {
    const schema = z.strictObject({ n: z.int(), s: z.string().refine((s) => s !== 'no') });
    expect(passes(schema, { n: 1, s: 'yes' })).toBe(true);
    expect(passes(schema, { n: 1.5, s: 'yes' })).toBe(false);
    expect(passes(schema, { n: 1, s: 'no' })).toBe(false);
  });

  it('does not vouch for what zod would return changed, and leaves what it does not know to zod', () => {
    // z.url() trims: zod's output would not be the input.
    expect(passes(z.strictObject({ u: z.url() }), { u: ' https://example.com ' })).toBe(false);
    expect(z.strictObject({ u: z.url() }).safeParse({ u: ' https://example.com ' }).success).toBe(true);
    expect(compileSchema(z.string().trim())).toBeNull();
    expect(compileSchema(z.string().transform((s) => s.length))).toBeNull();
    expect(compileSchema(z.object({ a: z.string() }).catchall(z.number()))).toBeNull();
    expect(compileSchema(z.string().default('x'))).toBeNull();
  });
});
