import { z } from 'zod';
import { ApiKeyIdSchema, ApiKeyPrefixSchema } from './admin-events.schema.js';
import { ApiKeyScopeSchema } from './api-key-scope.schema.js';
import { ActorSchema, ChainIdSchema, RunIdSchema, Sha256HexSchema, TenantIdSchema, TimestampSchema } from './envelope.js';
import { ErrorBodySchema } from './error-codes.js';
import { DeliveryIdSchema, MAX_FILTER_PATTERNS, MAX_WEBHOOK_URL_LENGTH, WebhookIdSchema } from './api/webhooks.schema.js';
import { ApprovalIdSchema } from './event-fields.schema.js';
import { SubmitterPrincipalSchema } from './principal.schema.js';
import { RunSpecSchema } from './run-spec.schema.js';
import { SandboxSpecSchema } from './sandbox-spec.schema.js';
import { storableText } from './text-rules.js';

/*
 * Commands travel before a run exists (docs/adr/0003): they are requests, not evidence (the command
 * bus of @cairn/operational carries them, never the evidence stream). Snake_case like receipts.
 */

/** Ask intake to create a run. The gateway has validated the spec already; intake checks it again. */
export const SubmitRunCommandSchema = z.strictObject({
  tenant: TenantIdSchema,
  /** Who asked: `key:<key id>` for a client, or a service name. */
  submitted_by: ActorSchema,
  /** sha256 (hex) of the client's Idempotency-Key; the key itself never leaves the gateway. */
  idempotency_key_sha256: Sha256HexSchema,
  spec: RunSpecSchema,
  /** The verified key's id and scopes, recorded on `run.submitted` for policy (docs/adr/0011). */
  principal: SubmitterPrincipalSchema.optional(),
});
export type SubmitRunCommand = z.infer<typeof SubmitRunCommandSchema>;

/**
 * Ask intake to cancel a run of the tenant's — or to delete a sandbox (`sbx_…`) that no runtime has
 * created yet (a created one is deleted by its worker).
 */
export const CancelRunCommandSchema = z.strictObject({
  tenant: TenantIdSchema,
  run_id: ChainIdSchema,
  requested_by: ActorSchema,
  reason: z.string().max(1024).check(storableText('a reason')).optional(),
});
export type CancelRunCommand = z.infer<typeof CancelRunCommandSchema>;

/**
 * Ask intake to have a run of the tenant's graded again (`grade.requested`): only a verified run
 * whose last grading attempt failed (`grade.failed`, retryable) and that is not sealed (docs/adr/0030).
 */
export const RegradeRunCommandSchema = z.strictObject({
  tenant: TenantIdSchema,
  run_id: RunIdSchema,
  requested_by: ActorSchema,
  reason: z.string().max(1024).check(storableText('a reason')).optional(),
});
export type RegradeRunCommand = z.infer<typeof RegradeRunCommandSchema>;

/** Ask intake to record a person's decision on the approvals a run of the tenant's awaits. */
export const ApproveRunCommandSchema = z.strictObject({
  tenant: TenantIdSchema,
  run_id: RunIdSchema,
  /** `key:<key id>` of the approver; the key that submitted the run may not decide. */
  decided_by: ActorSchema,
  decision: z.enum(['approve', 'reject']),
  /** One approval by id; absent: every approval the run awaits now. */
  approval_id: ApprovalIdSchema.optional(),
  comment: z.string().min(1).max(1024).check(storableText('a comment')).optional(),
});
export type ApproveRunCommand = z.infer<typeof ApproveRunCommandSchema>;

/** Ask intake to start an interactive sandbox session: its chain begins with `sandbox.requested`. */
export const CreateSandboxCommandSchema = z.strictObject({
  tenant: TenantIdSchema,
  requested_by: ActorSchema,
  /** sha256 (hex) of the client's Idempotency-Key; absent: every request is a new sandbox. */
  idempotency_key_sha256: Sha256HexSchema.optional(),
  spec: SandboxSpecSchema,
  /** As on `submit`: recorded on `sandbox.requested`. */
  principal: SubmitterPrincipalSchema.optional(),
});
export type CreateSandboxCommand = z.infer<typeof CreateSandboxCommandSchema>;

