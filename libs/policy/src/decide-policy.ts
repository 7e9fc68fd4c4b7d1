import { assertUnreachable, CAP_NAMES, frozenCap, hasScope, inputIssues, MAX_RUN_RETRIES, mayUseSecret, PolicyDocumentSchema, SecretNameSchema } from '@cairn/contracts';
import type { CapName, GrantedCaps, NetworkPolicy, NetworkSpec, PolicyDecision, PolicyDocument, RunSpec, SubmitterPrincipal } from '@cairn/contracts';
import { matchApprovalRules } from './approval-rules.js';
import { egressNotAllowed } from './egress-allowlist.js';
import type { ApprovalRequirement } from './approval-rules.js';
import { splitImageRef } from './image-ref.js';
import type { TenantUsage } from './budget-usage.js';
import { checkJobBudget } from './job-budget.js';
import type { JobRunUsage } from './job-budget.js';
import { policyVersion } from './policy-version.js';
import { checkTenantBudget, hasTenantQuota } from './tenant-budget.js';

/** The parts of a RunSpec that policy reads. */
export type PolicySpec = Pick<RunSpec, 'image' | 'job' | 'steps' | 'caps' | 'network' | 'secrets' | 'retries'>;

/** A secret the tenant's store holds, and who may use it besides admin keys (`key:<id>`, `scope:<scope>`). */
export interface SecretAccess {
  name: string;
  grantees: readonly string[];
}

/** Everything besides the spec that a decision depends on; all of it is data the caller gathered. */
export interface PolicyContext {
  policy: PolicyDocument;
  /** Digest (`sha256:…`) of each image present on the host, by name, where known. */
  localImageDigests?: Readonly<Record<string, string>>;
  /**
   * The secrets the tenant's store holds, with their grants. Absent means there is no store yet,
   * so a spec that references any secret is refused: a run must not start believing it has a
   * secret it cannot get.
   */
  secrets?: readonly SecretAccess[];
  /**
   * The key that submitted the run, as its `run.submitted` recorded it. Absent (a receipt from
   * before secrets were governed): the run may use no secret.
   */
  submitter?: SubmitterPrincipal;
  /**
   * The job's other admitted runs. Required when the spec names a job: without them the budget
   * cannot be checked, and an unchecked budget is refused (`[]` for a new job).
   */
  jobRuns?: readonly JobRunUsage[];
  /**
   * The tenant's runs in flight and CPU-seconds today. Required when the policy sets a tenant
   * quota: without it the quota cannot be checked, and an unchecked quota is refused.
   */
  tenantUsage?: TenantUsage;
  /** What is decided: a run (the default) or an interactive sandbox session, for the tenant's quotas. */
  kind?: 'run' | 'sandbox';
  /** Ids of approvals already granted (see `ApprovalRequirement.id`). */
  grantedApprovals?: readonly string[];
}

/** Caps as they go into receipts (snake_case): the contracts' `GrantedCaps`. */
export type EffectiveCaps = GrantedCaps;

/**
 * `none`, or the hosts the run asked for (each on the operator's allowlist when allowed) and
 * whether their names may resolve to private addresses (the policy's `allowPrivate`).
 */
export type EffectiveNetwork = 'none' | { egress: string[]; allow_private: boolean };

/** What the runtime holds an admitted run to while it runs (the `budget` of `policy.decided`). */
export interface RunBudget {
  output_bytes_per_step?: number;
  /** Sandbox seconds before the job's time or the tenant's CPU-seconds for the day run out. */
  run_seconds?: number;
}

/**
 * What the run gets when allowed. On `deny` it records what was asked and resolved (defaults
 * filled in), none of which was granted.
 */
export interface EffectiveRun {
  /** Without digest. */
  image: string;
  /** The pinned, requested or locally seen digest the run must use; `null` when none is known. */
  image_digest: string | null;
  caps: EffectiveCaps;
  network: EffectiveNetwork;
  /** Names only (I-7). */
  secrets: string[];
}

/**
 * A policy decision. No `undefined` anywhere, so it always passes `canonicalJson`; `error_code` is
 * present exactly when the decision is `deny`; `reasons` fit the `policy.decided` receipt (at most
 * 64, each at most 1024 characters). `policyDecidedFields` gives that receipt's own fields.
 */
export interface PolicyOutcome {
  decision: PolicyDecision;
  policy_version: string;
  reasons: string[];
  error_code?: 'E_POLICY_DENIED' | 'E_BUDGET';
  effective: EffectiveRun;
  /**
   * Every approval the rules require, granted or not. Run-scope ones not yet granted hold the run;
   * step-scope ones (steps marked `apply`) are for the runtime to hold before that step.
   */
  approvals: ApprovalRequirement[];
  /** The budgets the run is held to while it runs; empty when none applies. */
  budget: RunBudget;
}

