export { matchApprovalRules } from './approval-rules.js';
export type { ApprovalFacts, ApprovalRequirement } from './approval-rules.js';
export { summariseUsage } from './budget-usage.js';
export type { BudgetUsage, RunUsageRecord, TenantUsage } from './budget-usage.js';
export { decidePolicy, policyDecidedFields } from './decide-policy.js';
export type {
  EffectiveCaps,
  EffectiveNetwork,
  EffectiveRun,
  PolicyContext,
  PolicyDecidedFields,
  PolicyOutcome,
  PolicySpec,
  RunBudget,
  SecretAccess,
  StepApproval,
} from './decide-policy.js';
export { DEFAULT_POLICY, DEFAULT_SANDBOX_IMAGES } from './default-policy.constants.js';
export { egressNotAllowed, egressPatternMatches } from './egress-allowlist.js';
export { splitImageRef } from './image-ref.js';
export type { ImageRef } from './image-ref.js';
export { checkJobBudget } from './job-budget.js';
export type { JobBudgetCheck, JobRunUsage } from './job-budget.js';
// The policy document's schema is a contract (operators write it, GET /v1/policy serves it): it lives in
// @cairn/contracts and is named here too, beside the rules that decide under it.
export {
  AllowedImageSchema,
  ApprovalRuleSchema,
  ApprovalTriggerSchema,
  BudgetsSchema,
  CAP_NAMES,
  CapValuesSchema,
  DEFAULT_APPROVAL_TIMEOUT_SECONDS,
  EgressPatternSchema,
  FROZEN_RUN_CAPS,
  frozenCap,
  ImageDigestSchema,
  ImageNameSchema,
  MAX_OUTPUT_BYTES_PER_STEP,
  NetworkPolicySchema,
  parsePolicy,
  PolicyDocumentSchema,
  validatePolicy,
} from '@cairn/contracts';
export type {
  AllowedImage,
  ApprovalRule,
  ApprovalTrigger,
  Budgets,
  CapName,
  CapValues,
  NetworkPolicy,
  PolicyDocument,
  PolicyValidation,
} from '@cairn/contracts';
export { policyVersion } from './policy-version.js';
export { checkTenantBudget, hasTenantQuota } from './tenant-budget.js';
export type { QuotaRequest, TenantBudgetCheck } from './tenant-budget.js';
export { evolveUsageEntry, USAGE_RECEIPT_TYPES, UsageLedger, usageEntryExpired } from './usage-ledger.js';
export type { UsageEntry } from './usage-ledger.js';
