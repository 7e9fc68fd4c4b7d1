import { FROZEN_CAPS, parsePolicy, PolicyDecidedSchema, RunSpecSchema } from '@cairn/contracts';
import { canonicalJson } from '@cairn/evidence';
import { describe, expect, it } from 'vitest';
import { decidePolicy, policyDecidedFields } from './decide-policy.js';
import type { PolicyContext, PolicySpec } from './decide-policy.js';
import { DEFAULT_POLICY } from './default-policy.constants.js';
import type { CapName, PolicyDocument } from '@cairn/contracts';
import { policyVersion } from './policy-version.js';

const DIGEST_A = `sha256:${'a'.repeat(64)}`;
const DIGEST_B = `sha256:${'b'.repeat(64)}`;

function spec(extra: Partial<PolicySpec> = {}): PolicySpec {
  return { steps: [{ argv: ['echo', 'hi'] }], ...extra };
}

function policyWith(change: (policy: PolicyDocument) => void): PolicyDocument {
  const policy = structuredClone<PolicyDocument>(DEFAULT_POLICY);
  change(policy);
  return policy;
}

function decide(s: PolicySpec, context: Partial<PolicyContext> = {}) {
  return decidePolicy(s, { policy: DEFAULT_POLICY, ...context });
}

/** The envelope a `policy.decided` receipt carries beside the decision's own fields. */
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

describe('decidePolicy: defaults', () => {
  it('given a spec with no image, caps or network, when decided, then it is allowed with the default image and caps', () => {
    const outcome = decide(spec());
    expect(outcome).toEqual({
      decision: 'allow',
      policy_version: policyVersion(DEFAULT_POLICY),
      reasons: [],
      effective: {
        image: 'cairn/sandbox-busybox:1',
        image_digest: null,
        caps: { wall_seconds: 60, memory_mib: 256, pids: 64, disk_mib: 256, cpus: 1 },
        network: 'none',
        secrets: [],
      },
      approvals: [],
      budget: {},
    });
  });

  it('given some caps requested, when decided, then the others take the policy defaults', () => {
    const outcome = decide(spec({ caps: { memoryMiB: 1024, cpus: 2 } }));
    expect(outcome.effective.caps).toEqual({ wall_seconds: 60, memory_mib: 1024, pids: 64, disk_mib: 256, cpus: 2 });
  });

  it('given any outcome, when it goes on the chain, then it is canonical JSON and fits the policy.decided receipt', () => {
    const outcomes = [
      decide(spec()),
      decide(spec({ image: 'evil:1', caps: { pids: 9999 } })),
      decide(spec({ job: 'nightly' }), { jobRuns: Array.from({ length: 6 }, (_, i) => ({ runId: `run_${i}`, seconds: 1 })) }),
      decide(spec(), { policy: policyWith((p) => (p.approvals.rules = [{ when: { image: 'cairn/sandbox-busybox:1' } }])) }),
    ];
    expect(outcomes.map((o) => o.decision)).toEqual(['allow', 'deny', 'deny', 'hold']);
    for (const outcome of outcomes) {
      expect(() => canonicalJson(outcome)).not.toThrow();
      const parsed = PolicyDecidedSchema.safeParse({ ...ENVELOPE, ...policyDecidedFields(outcome) });
      expect(parsed.error?.issues ?? []).toEqual([]);
    }
  });

  it('given an allowed run with a known digest, when turned into receipt fields, then the image carries its digest', () => {
    const outcome = decide(spec(), { localImageDigests: { 'cairn/sandbox-busybox:1': DIGEST_A } });
    expect(policyDecidedFields(outcome)).toEqual({
      decision: 'allow',
      policy_version: policyVersion(DEFAULT_POLICY),
      reasons: [],
      caps: outcome.effective.caps,
      image: `cairn/sandbox-busybox:1@${DIGEST_A}`,
    });
  });

  it('given a denied run, when turned into receipt fields, then it names the error and grants no caps or image', () => {
    const fields = policyDecidedFields(decide(spec({ image: 'evil:1' })));
    expect(fields).toEqual({
      decision: 'deny',
      policy_version: policyVersion(DEFAULT_POLICY),
      reasons: ['image evil:1 is not on the policy\'s allowlist'],
      error_code: 'E_POLICY_DENIED',
    });
  });
});

