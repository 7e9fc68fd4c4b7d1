import { z } from 'zod';

/** PRODUCT.md "Run states": the lifecycle in order, then the other terminal states. */
export const RUN_STATES = [
  'SUBMITTED',
  'AWAITING_APPROVAL',
  'SCHEDULED',
  'RUNNING',
  'EXECUTED',
  'VERIFIED',
  'GRADED',
  'SEALED',
  'FAILED',
  'ROLLBACK',
  'REJECTED',
  'CANCELLED',
] as const;
export const RunStateSchema = z.enum(RUN_STATES);
export type RunState = z.infer<typeof RunStateSchema>;

/** The states a run ends in; `run.sealed` names one of them as its `final_state`. */
export const FINAL_RUN_STATES = ['SEALED', 'FAILED', 'ROLLBACK', 'REJECTED', 'CANCELLED'] as const;
export const FinalRunStateSchema = z.enum(FINAL_RUN_STATES);
export type FinalRunState = z.infer<typeof FinalRunStateSchema>;

/** The verifier's judgement of a run's claim. `REJECTED` here is not the run state of the same name. */
export const VERDICTS = ['SUPPORTS', 'INCONCLUSIVE', 'REJECTED'] as const;
export const VerdictSchema = z.enum(VERDICTS);
export type Verdict = z.infer<typeof VerdictSchema>;

export const POLICY_DECISIONS = ['allow', 'deny', 'hold'] as const;
export const PolicyDecisionSchema = z.enum(POLICY_DECISIONS);
export type PolicyDecision = z.infer<typeof PolicyDecisionSchema>;

/** The states of an interactive sandbox session (the REST `Sandbox` view). */
export const SANDBOX_STATES = ['PENDING', 'READY', 'DESTROYED', 'REJECTED', 'FAILED'] as const;
export const SandboxStateSchema = z.enum(SANDBOX_STATES);
export type SandboxState = z.infer<typeof SandboxStateSchema>;

export const SANDBOX_DESTROY_REASONS = ['deleted', 'ttl', 'idle', 'limit', 'worker_lost', 'failed'] as const;
export const SandboxDestroyReasonSchema = z.enum(SANDBOX_DESTROY_REASONS);
export type SandboxDestroyReason = z.infer<typeof SandboxDestroyReasonSchema>;