/*
 * Admin commands (docs/adr/0011): the gateway asks, intake records on the tenant's admin chain
 * (`adm_<tenant>`) and answers with that chain's id. Never a key's secret or hash: the gateway
 * keeps those in its own table.
 */

/** Ask intake to start a tenant's admin chain with `admin.tenant_created`. */
export const CreateTenantCommandSchema = z.strictObject({
  tenant: TenantIdSchema,
  requested_by: ActorSchema,
});
export type CreateTenantCommand = z.infer<typeof CreateTenantCommandSchema>;

/** Ask intake to record a new key of the tenant's. */
export const CreateKeyCommandSchema = z.strictObject({
  tenant: TenantIdSchema,
  requested_by: ActorSchema,
  key_id: ApiKeyIdSchema,
  prefix: ApiKeyPrefixSchema,
  scopes: z.array(ApiKeyScopeSchema).min(1).max(16),
  expires_at: TimestampSchema.nullable(),
});
export type CreateKeyCommand = z.infer<typeof CreateKeyCommandSchema>;

/** Ask intake to record the key's next rotation (a new secret; the old one good until `grace_until`). */
export const RotateKeyCommandSchema = z.strictObject({
  tenant: TenantIdSchema,
  requested_by: ActorSchema,
  key_id: ApiKeyIdSchema,
  rotation: z.number().int().min(1),
  grace_until: TimestampSchema.nullable(),
});
export type RotateKeyCommand = z.infer<typeof RotateKeyCommandSchema>;

/** Ask intake to record the key's revocation. */
export const RevokeKeyCommandSchema = z.strictObject({
  tenant: TenantIdSchema,
  requested_by: ActorSchema,
  key_id: ApiKeyIdSchema,
  reason: z.string().min(1).max(1024).refine((text) => !text.includes('\u0000'), 'no NUL').optional(),
});
export type RevokeKeyCommand = z.infer<typeof RevokeKeyCommandSchema>;

/**
 * Ask the webhooks service to deliver one of a tenant's webhook deliveries again, as a new delivery
 * `replay_id` (the gateway picks it, so a command delivered twice queues one replay). The webhooks
 * service owns its queue; the gateway writes none of its tables. Past `expires_at` (the gateway's
 * wait for the answer) the command is refused unperformed: a REST call already answered
 * E_UNAVAILABLE never replays later.
 */
export const ReplayWebhookDeliveryCommandSchema = z.strictObject({
  tenant: TenantIdSchema,
  requested_by: ActorSchema,
  webhook_id: WebhookIdSchema,
  delivery_id: DeliveryIdSchema,
  replay_id: DeliveryIdSchema,
  expires_at: TimestampSchema,
});
export type ReplayWebhookDeliveryCommand = z.infer<typeof ReplayWebhookDeliveryCommandSchema>;

/**
 * A webhook signing secret as the webhooks service stores it: sealed (AES-256-GCM, docs/security.md)
 * under the operator's key file for its tenant and webhook id, in base64. A sealed secret is under
 * 100 bytes; the plaintext never travels.
 */
export const SealedWebhookSecretSchema = z
  .string()
  .min(4)
  .max(1024)
  .regex(/^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/, 'a sealed secret in base64');
/** The id of the key a secret is sealed under (the first 8 bytes of its hash, in hex). */
export const SecretKeyIdSchema = z.string().regex(/^[0-9a-f]{16}$/, 'a key id (16 hex characters)');

/**
 * Ask the webhooks service to register a tenant's webhook under `webhook_id` (the gateway picks it,
 * so a command delivered twice registers once). The gateway has checked the URL against SSRF and
 * normalized the filter; it made the signing secret, showed it to its caller once, and sends it only
 * sealed for this tenant and id (`secret_sealed`, under key `key_id`). The webhooks service owns its
 * tables; the gateway writes none of them. Past `expires_at` (the gateway's wait for the answer) the
 * command is refused unperformed: a REST call already answered E_UNAVAILABLE never registers later.
 */
