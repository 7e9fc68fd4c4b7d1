import { z } from 'zod';
import { ActorSchema, Sha256HexSchema, TimestampSchema } from './envelope.js';
import { CapacityResourceSchema, ErrorCodeSchema } from './error-codes.js';
import { MAX_RUN_RETRIES } from './frozen-caps.constants.js';
import {
  ApprovalIdSchema,
  ArtifactHashesSchema,
  ContainerNameSchema,
  DurationMsSchema,
  eventBodySchema,
  ExitCodeSchema,
  GrantedCapsSchema,
  LeaseIdSchema,
  PROCESS_RESULT_FIELDS,
  receiptSchemaOf,
  SandboxHardeningSchema,
  SandboxPathSchema,
  StepIndexSchema,
  StorableJsonSchema,
  textSchema,
  TokenSchema,
  WorkerIdSchema,
} from './event-fields.schema.js';
import { SubmitterPrincipalSchema } from './principal.schema.js';
import { FinalRunStateSchema, PolicyDecisionSchema, VerdictSchema } from './run-state.schema.js';
import { ArgvSchema, CheckIdSchema, CheckSourceSchema, HostPortSchema, ImageRefSchema, RunSpecSchema, SecretNameSchema } from './run-spec.schema.js';
import { SealSignatureSchema } from './seal-signature.schema.js';

/* The receipts of a run's lifecycle, in the order a run meets them (PRODUCT.md "A run, end to end"). */

export const RunSubmittedSchema = eventBodySchema('run.submitted', {
  spec: RunSpecSchema,
  /** sha256 of canonicalJson(spec). */
  spec_sha256: Sha256HexSchema,
  submitted_by: ActorSchema,
  /** The idempotency key itself is the client's; the chain keeps only its hash. */
  idempotency_key_sha256: Sha256HexSchema,
  /**
   * The submitting key's id and scopes, for policy's secret decisions (docs/adr/0011). Absent on
   * receipts from before secrets were governed: such a run may use no secret.
   */
  principal: SubmitterPrincipalSchema.optional(),
});

/** What a run may use while it runs, as policy decided it from the budgets and the usage it saw. */
export const RunBudgetSchema = z.strictObject({
  /** Bytes one step may write to stdout and stderr together; a step that writes more ends the run. */
  output_bytes_per_step: z.number().int().positive().optional(),
  /** Sandbox seconds left before the job's time or the tenant's CPU-seconds for the day run out. */
  run_seconds: z.number().int().min(0).optional(),
});

/** A step marked `apply` that an approval rule holds: the runtime requests `approval_id` before it. */
export const StepApprovalSchema = z.strictObject({
  approval_id: ApprovalIdSchema,
  step_index: StepIndexSchema,
  reason: textSchema(1024),
  /** How long the request waits for a decision before it is rejected (`cause: timeout`). */
  timeout_seconds: z.number().int().positive(),
});

const policyDecidedFields = eventBodySchema('policy.decided', {
  decision: PolicyDecisionSchema,
  /** sha256 of the policy document that decided. */
  policy_version: Sha256HexSchema,
  reasons: z.array(textSchema(1024)).max(64),
  error_code: ErrorCodeSchema.optional(),
  /** The caps and image the run gets when allowed or held. */
  caps: GrantedCapsSchema.optional(),
  image: ImageRefSchema.optional(),
  /** Allowed or held: the budgets the runtime holds the run to while it runs (exceeded: ROLLBACK `E_BUDGET`). */
  budget: RunBudgetSchema.optional(),
  /** Allowed or held: the steps the runtime holds the run before, each until a person approves it. */
  step_approvals: z.array(StepApprovalSchema).max(64).optional(),
  /**
   * Allowed or held with egress: the hosts granted (as the RunSpec asked, each on the operator's
   * allowlist) and whether their names may resolve to private addresses. Absent: no network.
   */
  network: z.strictObject({ egress: z.array(HostPortSchema).min(1).max(64), allow_private: z.boolean() }).optional(),
  /**
   * Allowed or held with secrets: the names the run may use (each in the tenant's catalog and
   * granted to the submitting key). A worker opens these and no other (ADR 0028); absent: none.
   */
  secrets: z.array(SecretNameSchema).min(1).max(64).optional(),
});
function checkPolicyDecision(
  event: { decision: z.infer<typeof PolicyDecisionSchema>; error_code?: z.infer<typeof ErrorCodeSchema> | undefined },
  ctx: z.core.$RefinementCtx,
): void {
  const code = event.error_code;
  if (event.decision === 'deny' && code !== 'E_POLICY_DENIED' && code !== 'E_BUDGET') {
    ctx.addIssue({ code: 'custom', path: ['error_code'], message: 'a deny names E_POLICY_DENIED or E_BUDGET' });
  }
  if (event.decision === 'hold' && code !== undefined && code !== 'E_NO_APPROVAL') {
    ctx.addIssue({ code: 'custom', path: ['error_code'], message: 'a hold names E_NO_APPROVAL or nothing' });
  }
  if (event.decision === 'allow' && code !== undefined) {
    ctx.addIssue({ code: 'custom', path: ['error_code'], message: 'an allow carries no error code' });
  }
}
export const PolicyDecidedSchema = policyDecidedFields.superRefine(checkPolicyDecision);
export const PolicyDecidedReceiptSchema = receiptSchemaOf(policyDecidedFields).superRefine(checkPolicyDecision);