describe('decidePolicy: caps are refused over the maximum, never clamped (I-6)', () => {
  const AT_FROZEN: Record<Exclude<CapName, 'cpus'>, number> = {
    wallSeconds: FROZEN_CAPS.wallSeconds,
    memoryMiB: FROZEN_CAPS.memoryMiB,
    pids: FROZEN_CAPS.pids,
    diskMiB: FROZEN_CAPS.diskMiB,
  };

  it.each(Object.entries(AT_FROZEN))('given %s exactly at the frozen cap %i, when decided, then it is allowed', (cap, value) => {
    const outcome = decide(spec({ caps: { [cap]: value } }));
    expect(outcome.decision).toBe('allow');
    expect(outcome.reasons).toEqual([]);
  });

  it.each(Object.entries(AT_FROZEN))('given %s one over the frozen cap %i, when decided, then it is denied naming the cap, value and maximum', (cap, value) => {
    const outcome = decide(spec({ caps: { [cap]: value + 1 } }));
    expect(outcome.decision).toBe('deny');
    expect(outcome.error_code).toBe('E_POLICY_DENIED');
    expect(outcome.reasons).toEqual([`caps.${cap} ${value + 1} exceeds the maximum ${value} (frozen cap)`]);
    // Recorded as asked, not clamped to the maximum.
    expect(Object.values(outcome.effective.caps)).toContain(value + 1);
  });

  it('given cpus at and over the policy maximum, when decided, then at is allowed and over is denied', () => {
    expect(decide(spec({ caps: { cpus: 4 } })).decision).toBe('allow');
    expect(decide(spec({ caps: { cpus: 4.5 } })).reasons).toEqual(['caps.cpus 4.5 exceeds the maximum 4 (policy maximum)']);
  });

  it('given a policy that lowers each cap, when a run asks for the lowered maximum and one over, then at is allowed and over denied', () => {
    const policy = policyWith((p) => {
      p.caps.max = { wallSeconds: 120, memoryMiB: 512, pids: 100, diskMiB: 300, cpus: 2 };
    });
    const lowered = { wallSeconds: 120, memoryMiB: 512, pids: 100, diskMiB: 300, cpus: 2 } as const;
    for (const [cap, max] of Object.entries(lowered)) {
      expect(decide(spec({ caps: { [cap]: max } }), { policy }).decision).toBe('allow');
      const over = decide(spec({ caps: { [cap]: max + 1 } }), { policy });
      expect(over.reasons).toEqual([`caps.${cap} ${max + 1} exceeds the maximum ${max} (policy maximum)`]);
    }
  });

  it('given retries up to the frozen 3, when decided under a policy without retries.max, then 3 is allowed and 4 denied naming retries', () => {
    expect(decide(spec({ retries: 3 })).decision).toBe('allow');
    const over = decide(spec({ retries: 4 }));
    expect(over.error_code).toBe('E_POLICY_DENIED');
    expect(over.reasons).toEqual(['retries 4 exceeds the maximum 3 (frozen maximum)']);
  });

  it('given a policy that lowers retries.max to 1, when a run asks for 1 and 2, then 1 is allowed and 2 refused, not clamped', () => {
    const policy = policyWith((p) => (p.retries = { max: 1 }));
    expect(decide(spec({ retries: 1 }), { policy }).decision).toBe('allow');
    const over = decide(spec({ retries: 2 }), { policy });
    expect(over.decision).toBe('deny');
    expect(over.reasons).toEqual(['retries 2 exceeds the maximum 1 (policy maximum)']);
  });

  it('given a policy whose retries.max raises the frozen 3, when any run is decided, then it is denied: the policy is invalid', () => {
    const policy = policyWith((p) => (p.retries = { max: 4 }));
    const outcome = decide(spec(), { policy });
    expect(outcome.decision).toBe('deny');
    expect(outcome.reasons.join('\n')).toMatch(/policy is invalid at retries\.max: a policy may only lower the frozen retries 3/);
  });

  it('given a policy that tries to raise the frozen caps, when a run asks for more than the frozen caps, then it is still denied', () => {
    const raising = policyWith((p) => {
      p.caps.max.memoryMiB = 65_536;
      p.caps.max.wallSeconds = 3600;
    });
    const outcome = decide(spec({ caps: { memoryMiB: 8192, wallSeconds: 1200 } }), { policy: raising });
    expect(outcome.decision).toBe('deny');
    expect(outcome.error_code).toBe('E_POLICY_DENIED');
    expect(outcome.reasons).toEqual([
      'policy is invalid at caps.max.wallSeconds: 3600 raises the frozen wallSeconds 600; a policy may only lower it',
      'policy is invalid at caps.max.memoryMiB: 65536 raises the frozen memoryMiB 4096; a policy may only lower it',
      'caps.wallSeconds 1200 exceeds the maximum 600 (frozen cap)',
      'caps.memoryMiB 8192 exceeds the maximum 4096 (frozen cap)',
    ]);
  });

  it('given a policy that tries to raise a frozen cap, when even a modest run is decided under it, then it is denied', () => {
    const raising = policyWith((p) => (p.caps.max.pids = 1024));
    const outcome = decide(spec(), { policy: raising });
    expect(outcome.decision).toBe('deny');
    expect(outcome.reasons).toEqual(['policy is invalid at caps.max.pids: 1024 raises the frozen pids 256; a policy may only lower it']);
  });

  it('given several caps over, when decided, then every one is reported, not only the first', () => {
    const outcome = decide(spec({ caps: { wallSeconds: 601, pids: 257, diskMiB: 9000 } }));
    expect(outcome.reasons).toHaveLength(3);
  });

  it('given a cap that is not a positive number (a spec that bypassed the schema), when decided, then it is denied', () => {
    const outcome = decide(spec({ caps: { pids: 0, memoryMiB: Number.NaN, wallSeconds: 1.5 } }));
    expect(outcome.decision).toBe('deny');
    expect(outcome.reasons).toEqual([
      'caps.wallSeconds 1.5 is not a positive integer',
      'caps.memoryMiB NaN is not a positive integer',
      'caps.pids 0 is not a positive integer',
    ]);
  });

  it('given a step timeout at the wall cap, when decided, then it is allowed; one over is denied', () => {
    const at = decide(spec({ caps: { wallSeconds: 120 }, steps: [{ argv: ['a'] }, { argv: ['b'], timeoutSeconds: 120 }] }));
    expect(at.decision).toBe('allow');
    const over = decide(spec({ caps: { wallSeconds: 120 }, steps: [{ argv: ['a'] }, { argv: ['b'], timeoutSeconds: 121 }] }));
    expect(over.reasons).toEqual(['steps[1].timeoutSeconds 121 exceeds caps.wallSeconds 120']);
  });

  it('given a step timeout over the default wall time, when decided, then it is measured against the default', () => {
    const outcome = decide(spec({ steps: [{ argv: ['a'], timeoutSeconds: 61 }] }));
    expect(outcome.reasons).toEqual(['steps[0].timeoutSeconds 61 exceeds caps.wallSeconds 60']);
  });
});

