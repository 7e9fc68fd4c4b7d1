import { FROZEN_CAPS, isCairnError, parsePolicy, validatePolicy } from '@cairn/contracts';
import type { PolicyDocument } from '@cairn/contracts';
import { describe, expect, it } from 'vitest';
import { DEFAULT_POLICY } from './default-policy.constants.js';
import { policyVersion } from './policy-version.js';

/** A deep, mutable copy of the default policy to change one thing in. */
function policyWith(change: (policy: PolicyDocument) => void): unknown {
  const policy = structuredClone<PolicyDocument>(DEFAULT_POLICY);
  change(policy);
  return policy;
}

function issuesOf(doc: unknown): string[] {
  const result = validatePolicy(doc);
  return result.ok ? [] : result.issues.map((issue) => `${issue.path}: ${issue.message}`);
}

describe('validatePolicy', () => {
  it('given the default policy, when validated, then it is valid and allows the two sandbox images and built ones by digest', () => {
    const result = validatePolicy(DEFAULT_POLICY);
    expect(result.ok).toBe(true);
    expect(DEFAULT_POLICY.images.allow).toEqual([{ name: 'cairn/sandbox-busybox:1' }, { name: 'cairn/sandbox-debian:1' }, { repository: 'cairn/built', requireDigest: true }]);
    expect(DEFAULT_POLICY.caps.defaults).toEqual({ wallSeconds: 60, memoryMiB: 256, pids: 64, diskMiB: 256, cpus: 1 });
  });

  it('given the default policy, when someone tries to raise a cap in it at run time, then it cannot (I-6)', () => {
    expect(() => {
      (DEFAULT_POLICY.caps.max as { memoryMiB: number }).memoryMiB = 1 << 20;
    }).toThrow(TypeError);
    expect(DEFAULT_POLICY.caps.max.memoryMiB).toBe(4096);
  });

  it('given maxima exactly at the frozen caps, when validated, then they are accepted', () => {
    const doc = policyWith((p) => {
      p.caps.max = { wallSeconds: 600, memoryMiB: 4096, pids: 256, diskMiB: 8192, cpus: 8 };
      p.budgets = { runsPerJob: 6, jobMinutes: 90 };
    });
    expect(issuesOf(doc)).toEqual([]);
  });

  it.each([
    ['wallSeconds', FROZEN_CAPS.wallSeconds],
    ['memoryMiB', FROZEN_CAPS.memoryMiB],
    ['pids', FROZEN_CAPS.pids],
    ['diskMiB', FROZEN_CAPS.diskMiB],
  ] as const)('given a policy raising %s one over the frozen cap, when validated, then it is invalid and says so', (cap, frozen) => {
    const doc = policyWith((p) => {
      p.caps.max[cap] = frozen + 1;
    });
    expect(issuesOf(doc)).toEqual([`caps.max.${cap}: ${frozen + 1} raises the frozen ${cap} ${frozen}; a policy may only lower it`]);
  });

  it.each([
    ['runsPerJob', FROZEN_CAPS.runsPerJob],
    ['jobMinutes', FROZEN_CAPS.jobMinutes],
  ] as const)('given a policy raising the %s budget over the frozen one, when validated, then it is invalid', (budget, frozen) => {
    const doc = policyWith((p) => {
      p.budgets[budget] = frozen + 1;
    });
    expect(issuesOf(doc)).toEqual([`budgets.${budget}: ${frozen + 1} raises the frozen ${budget} ${frozen}; a policy may only lower it`]);
  });

  it('given a policy lowering the caps and budgets, when validated, then it is valid', () => {
    const doc = policyWith((p) => {
      p.caps.max = { wallSeconds: 120, memoryMiB: 512, pids: 64, diskMiB: 256, cpus: 1 };
      p.budgets = { runsPerJob: 2, jobMinutes: 10 };
    });
    expect(issuesOf(doc)).toEqual([]);
  });

  it('given a default above its maximum, when validated, then it is invalid', () => {
    const doc = policyWith((p) => {
      p.caps.max.pids = 32;
    });
    expect(issuesOf(doc)).toEqual(['caps.defaults.pids: default 64 is above the maximum 32']);
  });

  it('given unknown keys anywhere, when validated, then each is refused', () => {
    const top = policyWith((p) => Object.assign(p, { extra: true }));
    const nested = policyWith((p) => Object.assign(p.caps.max, { gpus: 1 }));
    const network = policyWith((p) => Object.assign(p.network, { hosts: ['a:1'] }));
    expect(issuesOf(top).join()).toMatch(/extra/);
    expect(issuesOf(nested).join()).toMatch(/caps\.max.*gpus/);
    expect(issuesOf(network).join()).toMatch(/network.*hosts/);
  });

  it('given an egress mode that is neither deny nor allowlist, when validated, then it is refused', () => {
    expect(issuesOf(policyWith((p) => Object.assign(p.network, { egress: 'allow' }))).join()).toMatch(/network\.egress/);
  });

  it('given a default image that is not on the allowlist, when validated, then it is invalid', () => {
    const doc = policyWith((p) => {
      p.defaultImage = 'evil/image:latest';
    });
    expect(issuesOf(doc)).toEqual(['defaultImage: evil/image:latest is not on images.allow']);
  });

  it('given an image listed twice, or named with a digest, or a malformed pin, when validated, then each is refused', () => {
    const twice = policyWith((p) => p.images.allow.push({ name: 'cairn/sandbox-debian:1' }));
    const withDigest = policyWith((p) => p.images.allow.push({ name: `x/y:1@sha256:${'a'.repeat(64)}` }));
    const badPin = policyWith((p) => p.images.allow.push({ name: 'x/y:1', digest: 'md5:abc' }));
    expect(issuesOf(twice)).toEqual(['images.allow: cairn/sandbox-debian:1 is listed twice']);
    expect(issuesOf(withDigest).join()).toMatch(/without a digest/);
    expect(issuesOf(badPin).join()).toMatch(/images\.allow\[3\]\.digest/);
  });

  it('given approval rules of each kind, when validated, then they are accepted; a rule of another kind is not', () => {
    const ok = policyWith((p) => {
      p.approvals.rules = [{ when: 'egress' }, { when: 'apply_step', timeoutSeconds: 3600 }, { when: { image: 'cairn/sandbox-debian:1' } }];
    });
    const bad = policyWith((p) => Object.assign(p.approvals, { rules: [{ when: 'always' }] }));
    expect(issuesOf(ok)).toEqual([]);
    expect(issuesOf(bad).join()).toMatch(/approvals\.rules\[0\]\.when/);
  });

  it('given a document of another version, when validated, then it is refused', () => {
    expect(issuesOf(policyWith((p) => Object.assign(p, { version: 2 }))).join()).toMatch(/version/);
  });

  it('given an invalid policy, when parsed for boot, then it throws E_INPUT naming every problem', () => {
    const doc = policyWith((p) => {
      p.caps.max.memoryMiB = 8192;
      p.defaultImage = 'nope:1';
    });
    let thrown: unknown;
    try {
      parsePolicy(doc);
    } catch (error) {
      thrown = error;
    }
    expect(isCairnError(thrown) && thrown.code).toBe('E_INPUT');
    expect((thrown as Error).message).toMatch(/caps\.max\.memoryMiB: 8192 raises the frozen memoryMiB 4096.*defaultImage: nope:1/);
  });
});

