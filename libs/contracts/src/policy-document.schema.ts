import { z } from 'zod';
import { CairnError } from './error-codes.js';
import { FROZEN_CAPS, MAX_RUN_RETRIES } from './frozen-caps.constants.js';
import { ImageRefSchema, inputIssues } from './run-spec.schema.js';
import type { InputIssue } from './run-spec.schema.js';

/*
 * The policy document is data: operators write it, `policyVersion` hashes it, and every
 * decision names that hash. It may only lower PRODUCT.md's frozen caps (I-6); a document that
 * tries to raise one is itself invalid, so no decision is ever made under it.
 */

/** The caps a run is held to, by the same names as the RunSpec's `caps`. */
export const CAP_NAMES = ['wallSeconds', 'memoryMiB', 'pids', 'diskMiB', 'cpus'] as const;
export type CapName = (typeof CAP_NAMES)[number];

/** The caps that PRODUCT.md freezes; `cpus` has no frozen maximum, only the policy's own. */
export const FROZEN_RUN_CAPS = {
  wallSeconds: FROZEN_CAPS.wallSeconds,
  memoryMiB: FROZEN_CAPS.memoryMiB,
  pids: FROZEN_CAPS.pids,
  diskMiB: FROZEN_CAPS.diskMiB,
} as const satisfies Partial<Record<CapName, number>>;

export function frozenCap(name: CapName): number {
  return name === 'cpus' ? Number.POSITIVE_INFINITY : FROZEN_RUN_CAPS[name];
}

const positiveInt = z.number().int().positive();

export const CapValuesSchema = z.strictObject({
  wallSeconds: positiveInt,
  memoryMiB: positiveInt,
  pids: positiveInt,
  diskMiB: positiveInt,
  cpus: z.number().positive().max(1024),
});
export type CapValues = z.infer<typeof CapValuesSchema>;

const DIGEST = /^sha256:[0-9a-f]{64}$/;
export const ImageDigestSchema = z.string().regex(DIGEST, 'a digest is sha256:<64 lower-case hex>');

/** An image reference without a digest (`cairn/sandbox-busybox:1`). */
export const ImageNameSchema = ImageRefSchema.refine((ref) => !ref.includes('@'), 'name the image without a digest');

export const AllowedImageSchema = z.strictObject({
  name: ImageNameSchema,
  /** Pins the image's content: a local image with another digest is refused. */
  digest: ImageDigestSchema.optional(),
});
export type AllowedImage = z.infer<typeof AllowedImageSchema>;

/** `[registry/]path`, no tag: every image of a repository (`cairn/built`), each requested by digest. */
export const ImageRepositorySchema = ImageRefSchema.refine((ref) => !ref.includes('@') && !/:[^/]*$/.test(ref), 'name the repository without a tag or digest');

/**
 * Admits any tag of a repository, but only requested as `name:tag@sha256:…` and only when the local
 * image is that digest: how images built from Dockerfiles (docs/adr/0018), one per digest, are allowed.
 */
export const AllowedRepositorySchema = z.strictObject({
  repository: ImageRepositorySchema,
  requireDigest: z.literal(true),
});
export type AllowedRepository = z.infer<typeof AllowedRepositorySchema>;

/** What an approval rule matches. Run-level matches hold the run; `apply_step` holds before the step. */
export const ApprovalTriggerSchema = z.union([
  z.literal('egress'),
  z.literal('apply_step'),
  z.strictObject({ image: ImageNameSchema }),
]);
export type ApprovalTrigger = z.infer<typeof ApprovalTriggerSchema>;

/** PRODUCT.md: no decision before the approval's timeout (default 24 h) cancels the run. */
export const DEFAULT_APPROVAL_TIMEOUT_SECONDS = 86_400;

export const ApprovalRuleSchema = z.strictObject({
  when: ApprovalTriggerSchema,
  timeoutSeconds: positiveInt.max(7 * 86_400).optional(),
});
export type ApprovalRule = z.infer<typeof ApprovalRuleSchema>;

