import { z } from 'zod';

/** Schema version of receipt bodies. Versions only move forward; readers upcast old ones. */
export const RECEIPT_SCHEMA_VERSION = 1;

/** 64 zeros: the `prev_hash` of the first receipt of every chain. */
export const GENESIS_HASH = '0'.repeat(64);

/** Lower-case `[a-z0-9_-]`, so a chain id is always safe as a NATS subject token. */
export const ID_BODY = '[a-z0-9][a-z0-9_-]{0,95}';
export const RunIdSchema = z.string().regex(new RegExp(`^run_${ID_BODY}$`), 'a run id is run_ followed by [a-z0-9_-]');
export const SandboxIdSchema = z.string().regex(new RegExp(`^sbx_${ID_BODY}$`), 'a sandbox id is sbx_ followed by [a-z0-9_-]');
/** A tenant's admin chain (docs/adr/0011): `adm_<tenant id>`, one per tenant, its keys and its creation. */
export const AdminChainIdSchema = z.string().regex(/^adm_[a-z0-9][a-z0-9_-]{0,63}$/, 'an admin chain id is adm_ followed by a tenant id');
/** A chain of work: a run's or a sandbox session's (every receipt type but `admin.*` lives on one). */
export const WorkChainIdSchema = z.string().regex(new RegExp(`^(run|sbx)_${ID_BODY}$`), 'a run id (run_…) or a sandbox id (sbx_…)');
/** Every chain the log holds: a run's, a sandbox session's, or a tenant's admin chain. */
export const CHAIN_KINDS = ['run', 'sbx', 'adm'] as const;
export const ChainIdSchema = z.string().regex(new RegExp(`^(run|sbx|adm)_${ID_BODY}$`), 'a chain id is run_…, sbx_… or adm_… in [a-z0-9_-]');
export type ChainId = z.infer<typeof ChainIdSchema>;
export const TenantIdSchema = z.string().regex(/^[a-z0-9][a-z0-9_-]{0,63}$/, 'a tenant id is [a-z0-9_-], at most 64 characters');

/** The admin chain of `tenant`. */
export function adminChainId(tenant: string): string {
  return `adm_${tenant}`;
}

/** The tenant an admin chain belongs to, or null for any other chain id. */
export function tenantOfAdminChain(chainId: string): string | null {
  return AdminChainIdSchema.safeParse(chainId).success ? chainId.slice('adm_'.length) : null;
}

export const Sha256HexSchema = z.string().regex(/^[0-9a-f]{64}$/, 'a lower-case hex sha256');
/** RFC 3339 UTC with milliseconds, e.g. 2026-11-30T01:02:03.456Z. */
export const TimestampSchema = z.string().regex(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/, 'RFC 3339 UTC with milliseconds');
export const EventTypeNameSchema = z.string().regex(/^[a-z][a-z_]*(\.[a-z][a-z_]*)+$/, 'an event type such as run.submitted');
/** `intake`, `runtime`, … for services; `key:<key id>` for a person or program. */
export const ActorSchema = z.string().regex(/^([a-z][a-z0-9-]*|key:[A-Za-z0-9_-]{1,64})$/, 'a service name or key:<key id>');

/** The id of an event: `<chain id>:<seq>`. Stable, so subscribers can drop repeats. */
export const EventIdSchema = z.string().regex(new RegExp(`^(run|sbx|adm)_${ID_BODY}:[1-9][0-9]*$`), 'an event id is <chain id>:<seq>');
export function eventId(chainId: string, seq: number): string {
  return `${chainId}:${seq}`;
}

/** The fields every receipt body carries, beside its type-specific fields (snake_case). */
export const EnvelopeSchema = z.object({
  v: z.literal(RECEIPT_SCHEMA_VERSION),
  seq: z.number().int().min(1),
  /** The chain's id: `run_…`, `sbx_…`, or `adm_<tenant>` (whose `tenant` is that tenant). */
  run_id: ChainIdSchema,
  tenant: TenantIdSchema,
  type: EventTypeNameSchema,
  actor: ActorSchema,
  ts: TimestampSchema,
  causation: EventIdSchema.nullable(),
});
export type Envelope = z.infer<typeof EnvelopeSchema>;

/** What a caller hands to `append`: a body without the chain-assigned `seq`. */
export type UnsequencedBody<B extends Envelope = Envelope> = Omit<B, 'seq'>;

export const ChainLinkSchema = z.object({
  prev_hash: Sha256HexSchema,
  hash: Sha256HexSchema,
});

/** A receipt as stored and exported: the body plus `prev_hash` and `hash`. */
export const ReceiptEnvelopeSchema = EnvelopeSchema.extend(ChainLinkSchema.shape).loose();
export type ReceiptEnvelope = z.infer<typeof ReceiptEnvelopeSchema>;