export const RegisterWebhookCommandSchema = z.strictObject({
  tenant: TenantIdSchema,
  requested_by: ActorSchema,
  webhook_id: WebhookIdSchema,
  url: z.string().min(1).max(MAX_WEBHOOK_URL_LENGTH).check(storableText('a URL')),
  events: z.array(z.string().min(1).max(100)).min(1).max(MAX_FILTER_PATTERNS),
  description: z.string().min(1).max(200).check(storableText('a description')).nullable(),
  secret_sealed: SealedWebhookSecretSchema,
  key_id: SecretKeyIdSchema,
  expires_at: TimestampSchema,
});
export type RegisterWebhookCommand = z.infer<typeof RegisterWebhookCommandSchema>;

/**
 * Ask the webhooks service to remove a tenant's webhook and its delivery log. Delivered twice, it
 * removes once (the second answer is `duplicate`); a webhook the tenant never had is E_NOT_FOUND.
 * Past `expires_at` it is refused unperformed, like every webhook command.
 */
export const DeleteWebhookCommandSchema = z.strictObject({
  tenant: TenantIdSchema,
  requested_by: ActorSchema,
  webhook_id: WebhookIdSchema,
  expires_at: TimestampSchema,
});
export type DeleteWebhookCommand = z.infer<typeof DeleteWebhookCommandSchema>;

/** Each verb and the payload it carries; the verb is the last token of the subject (`cairn.cmd.submit`). */
export const COMMAND_SCHEMAS = {
  submit: SubmitRunCommandSchema,
  cancel: CancelRunCommandSchema,
  approve: ApproveRunCommandSchema,
  regrade: RegradeRunCommandSchema,
  sandbox_create: CreateSandboxCommandSchema,
  tenant_create: CreateTenantCommandSchema,
  key_create: CreateKeyCommandSchema,
  key_rotate: RotateKeyCommandSchema,
  key_revoke: RevokeKeyCommandSchema,
  webhook_replay: ReplayWebhookDeliveryCommandSchema,
  webhook_register: RegisterWebhookCommandSchema,
  webhook_delete: DeleteWebhookCommandSchema,
} as const;
export type CommandVerb = keyof typeof COMMAND_SCHEMAS;
export const COMMAND_VERBS = Object.keys(COMMAND_SCHEMAS) as readonly CommandVerb[];
export type CommandPayload<V extends CommandVerb> = z.infer<(typeof COMMAND_SCHEMAS)[V]>;

export function isCommandVerb(value: string): value is CommandVerb {
  return Object.hasOwn(COMMAND_SCHEMAS, value);
}

/** What a handler answers when it did what was asked (or had done it before: `duplicate`). */
export const CommandOkSchema = z.strictObject({
  ok: z.literal(true),
  /**
   * The run's id, the sandbox's (`sbx_…`) for `sandbox_create`, the admin chain's (`adm_…`) for an
   * admin command, the chain of the receipt delivered again for `webhook_replay`, the webhook's
   * (`wh_…`) for `webhook_register` and `webhook_delete`.
   */
  run_id: z.union([ChainIdSchema, WebhookIdSchema]),
  /** True when the command had been carried out before and nothing new happened. */
  duplicate: z.boolean(),
});
export type CommandOk = z.infer<typeof CommandOkSchema>;

export const CommandFailedSchema = z.strictObject({
  ok: z.literal(false),
  error: ErrorBodySchema,
});
export type CommandFailed = z.infer<typeof CommandFailedSchema>;

/** The reply to every command, sent on core NATS to the subject the sender named. */
export const CommandReplySchema = z.discriminatedUnion('ok', [CommandOkSchema, CommandFailedSchema]);
export type CommandReply = z.infer<typeof CommandReplySchema>;