const HOST_LABEL = '[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?';
const EGRESS_PATTERN = new RegExp(`^(\\*\\.)?(${HOST_LABEL}(?:\\.${HOST_LABEL})*):([0-9]{1,5})$`);

/**
 * One entry of the operator's egress allowlist: `host:port` (exactly that host), or `*.suffix:port`
 * (any host below `suffix`, not `suffix` itself; the suffix has at least two labels, so `*.com:443`
 * is refused). Lower-case names only, the port always named: as a RunSpec's `network.egress` entries.
 */
export const EgressPatternSchema = z
  .string()
  .max(262)
  .regex(EGRESS_PATTERN, 'an egress entry is host:port or *.domain:port with a lower-case host name')
  .refine((entry) => {
    const port = Number(entry.slice(entry.lastIndexOf(':') + 1));
    return port >= 1 && port <= 65_535;
  }, 'the port is 1..65535')
  .refine((entry) => !entry.startsWith('*.') || entry.slice(2, entry.lastIndexOf(':')).includes('.'), 'a wildcard needs a domain of at least two labels (*.example.com:443)');

/**
 * Egress modes: `deny` (the default: no run reaches any network), or `allowlist`: a run may ask for
 * hosts on `allow`, and gets an internal network whose only way out is the runtime's egress proxy,
 * which lets exactly the hosts the run asked for through (docs/sandbox-hardening.md, "Egress").
 * `allowPrivate` lets those names resolve to private addresses (RFC 1918, CGNAT, IPv6 ULA) — for a
 * mirror on the operator's own network; loopback, link-local (cloud metadata) and the worker's own
 * addresses stay refused whatever it says.
 */
export const NetworkPolicySchema = z.discriminatedUnion('egress', [
  z.strictObject({ egress: z.literal('deny') }),
  z
    .strictObject({
      egress: z.literal('allowlist'),
      allow: z.array(EgressPatternSchema).min(1).max(256),
      allowPrivate: z.boolean().optional(),
    })
    .superRefine((network, ctx) => {
      const repeated = network.allow.filter((entry, i) => network.allow.indexOf(entry) !== i);
      for (const entry of new Set(repeated)) ctx.addIssue({ code: 'custom', path: ['allow'], message: `${entry} is listed twice` });
    }),
]);
export type NetworkPolicy = z.infer<typeof NetworkPolicySchema>;

function cappedBy(frozen: number, what: string) {
  return (value: number, ctx: z.core.$RefinementCtx) => {
    if (value > frozen) {
      ctx.addIssue({ code: 'custom', message: `${value} raises the frozen ${what} ${frozen}; a policy may only lower it` });
    }
  };
}

/** The largest output budget a policy may set: what the runtime can keep of one stream at most. */
export const MAX_OUTPUT_BYTES_PER_STEP = 256 * 1024 * 1024;

/**
 * Budgets. The job budgets may only lower the frozen ones. The tenant quotas and the output budget
 * have no frozen figure: absent means no such limit, present is a limit the operator chose (each
 * bounded so a typo cannot ask for the absurd).
 */
export const BudgetsSchema = z.strictObject({
  runsPerJob: positiveInt.superRefine(cappedBy(FROZEN_CAPS.runsPerJob, 'runsPerJob')),
  jobMinutes: positiveInt.superRefine(cappedBy(FROZEN_CAPS.jobMinutes, 'jobMinutes')),
  /**
   * Runs of one tenant admitted and not yet executed (held, scheduled or running) at once — and its
   * interactive sandboxes too, unless `tenantConcurrentSandboxes` counts those alone.
   */
  tenantConcurrentRuns: positiveInt.max(100_000).optional(),
  /** Interactive sandboxes of one tenant asked for and not ended (PENDING or READY) at once. */
  tenantConcurrentSandboxes: positiveInt.max(100_000).optional(),
  /** Memory (each one's memory cap plus its tmpfs, as a worker reserves it) of one tenant's runs and sandboxes in flight together, MiB. */
  tenantMemoryMiB: positiveInt.max(1 << 30).optional(),
  /** Granted CPUs × sandbox seconds of one tenant's runs in the last 24 hours. */
  tenantCpuSecondsPerDay: positiveInt.max(1_000_000_000).optional(),
  /** Bytes one step may write to stdout and stderr together; more ends the run ROLLBACK `E_BUDGET`. */
  outputBytesPerStep: positiveInt.max(MAX_OUTPUT_BYTES_PER_STEP).optional(),
});
export type Budgets = z.infer<typeof BudgetsSchema>;