describe('decidePolicy: images', () => {
  it('given the other allowed image, when decided, then it is used', () => {
    const outcome = decide(spec({ image: 'cairn/sandbox-debian:1' }));
    expect(outcome.decision).toBe('allow');
    expect(outcome.effective.image).toBe('cairn/sandbox-debian:1');
  });

  it('given an image not on the allowlist, when decided, then it is denied by name', () => {
    const outcome = decide(spec({ image: 'cairn/sandbox-busybox:2' }));
    expect(outcome).toMatchObject({ decision: 'deny', error_code: 'E_POLICY_DENIED', reasons: ["image cairn/sandbox-busybox:2 is not on the policy's allowlist"] });
  });

  describe('given a repository on the allowlist (images built from Dockerfiles)', () => {
    it('when an image of it is requested by digest, then it is allowed with that digest', () => {
      const outcome = decide(spec({ image: `cairn/built:0123abcd@${DIGEST_A}` }), { localImageDigests: { 'cairn/built:0123abcd': DIGEST_A } });
      expect(outcome.decision).toBe('allow');
      expect(outcome.effective).toMatchObject({ image: 'cairn/built:0123abcd', image_digest: DIGEST_A });
    });

    it('when one is requested without a digest, or the local image is another, then it is denied', () => {
      expect(decide(spec({ image: 'cairn/built:0123abcd' }))).toMatchObject({
        decision: 'deny',
        reasons: ['image cairn/built:0123abcd: images of cairn/built must be requested by digest (cairn/built:0123abcd@sha256:…)'],
      });
      expect(decide(spec({ image: `cairn/built:0123abcd@${DIGEST_A}` }), { localImageDigests: { 'cairn/built:0123abcd': DIGEST_B } })).toMatchObject({ decision: 'deny' });
    });

    it('when another repository with a similar name is requested, then it is not admitted by it', () => {
      expect(decide(spec({ image: `cairn/built-other:1@${DIGEST_A}` })).decision).toBe('deny');
      expect(decide(spec({ image: `cairn/builtx@${DIGEST_A}` })).decision).toBe('deny');
    });
  });

  describe('given the allowlist pins a digest', () => {
    const pinned = policyWith((p) => (p.images.allow[0] = { name: 'cairn/sandbox-busybox:1', digest: DIGEST_A }));

    it('when the local image has that digest, then it is allowed and the digest is what the run must use', () => {
      const outcome = decide(spec(), { policy: pinned, localImageDigests: { 'cairn/sandbox-busybox:1': DIGEST_A } });
      expect(outcome.decision).toBe('allow');
      expect(outcome.effective.image_digest).toBe(DIGEST_A);
    });

    it('when the local image has another digest, then it is denied', () => {
      const outcome = decide(spec(), { policy: pinned, localImageDigests: { 'cairn/sandbox-busybox:1': DIGEST_B } });
      expect(outcome.reasons).toEqual([`image cairn/sandbox-busybox:1: the local image has digest ${DIGEST_B}, not the pinned ${DIGEST_A}`]);
      expect(outcome.error_code).toBe('E_POLICY_DENIED');
    });

    it('when the spec asks for another digest, then it is denied', () => {
      const outcome = decide(spec({ image: `cairn/sandbox-busybox:1@${DIGEST_B}` }), { policy: pinned });
      expect(outcome.reasons).toEqual([`image cairn/sandbox-busybox:1: requested digest ${DIGEST_B} is not the pinned ${DIGEST_A}`]);
    });

    it('when the local digest is not known, then it is allowed and carries the pin for the runtime to enforce', () => {
      const outcome = decide(spec(), { policy: pinned });
      expect(outcome.decision).toBe('allow');
      expect(outcome.effective.image_digest).toBe(DIGEST_A);
    });
  });

  it('given no pin but the spec names a digest the local image does not have, when decided, then it is denied', () => {
    const outcome = decide(spec({ image: `cairn/sandbox-debian:1@${DIGEST_A}` }), { localImageDigests: { 'cairn/sandbox-debian:1': DIGEST_B } });
    expect(outcome.decision).toBe('deny');
    expect(outcome.reasons).toEqual([`image cairn/sandbox-debian:1: the local image has digest ${DIGEST_B}, not the requested ${DIGEST_A}`]);
  });
});