export const ApprovalRequestedSchema = eventBodySchema('approval.requested', {
  approval_id: ApprovalIdSchema,
  /** `run`: held before scheduling; `step`: held before an `apply` step. */
  scope: z.enum(['run', 'step']),
  step_index: StepIndexSchema.nullable(),
  reason: textSchema(1024),
  expires_at: TimestampSchema,
});

export const ApprovalGrantedSchema = eventBodySchema('approval.granted', {
  approval_id: ApprovalIdSchema,
  approved_by: ActorSchema,
  comment: textSchema(1024).optional(),
});

export const ApprovalRejectedSchema = eventBodySchema('approval.rejected', {
  approval_id: ApprovalIdSchema,
  rejected_by: ActorSchema,
  /** A person said no, or nobody decided before `expires_at`. */
  cause: z.enum(['rejected', 'timeout']),
  comment: textSchema(1024).optional(),
});

export const RunScheduledSchema = eventBodySchema('run.scheduled', {
  worker_id: WorkerIdSchema,
  lease_id: LeaseIdSchema,
  lease_expires_at: TimestampSchema,
  /** 1 for the first placement; a lease re-offered before any step ran counts up. */
  attempt: z.number().int().min(1),
});

export const SandboxCreatedSchema = eventBodySchema('sandbox.created', {
  container_name: ContainerNameSchema,
  worker_id: WorkerIdSchema,
  driver: TokenSchema,
  image: ImageRefSchema,
  image_digest: z.string().regex(/^sha256:[0-9a-f]{64}$/, 'sha256:<hex>').nullable(),
  caps: GrantedCapsSchema,
  network: z.enum(['none', 'egress_proxy']),
  /** The isolation in force, as the engine reported it. Optional only so receipts written before it existed still read; the runtime always sets it. */
  hardening: SandboxHardeningSchema.optional(),
});

/** What a step receipt says about the step it belongs to. */
const STEP_FIELDS = {
  step_index: StepIndexSchema,
  /** `inputs`, `step`, `outputs`, … — the phase of the run this process belongs to. */
  stage: TokenSchema,
  /** The program, as recorded for people: argv[0]'s base name. */
  tool: textSchema(256).min(1),
  argv: ArgvSchema,
};

export const StepStartedSchema = eventBodySchema('step.started', {
  ...STEP_FIELDS,
  workdir: SandboxPathSchema,
  /** Names only: values may be secrets (I-7). */
  env_names: z.array(z.string().regex(/^[A-Z_][A-Z0-9_]{0,127}$/)).max(256),
});

/** PRODUCT.md's step receipt. A non-zero exit is a result, not a failure; `error_code` says when a cap or scan stopped it. */
export const StepCompletedSchema = eventBodySchema('step.completed', {
  ...STEP_FIELDS,
  ...PROCESS_RESULT_FIELDS,
  artifact_hashes: ArtifactHashesSchema,
  error_code: ErrorCodeSchema.optional(),
});

export const SandboxDestroyedSchema = eventBodySchema('sandbox.destroyed', {
  container_name: ContainerNameSchema,
  /** I-8: the engine was asked afterwards and the sandbox was gone. */
  verified_gone: z.boolean(),
  /**
   * Sessions add `ttl` and `idle` (after `sandbox.expired`), `limit` (an exec hit a cap) and
   * `worker_lost` (its worker went away); `deleted` is a person's DELETE.
   */
  reason: z.enum(['completed', 'failed', 'cancelled', 'deleted', 'expired', 'reaped', 'ttl', 'idle', 'limit', 'worker_lost']),
  duration_ms: DurationMsSchema.optional(),
});