const CapMaximaSchema = z.strictObject({
  wallSeconds: positiveInt.superRefine(cappedBy(FROZEN_RUN_CAPS.wallSeconds, 'wallSeconds')),
  memoryMiB: positiveInt.superRefine(cappedBy(FROZEN_RUN_CAPS.memoryMiB, 'memoryMiB')),
  pids: positiveInt.superRefine(cappedBy(FROZEN_RUN_CAPS.pids, 'pids')),
  diskMiB: positiveInt.superRefine(cappedBy(FROZEN_RUN_CAPS.diskMiB, 'diskMiB')),
  cpus: z.number().positive().max(1024),
});

export const PolicyDocumentSchema = z
  .strictObject({
    version: z.literal(1),
    /** Used when a RunSpec names no image; must be on the allowlist. */
    defaultImage: ImageNameSchema,
    images: z.strictObject({ allow: z.array(z.union([AllowedImageSchema, AllowedRepositorySchema])).min(1).max(256) }),
    caps: z.strictObject({
      /** Applied to each cap a RunSpec leaves out. */
      defaults: CapValuesSchema,
      /** Per-run maxima; a request above one is refused, never clamped. */
      max: CapMaximaSchema,
    }),
    network: NetworkPolicySchema,
    approvals: z.strictObject({ rules: z.array(ApprovalRuleSchema).max(256) }),
    budgets: BudgetsSchema,
    /**
     * The most `retries` a RunSpec may ask for (ADR 0035), at most the frozen 3; absent is 3. A run
     * asking for more is refused (`E_POLICY_DENIED`), never clamped.
     */
    retries: z.strictObject({ max: z.number().int().min(0).max(MAX_RUN_RETRIES, `a policy may only lower the frozen retries ${MAX_RUN_RETRIES}`) }).optional(),
  })
  .superRefine((policy, ctx) => {
    for (const name of CAP_NAMES) {
      const value = policy.caps.defaults[name];
      const max = policy.caps.max[name];
      if (value > max) ctx.addIssue({ code: 'custom', path: ['caps', 'defaults', name], message: `default ${value} is above the maximum ${max}` });
    }
    const names = policy.images.allow.flatMap((image) => ('name' in image ? [image.name] : [`${image.repository} (repository)`]));
    const repeated = names.filter((name, i) => names.indexOf(name) !== i);
    for (const name of new Set(repeated)) ctx.addIssue({ code: 'custom', path: ['images', 'allow'], message: `${name} is listed twice` });
    if (!names.includes(policy.defaultImage)) {
      ctx.addIssue({ code: 'custom', path: ['defaultImage'], message: `${policy.defaultImage} is not on images.allow` });
    }
  });
export type PolicyDocument = z.infer<typeof PolicyDocumentSchema>;

export type PolicyValidation = { ok: true; policy: PolicyDocument } | { ok: false; issues: InputIssue[] };

/** Checks a policy document; every problem is reported with its path (`caps.max.pids: …`). */
export function validatePolicy(doc: unknown): PolicyValidation {
  const result = PolicyDocumentSchema.safeParse(doc);
  return result.success ? { ok: true, policy: result.data } : { ok: false, issues: inputIssues(result.error) };
}

/** Like `validatePolicy`, but throws `E_INPUT` naming every problem: for loading a policy at boot. */
export function parsePolicy(doc: unknown): PolicyDocument {
  const result = validatePolicy(doc);
  if (result.ok) return result.policy;
  const message = result.issues.map((issue) => `${issue.path}: ${issue.message}`).join('; ');
  throw new CairnError('E_INPUT', `invalid policy: ${message}`, { issues: result.issues });
}