const RECEIPT_CAP_NAMES: Readonly<Record<CapName, keyof EffectiveCaps>> = {
  wallSeconds: 'wall_seconds',
  memoryMiB: 'memory_mib',
  pids: 'pids',
  diskMiB: 'disk_mib',
  cpus: 'cpus',
};

/**
 * Fail-closed: a run is allowed only when every rule positively admits it. Refusals are never
 * repaired (a cap over its maximum is refused, not clamped — I-6), and every refusal is listed,
 * not only the first, so one round trip shows the caller everything to fix.
 */
export function decidePolicy(spec: PolicySpec, context: PolicyContext): PolicyOutcome {
  const { policy } = context;
  const policy_version = policyVersion(policy);
  const denied: string[] = [];

  // A policy that does not validate (say, one raising a frozen cap) makes no decision but deny.
  const checked = PolicyDocumentSchema.safeParse(policy);
  if (!checked.success) {
    denied.push(...inputIssues(checked.error).map((issue) => `policy is invalid at ${issue.path}: ${issue.message}`));
  }

  const image = decideImage(spec, context, denied);
  const caps = decideCaps(spec, policy, denied);
  decideRetries(spec.retries ?? 0, policy, denied);
  const network = decideNetwork(policy.network, spec.network ?? 'none', denied);
  const secrets = decideSecrets(spec.secrets ?? [], context.secrets, context.submitter, denied);

  const overBudget: string[] = [];
  const runSeconds: number[] = [];
  if (spec.job !== undefined) {
    if (context.jobRuns === undefined) {
      overBudget.push(`job ${spec.job}: the job's usage is unknown, so its budget cannot be checked`);
    } else {
      const budget = checkJobBudget(context.jobRuns, spec, policy.budgets);
      if (!budget.ok) overBudget.push(...budget.reasons);
      else runSeconds.push(budget.remaining_seconds);
    }
  }
  if (hasTenantQuota(policy.budgets)) {
    if (context.tenantUsage === undefined) {
      overBudget.push("tenant: the tenant's usage is unknown, so its quotas cannot be checked");
    } else {
      const quota = checkTenantBudget(context.tenantUsage, policy.budgets, { kind: context.kind ?? 'run', memoryMiB: caps.memory_mib + caps.disk_mib });
      if (!quota.ok) overBudget.push(...quota.reasons);
      else if (quota.remaining_cpu_seconds !== null && caps.cpus > 0) runSeconds.push(Math.floor(quota.remaining_cpu_seconds / caps.cpus));
    }
  }
  const budget: RunBudget = {
    ...(policy.budgets.outputBytesPerStep === undefined ? {} : { output_bytes_per_step: policy.budgets.outputBytesPerStep }),
    ...(runSeconds.length === 0 ? {} : { run_seconds: Math.max(0, Math.min(...runSeconds)) }),
  };

  const approvals = matchApprovalRules(
    policy.approvals.rules,
    {
      image: image.image,
      egress: network === 'none' ? [] : network.egress,
      applySteps: spec.steps.flatMap((step, i) => (step.apply === true ? [i] : [])),
    },
    context.grantedApprovals,
  );

  const effective: EffectiveRun = { ...image, caps, network, secrets };
  if (denied.length > 0) {
    const reasons = receiptReasons([...denied, ...overBudget]);
    return { decision: 'deny', policy_version, reasons, error_code: 'E_POLICY_DENIED', effective, approvals, budget };
  }
  if (overBudget.length > 0) {
    return { decision: 'deny', policy_version, reasons: receiptReasons(overBudget), error_code: 'E_BUDGET', effective, approvals, budget };
  }
  const pending = approvals.filter((req) => req.scope === 'run' && !req.granted);
  if (pending.length > 0) {
    const reasons = receiptReasons(pending.map((req) => `awaiting approval ${req.approval_id}: ${req.reason}`));
    return { decision: 'hold', policy_version, reasons, effective, approvals, budget };
  }
  return { decision: 'allow', policy_version, reasons: [], effective, approvals, budget };
}

