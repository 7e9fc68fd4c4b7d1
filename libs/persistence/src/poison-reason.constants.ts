/** Why a stream message was not projected; stored in `poison_events.reason`. */
export const POISON_REASONS = [
  /** The subject is not `<prefix>.<chain id>`. */
  'invalid_subject',
  /** Not UTF-8, not JSON, or not a JSON object. */
  'not_json',
  /** JSON that cannot be checked or stored: a \u0000 or a lone surrogate in a string, or nesting past MAX_JSON_DEPTH. */
  'unstorable_json',
  /** The common receipt fields (v, seq, run_id, tenant, type, actor, ts, causation, prev_hash, hash) are wrong. */
  'invalid_envelope',
  /** No event contract has this type. */
  'unknown_type',
  /** The type is known, its fields break its contract. */
  'invalid_fields',
  /** The receipt's run_id is not the chain its subject names. */
  'chain_id_mismatch',
  /** seq is at or below the chain's head: the chain already holds that position. */
  'duplicate_seq',
  /** seq skips past the chain's head + 1. */
  'seq_gap',
  /** prev_hash is not the hash of the chain's head. */
  'prev_hash_mismatch',
  /** The tenant differs from the tenant of the chain's earlier receipts. */
  'tenant_mismatch',
  /** The run lifecycle threw on the receipt (a bug there): recorded so that it cannot block the projector. */
  'lifecycle_error',
] as const;
export type PoisonReason = (typeof POISON_REASONS)[number];

/** How many bytes of a poison message are kept; the full size is kept beside them. */
export const POISON_RAW_LIMIT = 64 * 1024;
