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