/** The type-specific fields of the `policy.decided` receipt; caps and image only when the run may go on. */
export interface PolicyDecidedFields {
  decision: PolicyDecision;
  policy_version: string;
  reasons: string[];
  error_code?: 'E_POLICY_DENIED' | 'E_BUDGET';
  caps?: GrantedCaps;
  /** With its digest when one is known, so the runtime starts exactly that image. */
  image?: string;
  /** Only when a budget applies while the run runs. */
  budget?: RunBudget;
  /** Only when a step is held for approval: what the runtime requests before each such step. */
  step_approvals?: StepApproval[];
  /** Only when the run may reach the network: the egress granted (the runtime's proxy lets exactly these through). */
  network?: { egress: string[]; allow_private: boolean };
  /** Only when the run lists secrets it may use: their names, the only values a worker opens for it (ADR 0028). */
  secrets?: string[];
}

/** A step held for approval, as `policy.decided` hands it to the runtime. */
export interface StepApproval {
  approval_id: string;
  step_index: number;
  reason: string;
  timeout_seconds: number;
}

export function policyDecidedFields(outcome: PolicyOutcome): PolicyDecidedFields {
  const { decision, policy_version, reasons, effective, budget } = outcome;
  if (outcome.error_code !== undefined) return { decision, policy_version, reasons, error_code: outcome.error_code };
  const image = effective.image_digest === null ? effective.image : `${effective.image}@${effective.image_digest}`;
  const steps: StepApproval[] = outcome.approvals.flatMap((req) =>
    req.scope === 'step' && req.step_index !== null && !req.granted
      ? [{ approval_id: req.approval_id, step_index: req.step_index, reason: req.reason, timeout_seconds: req.timeout_seconds }]
      : [],
  );
  return {
    decision,
    policy_version,
    reasons,
    caps: effective.caps,
    image,
    ...(Object.keys(budget).length === 0 ? {} : { budget }),
    ...(steps.length === 0 ? {} : { step_approvals: steps }),
    ...(effective.network === 'none' ? {} : { network: { egress: [...effective.network.egress], allow_private: effective.network.allow_private } }),
    ...(effective.secrets.length === 0 ? {} : { secrets: [...effective.secrets] }),
  };
}

const MAX_REASONS = 64;
const MAX_REASON_CHARS = 1024;

/** Bounded as the receipt requires; what is cut is said, not dropped silently. */
function receiptReasons(reasons: readonly string[]): string[] {
  const kept = reasons.length <= MAX_REASONS ? [...reasons] : [...reasons.slice(0, MAX_REASONS - 1), `… and ${reasons.length - MAX_REASONS + 1} more`];
  return kept.map((reason) => (reason.length <= MAX_REASON_CHARS ? reason : `${reason.slice(0, MAX_REASON_CHARS - 1)}…`));
}

function decideImage(spec: PolicySpec, context: PolicyContext, denied: string[]): Pick<EffectiveRun, 'image' | 'image_digest'> {
  const { policy, localImageDigests } = context;
  const requested = splitImageRef(spec.image ?? policy.defaultImage);
  const allowed = policy.images.allow.find((entry) => 'name' in entry && entry.name === requested.name);
  const local = localImageDigests?.[requested.name] ?? null;
  const repository = allowed === undefined ? policy.images.allow.find((entry) => 'repository' in entry && repositoryOf(requested.name) === entry.repository) : undefined;
  if (repository !== undefined && 'repository' in repository) {
    // A repository admits its images by digest only: the request names the exact image it runs.
    if (requested.digest === null) denied.push(`image ${requested.name}: images of ${repository.repository} must be requested by digest (${requested.name}@sha256:…)`);
    else if (local !== null && local !== requested.digest) denied.push(`image ${requested.name}: the local image has digest ${local}, not the requested ${requested.digest}`);
    return { image: requested.name, image_digest: requested.digest ?? local };
  }
  if (allowed === undefined || !('name' in allowed)) {
    denied.push(`image ${requested.name} is not on the policy's allowlist`);
    return { image: requested.name, image_digest: requested.digest ?? local };
  }

  const pinned = allowed.digest ?? null;
  if (pinned !== null && requested.digest !== null && requested.digest !== pinned) {
    denied.push(`image ${requested.name}: requested digest ${requested.digest} is not the pinned ${pinned}`);
  }
  if (pinned !== null && local !== null && local !== pinned) {
    denied.push(`image ${requested.name}: the local image has digest ${local}, not the pinned ${pinned}`);
  }
  if (pinned === null && requested.digest !== null && local !== null && local !== requested.digest) {
    denied.push(`image ${requested.name}: the local image has digest ${local}, not the requested ${requested.digest}`);
  }
  return { image: requested.name, image_digest: pinned ?? requested.digest ?? local };
}

/** `registry:5000/a/b:tag` → `registry:5000/a/b`: the reference without its tag. */
function repositoryOf(name: string): string {
  const colon = name.lastIndexOf(':');
  return colon > name.lastIndexOf('/') ? name.slice(0, colon) : name;
}