describe('decidePolicy: network and secrets', () => {
  it('given egress requested while the policy denies egress, when decided, then it is denied naming the hosts', () => {
    const outcome = decide(spec({ network: { egress: ['pypi.org:443', 'files.pythonhosted.org:443'] } }));
    expect(outcome).toMatchObject({
      decision: 'deny',
      error_code: 'E_POLICY_DENIED',
      reasons: ['network: egress to pypi.org:443, files.pythonhosted.org:443 requested, but the policy denies all egress'],
    });
  });

  it('given network none, when decided, then it is allowed with no network', () => {
    expect(decide(spec({ network: 'none' })).effective.network).toBe('none');
  });

  it('given secrets referenced while no secret store exists, when decided, then it is denied (fail closed)', () => {
    const outcome = decide(spec({ secrets: ['API_TOKEN'] }));
    expect(outcome.reasons).toEqual(['secrets: no secret store is configured, so API_TOKEN cannot be provided']);
  });

  const KEY = 'k-1';
  const store = [
    { name: 'API_TOKEN', grantees: [`key:${KEY}`] },
    { name: 'BY_SCOPE', grantees: ['scope:runs:write'] },
    { name: 'OTHERS', grantees: ['key:k-2', 'scope:approve'] },
  ];
  const user = (scopes: string[]) => ({ key_id: KEY, scopes }) as unknown as PolicyContext['submitter'];

  it('given secrets the store holds, granted to a key with secrets:use (by id or by scope), when decided, then they are allowed by name only', () => {
    const outcome = decide(spec({ secrets: ['API_TOKEN', 'BY_SCOPE'] }), { secrets: store, submitter: user(['runs:write', 'secrets:use']) });
    expect(outcome.decision).toBe('allow');
    expect(outcome.effective.secrets).toEqual(['API_TOKEN', 'BY_SCOPE']);
  });

  it('given a secret the store lacks or a malformed name, when decided, then each is denied', () => {
    const outcome = decide(spec({ secrets: ['MISSING', 'not-a-name'] }), { secrets: store, submitter: user(['runs:write', 'secrets:use']) });
    expect(outcome.reasons).toEqual(['secrets: "not-a-name" is not a secret name', 'secrets: MISSING is not in the secret store']);
  });

  it('given a secret granted to others only, when decided, then it is denied naming the secret and the key', () => {
    const outcome = decide(spec({ secrets: ['API_TOKEN', 'OTHERS'] }), { secrets: store, submitter: user(['runs:write', 'secrets:use']) });
    expect(outcome).toMatchObject({ decision: 'deny', error_code: 'E_POLICY_DENIED', reasons: [`secrets: OTHERS is not granted to key ${KEY}`] });
  });

  it('given a granted secret and a key without secrets:use, when decided, then it is denied: the grant alone is not enough', () => {
    const outcome = decide(spec({ secrets: ['API_TOKEN'] }), { secrets: store, submitter: user(['runs:write', 'secrets:write']) });
    expect(outcome).toMatchObject({ decision: 'deny', error_code: 'E_POLICY_DENIED', reasons: [`secrets: API_TOKEN cannot be used: key ${KEY} lacks the secrets:use scope`] });
  });

  it('given no submitter on record (a receipt from before grants), when a secret is named, then it is denied; without secrets nothing changes', () => {
    expect(decide(spec({ secrets: ['BY_SCOPE'] }), { secrets: store })).toMatchObject({
      decision: 'deny',
      reasons: ['secrets: BY_SCOPE cannot be used: the submission records no API key scopes'],
    });
    expect(decide(spec(), { secrets: store }).decision).toBe('allow');
  });

  it('given an admin key, when decided, then every secret of the store is usable, granted or not', () => {
    expect(decide(spec({ secrets: ['OTHERS', 'API_TOKEN'] }), { secrets: store, submitter: user(['admin']) }).decision).toBe('allow');
  });
});

