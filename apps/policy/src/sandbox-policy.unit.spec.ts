import { DEFAULT_POLICY, parsePolicy } from '@cairn/policy';
import type { PolicyDocument } from '@cairn/policy';
import { describe, expect, it } from 'vitest';
import { decideSandboxPolicy, sandboxPolicySpec } from './sandbox-policy.js';

const BUSYBOX_DIGEST = `sha256:${'b'.repeat(64)}`;
const context = (policy: PolicyDocument = DEFAULT_POLICY) => ({ policy, localImageDigests: { 'cairn/sandbox-busybox:1': BUSYBOX_DIGEST } });

describe('decideSandboxPolicy', () => {
  it('allows a sandbox on the allowlist with the default caps (a step’s: wallSeconds bounds each exec)', () => {
    const outcome = decideSandboxPolicy({ spec: { ttlSeconds: 3600 } }, context());
    expect(outcome).toMatchObject({ decision: 'allow', effective: { image: 'cairn/sandbox-busybox:1', caps: { wall_seconds: 60 } } });
  });

  it('denies an image off the allowlist, caps over the frozen maxima, egress the policy refuses, and unknown secrets', () => {
    expect(decideSandboxPolicy({ spec: { image: 'evil/miner:1' } }, context())).toMatchObject({ decision: 'deny', error_code: 'E_POLICY_DENIED' });
    expect(decideSandboxPolicy({ spec: { caps: { memoryMiB: 1_000_000 } } }, context())).toMatchObject({ decision: 'deny', error_code: 'E_POLICY_DENIED' });
    expect(decideSandboxPolicy({ spec: { network: { egress: ['example.com:443'] } } }, context())).toMatchObject({ decision: 'deny', error_code: 'E_POLICY_DENIED' });
    expect(decideSandboxPolicy({ spec: { secrets: ['API_TOKEN'] } }, context())).toMatchObject({ decision: 'deny', error_code: 'E_POLICY_DENIED' });
  });

  it('what would hold a run denies a session: nobody is there to wait for an approval', () => {
    const policy = parsePolicy({ ...structuredClone(DEFAULT_POLICY), approvals: { rules: [{ when: { image: 'cairn/sandbox-busybox:1' } }] } });
    const outcome = decideSandboxPolicy({ spec: {} }, context(policy));
    expect(outcome).toMatchObject({ decision: 'deny', error_code: 'E_POLICY_DENIED' });
    expect(outcome.reasons[0]).toMatch(/cannot wait for an approval/);
  });

  it('reads no steps and no job from a sandbox spec', () => {
    expect(sandboxPolicySpec({ spec: { image: 'cairn/sandbox-busybox:1', env: { A: 'b' } } })).toEqual({ steps: [], image: 'cairn/sandbox-busybox:1' });
  });
});