export const RunExecutedSchema = eventBodySchema('run.executed', {
  steps_completed: z.number().int().min(0).max(64),
  exit_codes: z.array(ExitCodeSchema).max(64),
  artifact_hashes: ArtifactHashesSchema,
  duration_ms: DurationMsSchema,
  /**
   * Files under the outputs that were not collected because a receipt cannot record their names as
   * they are (control characters, bytes that are not UTF-8, longer than a path may be); absent when none.
   */
  outputs_skipped: z.number().int().min(1).optional(),
});

export const KernelFactsSchema = eventBodySchema('kernel.facts', {
  /** Named facts computed by registered operations only: `junit`, `exit_codes`, … → JSON values. */
  facts: z.record(TokenSchema, StorableJsonSchema),
  /** The registered operations that produced them. */
  operations: z.array(TokenSchema).max(256),
});

export const CheckOutcomeSchema = z.strictObject({
  id: CheckIdSchema,
  /** holds → counts for SUPPORTS; contradicted → REJECTED; unresolved (source missing or unreadable) → INCONCLUSIVE. */
  outcome: z.enum(['holds', 'contradicted', 'unresolved']),
  detail: textSchema(1024).optional(),
});

export const InvariantOutcomeSchema = z.strictObject({
  /** `chain`, `every_step_has_receipt`, `caps_honoured`, `teardown`, `no_secret_leaked`, … */
  id: TokenSchema,
  ok: z.boolean(),
  detail: textSchema(1024).optional(),
});

/**
 * One gate check as the verifier judged it (docs/adr/0004): the check on the baseline (`before`)
 * and after the patch (`after`), and what that makes it — `held` (holds both times), `fixed` (holds
 * only after), `regressed` (held before, not after), `failing` (contradicted before and after) or
 * `unresolved` (after could not be read). Only `held` and `fixed` pass.
 */
export const GateCheckOutcomeSchema = z.strictObject({
  id: CheckIdSchema,
  before: CheckOutcomeSchema.shape.outcome,
  after: CheckOutcomeSchema.shape.outcome,
  result: z.enum(['held', 'fixed', 'regressed', 'failing', 'unresolved']),
  detail: textSchema(1024).optional(),
});

/** The regression gate's outcome on `verification.completed`; a gate that did not pass rejects its patch. */
export const GateOutcomeSchema = z.strictObject({
  passed: z.boolean(),
  patch_step: StepIndexSchema,
  /** The patch step's exit code (null: killed, or no receipt); a patch that did not apply cleanly fails the gate. */
  patch_exit_code: ExitCodeSchema,
  /** The patch artifact: its path, its sha256 as collected (null: not collected), and whether it is rejected. */
  patch: z.strictObject({ path: SandboxPathSchema, sha256: Sha256HexSchema.nullable(), rejected: z.boolean() }),
  checks: z.array(GateCheckOutcomeSchema).max(64),
  detail: textSchema(1024).optional(),
});

const verificationCompletedFields = eventBodySchema('verification.completed', {
  verdict: VerdictSchema,
  chain_ok: z.boolean(),
  /** The head the verifier recomputed from genesis. */
  head_hash: Sha256HexSchema,
  receipts_checked: z.number().int().min(1),
  invariants: z.array(InvariantOutcomeSchema).max(64),
  checks: z.array(CheckOutcomeSchema).max(256),
  /** Present when the run has a gate. */
  gate: GateOutcomeSchema.optional(),
  /** `E_GATE_FAIL` when the gate did not pass: the run ends ROLLBACK. */
  error_code: ErrorCodeSchema.optional(),
});
function checkVerification(
  event: { gate?: { passed: boolean; patch: { rejected: boolean } } | undefined; error_code?: z.infer<typeof ErrorCodeSchema> | undefined },
  ctx: z.core.$RefinementCtx,
): void {
  const gateFailed = event.gate !== undefined && !event.gate.passed;
  if (gateFailed !== (event.error_code === 'E_GATE_FAIL')) {
    ctx.addIssue({ code: 'custom', path: ['error_code'], message: 'E_GATE_FAIL exactly when a gate did not pass' });
  }
  if (event.gate !== undefined && event.gate.patch.rejected === event.gate.passed) {
    ctx.addIssue({ code: 'custom', path: ['gate', 'patch', 'rejected'], message: 'the patch is rejected exactly when its gate did not pass' });
  }
}
export const VerificationCompletedSchema = verificationCompletedFields.superRefine(checkVerification);
export const VerificationCompletedReceiptSchema = receiptSchemaOf(verificationCompletedFields).superRefine(checkVerification);