describe('policyVersion', () => {
  it('given the same policy with its keys in another order, when hashed, then the version is the same', () => {
    const reordered = {
      budgets: { jobMinutes: 90, runsPerJob: 6 },
      approvals: { rules: [{ when: 'apply_step' }] },
      network: { egress: 'deny' },
      caps: {
        max: { cpus: 4, diskMiB: 8192, pids: 256, memoryMiB: 4096, wallSeconds: 600 },
        defaults: { cpus: 1, diskMiB: 256, pids: 64, memoryMiB: 256, wallSeconds: 60 },
      },
      images: { allow: [{ name: 'cairn/sandbox-busybox:1' }, { name: 'cairn/sandbox-debian:1' }, { requireDigest: true, repository: 'cairn/built' }] },
      defaultImage: 'cairn/sandbox-busybox:1',
      version: 1,
    };
    expect(policyVersion(parsePolicy(reordered))).toBe(policyVersion(DEFAULT_POLICY));
    expect(policyVersion(DEFAULT_POLICY)).toMatch(/^[0-9a-f]{64}$/);
  });

  it('given a policy that differs in one value, when hashed, then the version differs', () => {
    const lowered = parsePolicy(policyWith((p) => (p.caps.max.pids = 255)));
    expect(policyVersion(lowered)).not.toBe(policyVersion(DEFAULT_POLICY));
  });

  it('given the list order of images changes, when hashed, then the version changes (arrays are ordered data)', () => {
    const swapped = parsePolicy(policyWith((p) => p.images.allow.reverse()));
    expect(policyVersion(swapped)).not.toBe(policyVersion(DEFAULT_POLICY));
  });
});
