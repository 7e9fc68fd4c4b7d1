import type { EvidenceReceiptOf } from '@cairn/contracts';
import { decidePolicy } from '@cairn/policy';
import type { PolicyContext, PolicyOutcome, PolicySpec } from '@cairn/policy';

/**
 * The parts of a SandboxSpec policy reads, as the PolicySpec a run would have: no steps, no job.
 * Its caps are a step's: `wallSeconds` bounds each exec (its timeout), not the session, whose
 * time to live and idle limit intake settled on the chain.
 */
export function sandboxPolicySpec(requested: Pick<EvidenceReceiptOf<'sandbox.requested'>, 'spec'>): PolicySpec {
  const { spec } = requested;
  return {
    steps: [],
    ...(spec.caps === undefined ? {} : { caps: spec.caps }),
    ...(spec.image === undefined ? {} : { image: spec.image }),
    ...(spec.network === undefined ? {} : { network: spec.network }),
    ...(spec.secrets === undefined ? {} : { secrets: spec.secrets }),
  };
}

/**
 * Decides a sandbox as a run (image allowlist, frozen caps, egress, secrets, tenant quotas), with
 * one difference: a session cannot wait for a person, so what would hold a run denies the sandbox.
 */
export function decideSandboxPolicy(requested: Pick<EvidenceReceiptOf<'sandbox.requested'>, 'spec'>, context: PolicyContext): PolicyOutcome {
  const outcome = decidePolicy(sandboxPolicySpec(requested), context);
  if (outcome.decision !== 'hold') return outcome;
  return {
    ...outcome,
    decision: 'deny',
    error_code: 'E_POLICY_DENIED',
    reasons: ['a sandbox session cannot wait for an approval', ...outcome.reasons].slice(0, 64),
  };
}