describe('decidePolicy: approvals', () => {
  const egressRule = policyWith((p) => (p.approvals.rules = [{ when: 'egress' }]));
  const imageRule = policyWith((p) => (p.approvals.rules = [{ when: { image: 'cairn/sandbox-debian:1' }, timeoutSeconds: 600 }]));

  it('given an image approval rule, when a run uses that image, then it is held with the approval it awaits', () => {
    const outcome = decide(spec({ image: 'cairn/sandbox-debian:1' }), { policy: imageRule });
    expect(outcome.decision).toBe('hold');
    expect(outcome.error_code).toBeUndefined();
    expect(outcome.reasons).toEqual(['awaiting approval image: image cairn/sandbox-debian:1 needs approval']);
    expect(outcome.approvals).toEqual([
      { approval_id: 'image', scope: 'run', step_index: null, trigger: 'image', reason: 'image cairn/sandbox-debian:1 needs approval', timeout_seconds: 600, granted: false },
    ]);
  });

  it('given an image approval rule, when a run uses another image, then it is allowed', () => {
    expect(decide(spec(), { policy: imageRule })).toMatchObject({ decision: 'allow', approvals: [] });
  });

  it('given the approval was granted, when decided again, then it is allowed and the grant is recorded', () => {
    const outcome = decide(spec({ image: 'cairn/sandbox-debian:1' }), { policy: imageRule, grantedApprovals: ['image'] });
    expect(outcome.decision).toBe('allow');
    expect(outcome.approvals[0]?.granted).toBe(true);
  });

  it('given steps marked apply under the default policy, when decided, then the run is allowed and each step awaits its own approval', () => {
    const outcome = decide(spec({ steps: [{ argv: ['test'] }, { argv: ['deploy'], apply: true }, { argv: ['notify'], apply: false }] }));
    expect(outcome.decision).toBe('allow');
    expect(outcome.approvals).toEqual([
      { approval_id: 'step-1', scope: 'step', step_index: 1, trigger: 'apply_step', reason: 'step 1 is marked apply', timeout_seconds: 86_400, granted: false },
    ]);
  });

  it('given a hold and a refusal at once, when decided, then the refusal wins', () => {
    const outcome = decide(spec({ image: 'cairn/sandbox-debian:1', caps: { pids: 300 } }), { policy: imageRule });
    expect(outcome.decision).toBe('deny');
    expect(outcome.error_code).toBe('E_POLICY_DENIED');
  });

  it('given an egress approval rule, when egress is requested, then policy still denies it while egress is denied', () => {
    const outcome = decide(spec({ network: { egress: ['pypi.org:443'] } }), { policy: egressRule });
    expect(outcome.decision).toBe('deny');
    expect(outcome.approvals.map((a) => a.approval_id)).toEqual(['egress']);
  });
});

