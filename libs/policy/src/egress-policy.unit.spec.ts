import { PolicyDecidedSchema, validatePolicy } from '@cairn/contracts';
import { describe, expect, it } from 'vitest';
import { decidePolicy, policyDecidedFields } from './decide-policy.js';
import type { PolicySpec } from './decide-policy.js';
import { DEFAULT_POLICY } from './default-policy.constants.js';
import { egressNotAllowed, egressPatternMatches } from './egress-allowlist.js';
import type { PolicyDocument } from '@cairn/contracts';

/* The egress allowlist: the policy document's `network` section, matching, and the decision. */

function policyWith(network: unknown): PolicyDocument {
  return { ...structuredClone<PolicyDocument>(DEFAULT_POLICY), network } as PolicyDocument;
}

function issuesOf(doc: unknown): string[] {
  const result = validatePolicy(doc);
  return result.ok ? [] : result.issues.map((issue) => `${issue.path}: ${issue.message}`);
}

const spec = (egress: string[] | 'none'): PolicySpec => ({
  steps: [{ argv: ['echo', 'hi'] }],
  network: egress === 'none' ? 'none' : { egress },
});

const ALLOWLIST = policyWith({ egress: 'allowlist', allow: ['pypi.org:443', '*.pythonhosted.org:443', 'sink.test:8080'] });

const ENVELOPE = {
  v: 1,
  seq: 2,
  run_id: 'run_abc',
  tenant: 'default',
  type: 'policy.decided',
  actor: 'policy',
  ts: '2026-11-30T00:00:00.000Z',
  causation: 'run_abc:1',
} as const;

describe('the network section of a policy document', () => {
  it('given the default policy, when read, then egress is denied', () => {
    expect(DEFAULT_POLICY.network).toEqual({ egress: 'deny' });
  });

  it('given an allowlist of names, wildcards and allowPrivate, when validated, then it is valid', () => {
    expect(issuesOf(ALLOWLIST)).toEqual([]);
    expect(issuesOf(policyWith({ egress: 'allowlist', allow: ['mirror.internal:3128'], allowPrivate: true }))).toEqual([]);
  });

  it.each([
    ['an empty list', { egress: 'allowlist', allow: [] }, /network\.allow/],
    ['a host without a port', { egress: 'allowlist', allow: ['pypi.org'] }, /network\.allow\[0\]/],
    ['an upper-case host', { egress: 'allowlist', allow: ['PyPI.org:443'] }, /network\.allow\[0\]/],
    ['a port out of range', { egress: 'allowlist', allow: ['pypi.org:0'] }, /network\.allow\[0\]: the port is 1\.\.65535/],
    ['a wildcard on a top-level domain', { egress: 'allowlist', allow: ['*.com:443'] }, /network\.allow\[0\]: a wildcard needs a domain of at least two labels/],
    ['a bare wildcard', { egress: 'allowlist', allow: ['*:443'] }, /network\.allow\[0\]/],
    ['a wildcard port', { egress: 'allowlist', allow: ['pypi.org:*'] }, /network\.allow\[0\]/],
    ['an entry listed twice', { egress: 'allowlist', allow: ['pypi.org:443', 'pypi.org:443'] }, /network\.allow: pypi\.org:443 is listed twice/],
    ['allowPrivate that is not a boolean', { egress: 'allowlist', allow: ['a.example:1'], allowPrivate: 'yes' }, /network\.allowPrivate/],
    ['an allow list under deny', { egress: 'deny', allow: ['pypi.org:443'] }, /network.*allow/],
    ['an unknown mode', { egress: 'allow_all' }, /network/],
  ])('given %s, when validated, then it is refused', (_name, network, expected) => {
    expect(issuesOf(policyWith(network)).join('\n')).toMatch(expected);
  });
});