function decideCaps(spec: PolicySpec, policy: PolicyDocument, denied: string[]): EffectiveCaps {
  const caps = { wall_seconds: 0, memory_mib: 0, pids: 0, disk_mib: 0, cpus: 0 };
  for (const name of CAP_NAMES) {
    const value = spec.caps?.[name] ?? policy.caps.defaults[name];
    const frozen = frozenCap(name);
    // Re-checked against the frozen caps even though a valid policy cannot exceed them (I-6).
    const max = Math.min(policy.caps.max[name], frozen);
    const integral = name !== 'cpus';
    if (!(value > 0) || (integral && !Number.isInteger(value))) {
      denied.push(`caps.${name} ${value} is not a positive ${integral ? 'integer' : 'number'}`);
    } else if (value > max) {
      denied.push(`caps.${name} ${value} exceeds the maximum ${max} (${max === frozen ? 'frozen cap' : 'policy maximum'})`);
    }
    caps[RECEIPT_CAP_NAMES[name]] = value;
  }
  spec.steps.forEach((step, i) => {
    if (step.timeoutSeconds !== undefined && step.timeoutSeconds > caps.wall_seconds) {
      denied.push(`steps[${i}].timeoutSeconds ${step.timeoutSeconds} exceeds caps.wallSeconds ${caps.wall_seconds}`);
    }
  });
  return caps;
}

/** `retries` over the policy's maximum (or the frozen one) is refused like a cap, never lowered to fit. */
function decideRetries(retries: number, policy: PolicyDocument, denied: string[]): void {
  const max = Math.min(policy.retries?.max ?? MAX_RUN_RETRIES, MAX_RUN_RETRIES);
  if (!Number.isInteger(retries) || retries < 0) denied.push(`retries ${retries} is not a whole number 0–${MAX_RUN_RETRIES}`);
  else if (retries > max) denied.push(`retries ${retries} exceeds the maximum ${max} (${max === MAX_RUN_RETRIES ? 'frozen maximum' : 'policy maximum'})`);
}

/**
 * One case per egress mode of the policy. Under an allowlist every host asked for must be on it;
 * the run gets exactly the hosts it asked for (each once), never the whole list.
 */
function decideNetwork(policy: NetworkPolicy, requested: NetworkSpec, denied: string[]): EffectiveNetwork {
  if (requested === 'none') return 'none';
  const egress = [...new Set(requested.egress)];
  switch (policy.egress) {
    case 'deny':
      denied.push(`network: egress to ${egress.join(', ')} requested, but the policy denies all egress`);
      return { egress, allow_private: false };
    case 'allowlist': {
      const refused = egressNotAllowed(policy.allow, egress);
      if (refused.length > 0) denied.push(`network: egress to ${refused.join(', ')} is not on the policy's egress allowlist`);
      return { egress, allow_private: policy.allowPrivate === true };
    }
    default:
      return assertUnreachable(policy, 'egress policy');
  }
}

/**
 * Secrets are names only (I-7); their values never pass through policy. Each must be in the
 * tenant's store and usable by the submitting key: `secrets:use`, and a grant (docs/secrets.md).
 */
function decideSecrets(names: readonly string[], store: readonly SecretAccess[] | undefined, submitter: SubmitterPrincipal | undefined, denied: string[]): string[] {
  const invalid = names.filter((name) => !SecretNameSchema.safeParse(name).success);
  for (const name of invalid) denied.push(`secrets: ${JSON.stringify(name)} is not a secret name`);
  const valid = names.filter((name) => !invalid.includes(name));
  if (valid.length > 0 && store === undefined) {
    denied.push(`secrets: no secret store is configured, so ${valid.join(', ')} cannot be provided`);
  } else if (store !== undefined) {
    for (const name of valid) {
      const secret = store.find((s) => s.name === name);
      if (secret === undefined) denied.push(`secrets: ${name} is not in the secret store`);
      else if (!mayUseSecret(submitter, secret.grantees)) denied.push(unusable(name, submitter));
    }
  }
  return [...names];
}

/** Why the submitting key may not use `name`: the reason names the secret and the key, never a value. */
function unusable(name: string, submitter: SubmitterPrincipal | undefined): string {
  if (submitter === undefined) return `secrets: ${name} cannot be used: the submission records no API key scopes`;
  if (!hasScope(submitter.scopes, 'secrets:use')) return `secrets: ${name} cannot be used: key ${submitter.key_id} lacks the secrets:use scope`;
  return `secrets: ${name} is not granted to key ${submitter.key_id}`;
}