describe('decidePolicy: job budgets', () => {
  it('given a job with five earlier runs, when the sixth is decided, then it is allowed', () => {
    const jobRuns = Array.from({ length: 5 }, (_, i) => ({ runId: `run_${i}`, seconds: 60 }));
    expect(decide(spec({ job: 'nightly' }), { jobRuns }).decision).toBe('allow');
  });

  it('given a job with six earlier runs, when a seventh is decided, then it is denied with E_BUDGET', () => {
    const jobRuns = Array.from({ length: 6 }, (_, i) => ({ runId: `run_${i}`, seconds: 60 }));
    const outcome = decide(spec({ job: 'nightly' }), { jobRuns });
    expect(outcome).toMatchObject({ decision: 'deny', error_code: 'E_BUDGET', reasons: ['job nightly: this would be run 7 of a job allowed 6 runs'] });
  });

  it('given a job whose usage the caller did not supply, when decided, then it is denied: an unchecked budget is no budget', () => {
    expect(decide(spec({ job: 'nightly' }))).toMatchObject({ decision: 'deny', error_code: 'E_BUDGET' });
  });

  it('given a policy with a lower budget, when decided, then the lower budget holds', () => {
    const policy = policyWith((p) => (p.budgets.runsPerJob = 2));
    const outcome = decide(spec({ job: 'nightly' }), { policy, jobRuns: [{ runId: 'run_a', seconds: 1 }, { runId: 'run_b', seconds: 1 }] });
    expect(outcome.error_code).toBe('E_BUDGET');
  });

  it('given a budget refusal and a policy refusal, when decided, then the code is E_POLICY_DENIED and both reasons are listed', () => {
    const jobRuns = Array.from({ length: 6 }, (_, i) => ({ runId: `run_${i}`, seconds: 60 }));
    const outcome = decide(spec({ job: 'nightly', image: 'evil:1' }), { jobRuns });
    expect(outcome.error_code).toBe('E_POLICY_DENIED');
    expect(outcome.reasons).toHaveLength(2);
  });
});

describe('decidePolicy: the receipt stays bounded', () => {
  it('given more refusals than a receipt holds, when decided, then 63 are kept and the rest counted', () => {
    const steps = Array.from({ length: 64 }, () => ({ argv: ['x'], timeoutSeconds: 601 }));
    const parsed = RunSpecSchema.parse({ name: 'many', steps, caps: { pids: 999 } });
    const outcome = decide(parsed);
    expect(outcome.reasons).toHaveLength(64);
    expect(outcome.reasons[63]).toBe('… and 2 more');
  });

  it('given a reason longer than a receipt holds, when decided, then it is cut to 1024 characters and marked', () => {
    const hosts = Array.from({ length: 64 }, (_, i) => `host-${i}.${'x'.repeat(40)}.example.com:443`);
    const outcome = decide(spec({ network: { egress: hosts } }));
    expect(outcome.reasons[0]).toHaveLength(1024);
    expect(outcome.reasons[0]?.endsWith('…')).toBe(true);
  });

  it('given the same inputs twice, when decided, then the outcomes are equal (deterministic)', () => {
    const s = spec({ image: 'cairn/sandbox-debian:1', caps: { pids: 128 }, steps: [{ argv: ['a'], apply: true }] });
    expect(decide(s)).toEqual(decide(s));
    expect(decidePolicy(s, { policy: parsePolicy(structuredClone(DEFAULT_POLICY)) })).toEqual(decide(s));
  });
});