export const CriterionScoreSchema = z.strictObject({
  id: CheckIdSchema,
  kind: z.enum(['check', 'judge', 'reward']),
  weight: z.number().min(0),
  earned: z.number().min(0),
  /** Unscored criteria earn zero and raise the grade's upper bound instead. */
  scored: z.boolean(),
  detail: textSchema(1024).optional(),
});

const gradeRecordedFields = eventBodySchema('grade.recorded', {
  score: z.number().min(0),
  max_score: z.number().min(0),
  /** score plus the weight of criteria that could not be scored. */
  upper_bound: z.number().min(0),
  criteria: z.array(CriterionScoreSchema).max(256),
});
function checkGrade(grade: { score: number; max_score: number; upper_bound: number }, ctx: z.core.$RefinementCtx): void {
  if (!(grade.score <= grade.upper_bound && grade.upper_bound <= grade.max_score)) {
    ctx.addIssue({ code: 'custom', path: ['upper_bound'], message: 'a grade has score ≤ upper_bound ≤ max_score' });
  }
}
export const GradeRecordedSchema = gradeRecordedFields.superRefine(checkGrade);
export const GradeRecordedReceiptSchema = receiptSchemaOf(gradeRecordedFields).superRefine(checkGrade);

/** Why a judge gave no score (docs/adr/0030). */
export const JUDGE_FAILURE_CAUSES = ['unconfigured', 'timeout', 'http_error', 'budget_exceeded', 'invalid_reply'] as const;
export const JudgeFailureCauseSchema = z.enum(JUDGE_FAILURE_CAUSES);
export type JudgeFailureCause = z.infer<typeof JudgeFailureCauseSchema>;

/** The most workload text one judgement reads (bytes of UTF-8); the prompt fields are bounded by it. */
export const JUDGE_MAX_INPUT_BYTES = 65_536;

/** Not final: a degraded judge is recorded and may be retried before the run seals (`grade.requested`). */
export const GradeFailedSchema = eventBodySchema('grade.failed', {
  reason: textSchema(2048),
  error_code: ErrorCodeSchema.optional(),
  retryable: z.boolean(),
  unscored: z.array(CheckIdSchema).max(256),
  /** A judge's failure: why, and which criterion's judgement failed. */
  cause: JudgeFailureCauseSchema.optional(),
  criterion_id: CheckIdSchema.optional(),
  /** The grading attempt that failed: 1, then one more per `grade.requested`. */
  attempt: z.number().int().min(1).optional(),
});

/**
 * The grader asked the operator's model to judge a criterion (docs/adr/0030): the messages as sent
 * (scanned like any text derived from a run), their digest, the model and the budget.
 */
export const JudgeRequestedSchema = eventBodySchema('judge.requested', {
  criterion_id: CheckIdSchema,
  attempt: z.number().int().min(1),
  model: textSchema(256),
  /** The fixed instructions and the criterion: the system role. */
  system_prompt: textSchema(8192),
  /** The workload's text fenced as untrusted data: the user role. */
  user_prompt: textSchema(JUDGE_MAX_INPUT_BYTES + 4096),
  /** The fence's nonce, drawn at random after the workload ran and absent from its text. */
  fence: z.string().regex(/^[0-9a-f]{32}$/),
  /** sha256 of canonicalJson({ model, messages, max_tokens, … }) — the request body as sent. */
  request_sha256: Sha256HexSchema,
  source: CheckSourceSchema,
  /** Bytes of the workload's text read (at most `JUDGE_MAX_INPUT_BYTES`; a longer text is a failure, never cut). */
  input_bytes: z.number().int().min(0).max(JUDGE_MAX_INPUT_BYTES),
  scale: z.number().int().min(1).max(100),
  max_tokens: z.number().int().min(1),
  timeout_ms: z.number().int().min(1),
});