describe('egressPatternMatches', () => {
  it.each([
    ['pypi.org:443', 'pypi.org:443', true],
    ['pypi.org:443', 'pypi.org:80', false],
    ['pypi.org:443', 'evil-pypi.org:443', false],
    ['pypi.org:443', 'www.pypi.org:443', false],
    ['*.pythonhosted.org:443', 'files.pythonhosted.org:443', true],
    ['*.pythonhosted.org:443', 'a.b.pythonhosted.org:443', true],
    ['*.pythonhosted.org:443', 'pythonhosted.org:443', false],
    ['*.pythonhosted.org:443', 'evilpythonhosted.org:443', false],
    ['*.pythonhosted.org:443', 'files.pythonhosted.org.evil.com:443', false],
    ['*.pythonhosted.org:443', 'files.pythonhosted.org:80', false],
    ['*.0.1:80', '10.0.0.1:80', false],
    ['10.0.0.1:80', '10.0.0.1:80', true],
  ])('given %s, when %s is asked for, then it matches: %s', (pattern, requested, expected) => {
    expect(egressPatternMatches(pattern, requested)).toBe(expected);
  });

  it('given several requests, when checked, then the ones no entry admits are listed once each, in order', () => {
    expect(egressNotAllowed(['a.example:1', '*.b.example:2'], ['x.example:1', 'a.example:1', 'c.b.example:2', 'x.example:1', 'b.example:2'])).toEqual([
      'x.example:1',
      'b.example:2',
    ]);
  });
});

describe('decidePolicy: egress under an allowlist', () => {
  it('given hosts all on the allowlist, when decided, then the run is allowed with exactly the hosts it asked for', () => {
    const outcome = decidePolicy(spec(['files.pythonhosted.org:443', 'sink.test:8080', 'sink.test:8080']), { policy: ALLOWLIST });
    expect(outcome.decision).toBe('allow');
    expect(outcome.effective.network).toEqual({ egress: ['files.pythonhosted.org:443', 'sink.test:8080'], allow_private: false });
  });

  it('given a host not on the allowlist, when decided, then it is REJECTED E_POLICY_DENIED naming that host only', () => {
    const outcome = decidePolicy(spec(['pypi.org:443', 'evil.example:443', 'pypi.org:80']), { policy: ALLOWLIST });
    expect(outcome).toMatchObject({
      decision: 'deny',
      error_code: 'E_POLICY_DENIED',
      reasons: ["network: egress to evil.example:443, pypi.org:80 is not on the policy's egress allowlist"],
    });
  });

  it('given allowPrivate in the policy, when allowed, then the decision says so', () => {
    const policy = policyWith({ egress: 'allowlist', allow: ['sink.test:8080'], allowPrivate: true });
    expect(decidePolicy(spec(['sink.test:8080']), { policy }).effective.network).toEqual({ egress: ['sink.test:8080'], allow_private: true });
  });

  it('given the default policy, when egress is asked for, then it is still denied', () => {
    expect(decidePolicy(spec(['pypi.org:443']), { policy: DEFAULT_POLICY })).toMatchObject({ decision: 'deny', error_code: 'E_POLICY_DENIED' });
  });

  it('given an allowed egress run, when its receipt fields are built, then they carry the grant and pass the contract', () => {
    const fields = policyDecidedFields(decidePolicy(spec(['sink.test:8080']), { policy: ALLOWLIST }));
    expect(fields.network).toEqual({ egress: ['sink.test:8080'], allow_private: false });
    expect(PolicyDecidedSchema.safeParse({ ...ENVELOPE, ...fields }).success).toBe(true);
  });

  it('given a run without network, or a refused one, when its receipt fields are built, then they carry no network', () => {
    expect(policyDecidedFields(decidePolicy(spec('none'), { policy: ALLOWLIST })).network).toBeUndefined();
    expect(policyDecidedFields(decidePolicy(spec(['evil.example:443']), { policy: ALLOWLIST })).network).toBeUndefined();
  });

  it('given an egress approval rule and an allowlisted host, when decided, then the run is held for that approval', () => {
    const policy = { ...ALLOWLIST, approvals: { rules: [{ when: 'egress' as const }] } };
    const outcome = decidePolicy(spec(['pypi.org:443']), { policy });
    expect(outcome.decision).toBe('hold');
    expect(outcome.approvals.map((a) => a.approval_id)).toEqual(['egress']);
    expect(policyDecidedFields(outcome).network).toEqual({ egress: ['pypi.org:443'], allow_private: false });
  });
});