/**
 * The model's reply to a `judge.requested` (docs/adr/0030): its text as recorded (scanned), the
 * tokens it reports and how long it took. The score is derived from `response` by the same pure
 * function in the grader and in an offline verification, so a judged grade is checkable without
 * calling the model again.
 */
export const JudgeAnsweredSchema = eventBodySchema('judge.answered', {
  criterion_id: CheckIdSchema,
  attempt: z.number().int().min(1),
  response: textSchema(16_384),
  response_sha256: Sha256HexSchema,
  /** The usage the server reported; null when it reported none (then the budget cannot be checked: a failure). */
  usage: z.strictObject({ prompt_tokens: z.number().int().min(0), completion_tokens: z.number().int().min(0), total_tokens: z.number().int().min(0) }).nullable(),
  latency_ms: DurationMsSchema,
  finish_reason: textSchema(64).nullable(),
});

/** A person asked for a run whose grade failed to be graded again (`cairn regrade`), before its seal. */
export const GradeRequestedSchema = eventBodySchema('grade.requested', {
  requested_by: ActorSchema,
  reason: textSchema(1024).optional(),
});

export const RunFailedSchema = eventBodySchema('run.failed', {
  error_code: ErrorCodeSchema,
  message: textSchema(2048),
  step_index: StepIndexSchema.optional(),
  /** With `E_CAPACITY`: what no worker had enough of. */
  resource: CapacityResourceSchema.optional(),
});

/**
 * The worker holding attempt `attempt` was lost and the RunSpec has retries left (ADR 0035): in
 * place of `run.failed` `E_WORKER_LOST`, the run goes back to `SUBMITTED` and the scheduler places
 * attempt `attempt + 1`. Caused by the lost attempt's `run.scheduled`; keyed `retried-<attempt>`,
 * so the scheduler's lease scan and the runtime's restart store one between them.
 */
export const RunRetriedSchema = eventBodySchema('run.retried', {
  attempt: z.number().int().min(1),
  /** Only a lost worker is ever retried. */
  error_code: z.literal('E_WORKER_LOST'),
  worker_id: WorkerIdSchema,
  lease_id: LeaseIdSchema,
  message: textSchema(2048),
  /** Attempts still allowed after the next one. */
  retries_left: z.number().int().min(0).max(MAX_RUN_RETRIES),
});

export const RunRolledBackSchema = eventBodySchema('run.rolled_back', {
  error_code: ErrorCodeSchema,
  message: textSchema(2048),
  step_index: StepIndexSchema.optional(),
});

/**
 * A person (or program) asked to cancel a run that may be running on a worker. It ends nothing by
 * itself: the runtime stops the sandbox, records the interrupted step and the teardown, then
 * `run.cancelled` (docs/adr/0003). A run not yet running is cancelled with `run.cancelled` at once.
 */
export const RunCancelRequestedSchema = eventBodySchema('run.cancel_requested', {
  requested_by: ActorSchema,
  reason: textSchema(1024).optional(),
});

export const RunCancelledSchema = eventBodySchema('run.cancelled', {
  cancelled_by: ActorSchema,
  reason: textSchema(1024).optional(),
  error_code: ErrorCodeSchema.optional(),
});

const runSealedFields = eventBodySchema('run.sealed', {
  final_state: FinalRunStateSchema,
  /** The chain head this seal covers (the hash of the receipt before it). */
  evidence_digest: Sha256HexSchema,
  error_code: ErrorCodeSchema.optional(),
  /** The deployment key's signature over the seal statement (chain, head, digest, state); absent on a seal from a grader without a key. */
  signature: SealSignatureSchema.optional(),
});
function checkSeal(seal: { final_state: z.infer<typeof FinalRunStateSchema>; error_code?: unknown }, ctx: z.core.$RefinementCtx): void {
  const needsCode = seal.final_state === 'FAILED' || seal.final_state === 'ROLLBACK' || seal.final_state === 'REJECTED';
  if (needsCode && seal.error_code === undefined) {
    ctx.addIssue({ code: 'custom', path: ['error_code'], message: `a run sealed ${seal.final_state} names its error code` });
  }
  if (seal.final_state === 'SEALED' && seal.error_code !== undefined) {
    ctx.addIssue({ code: 'custom', path: ['error_code'], message: 'a run sealed SEALED carries no error code' });
  }
}
export const RunSealedSchema = runSealedFields.superRefine(checkSeal);
export const RunSealedReceiptSchema = receiptSchemaOf(runSealedFields).superRefine(checkSeal);
