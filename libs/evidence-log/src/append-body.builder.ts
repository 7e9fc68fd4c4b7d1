import { CairnError, EnvelopeSchema, GENESIS_HASH, RECEIPT_SCHEMA_VERSION } from '@cairn/contracts';
import type { Envelope, ReceiptEnvelope } from '@cairn/contracts';
import { hash as oneShotHash } from 'node:crypto';
import { canonicalJson, CanonicalJsonError, LINK_FIELDS } from '@cairn/evidence';

export interface AppendInput {
  /** `run.submitted`, `step.completed`, … */
  type: string;
  /** The service name, or `key:<key id>`. */
  actor: string;
  tenant: string;
  /** The id (`<chain id>:<seq>`) of the event that caused this one, or null. */
  causation: string | null;
  /** Distinguishes same-type events caused by the same event (e.g. a step index). */
  key?: string;
  /** RFC 3339 UTC with milliseconds, fixed before the first attempt; default now. */
  ts?: string;
  /** Type-specific snake_case fields, beside the envelope. */
  fields?: Record<string, unknown>;
  /** W3C trace context, carried as a message header (never hashed). */
  traceparent?: string;
}

/** The chain position a receipt is sealed onto. */
export interface ChainHead {
  /** Stream sequence of the chain's last message: the compare-and-set expectation. */
  streamSeq: number;
  /** The chain's own seq of its last receipt. */
  seq: number;
  hash: string;
}

/** The head of a chain that holds nothing yet. */
export const GENESIS_HEAD: Readonly<ChainHead> = Object.freeze({ streamSeq: 0, seq: 0, hash: GENESIS_HASH });

/** Keys a receipt owns; `fields` may not set them. */
export const ENVELOPE_KEYS = ['v', 'seq', 'run_id', 'tenant', 'type', 'actor', 'ts', 'causation'] as const;
const RESERVED_KEYS: ReadonlySet<string> = new Set<string>([...ENVELOPE_KEYS, ...LINK_FIELDS]);

/** Versioned, so a change to what a logical identity means can never collide with old ids. */
const MSG_ID_DOMAIN = 'cairn.evidence.msg-id/v1';
const TRACEPARENT = /^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/;

/**
 * The JetStream message id of an event: sha256 of its logical identity (chain, causation, type,
 * key). Never seq or ts, and nothing else that may differ between two attempts at the same
 * event, so a retry after a lost ack is deduplicated by the stream.
 */
export function appendMsgId(chainId: string, identity: Pick<AppendInput, 'causation' | 'type' | 'key'>): string {
  // An array of strings and nulls: JSON.stringify is deterministic here (and canonical for well-formed strings).
  return sha256(JSON.stringify([MSG_ID_DOMAIN, chainId, identity.causation, identity.type, identity.key ?? null]));
}

/** `sha256Hex` in one call: the hot path hashes twice per append, and a Hash object costs more. */
function sha256(text: string): string {
  return oneShotHash('sha256', text, 'hex');
}

/** An append whose body is validated and fixed; only the chain position is still open. */
export interface PreparedAppend {
  chainId: string;
  msgId: string;
  traceparent: string | null;
  /** The body without `seq`. */
  base: Readonly<Omit<Envelope, 'seq'> & Record<string, unknown>>;
  /** Canonical JSON of the body, and of the receipt, with the chain position left open. */
  body: CanonicalTemplate;
  receipt: CanonicalTemplate;
}

/** A receipt sealed onto a head, with the canonical JSON that is published. */
export interface SealedReceipt {
  receipt: ReceiptEnvelope;
  canonical: string;
}

/** The members a seal fills in: the chain position. */
type OpenMember = 'seq' | 'prev_hash' | 'hash';
const BODY_OPEN: readonly OpenMember[] = ['seq'];
const RECEIPT_OPEN: readonly OpenMember[] = ['seq', 'prev_hash', 'hash'];

/**
 * Canonical JSON of an object whose members are all serialised once, except the open ones:
 * `chunks[0] + value(open[0]) + chunks[1] + … + chunks[n]`. Members are in RFC 8785 order
 * (UTF-16 code units, as `canonicalJson` sorts), so rendering equals `canonicalJson` of the
 * whole object, and a retry re-seals without serialising the body again.
 */
export interface CanonicalTemplate {
  chunks: readonly string[];
  open: readonly OpenMember[];
}

function canonicalMember(key: string, value: unknown): string {
  if (!key.isWellFormed()) throw new CanonicalJsonError('$', 'a field name contains a lone surrogate');
  return `${JSON.stringify(key)}:${canonicalJson(value)}`;
}

/** `sortedKeys` holds every member's key and the open keys, sorted; `members` the closed ones. */
function compileTemplate(sortedKeys: readonly string[], members: ReadonlyMap<string, string>, open: readonly OpenMember[]): CanonicalTemplate {
  const chunks: string[] = [];
  const order: OpenMember[] = [];
  let current = '{';
  let first = true;
  for (const key of sortedKeys) {
    const member = members.get(key);
    const isOpen = member === undefined;
    if (isOpen && !open.includes(key as OpenMember)) continue;
    const separator = first ? '' : ',';
    first = false;
    if (isOpen) {
      chunks.push(`${current}${separator}"${key}":`);
      order.push(key as OpenMember);
      current = '';
    } else {
      current += separator + member;
    }
  }
  chunks.push(`${current}}`);
  return { chunks, open: order };
}

function render(template: CanonicalTemplate, values: Readonly<Record<OpenMember, string>>): string {
  const { chunks, open } = template;
  let out = chunks[0] ?? '';
  for (let i = 0; i < open.length; i++) {
    out += values[open[i] as OpenMember] + (chunks[i + 1] ?? '');
  }
  return out;
}

/**
 * Assembles and validates an append before anything is published: refuses fields that would
 * override the envelope, an envelope that `EnvelopeSchema` rejects, and values that are not
 * plain JSON (all E_INPUT).
 */
export function prepareAppend(chainId: string, input: AppendInput, now: () => Date = () => new Date()): PreparedAppend {
  const fields = input.fields ?? {};
  if (typeof fields !== 'object' || fields === null || Array.isArray(fields)) {
    throw new CairnError('E_INPUT', 'fields must be a plain object');
  }
  const overriding = Object.keys(fields).filter((key) => RESERVED_KEYS.has(key));
  if (overriding.length > 0) {
    throw new CairnError('E_INPUT', `fields may not set envelope keys: ${overriding.join(', ')}`, { keys: overriding });
  }
  if (input.key !== undefined && typeof input.key !== 'string') throw new CairnError('E_INPUT', 'key must be a string');
  if (input.traceparent !== undefined && !TRACEPARENT.test(input.traceparent)) {
    throw new CairnError('E_INPUT', 'traceparent is not a W3C trace context (version-traceid-parentid-flags)');
  }
  const base: Omit<Envelope, 'seq'> & Record<string, unknown> = {
    ...fields,
    v: RECEIPT_SCHEMA_VERSION,
    run_id: chainId,
    tenant: input.tenant,
    type: input.type,
    actor: input.actor,
    ts: input.ts ?? now().toISOString(),
    causation: input.causation,
  };
  // seq is the only part still open; any seq ≥ 1 validates the same way.
  const parsed = EnvelopeSchema.safeParse({
    v: base.v,
    seq: 1,
    run_id: base.run_id,
    tenant: base.tenant,
    type: base.type,
    actor: base.actor,
    ts: base.ts,
    causation: base.causation,
  });
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => `${issue.path.join('.') || '(body)'}: ${issue.message}`);
    throw new CairnError('E_INPUT', `invalid receipt envelope: ${problems.join('; ')}`, { problems });
  }
  // Each member serialised once here (refusing what is not plain JSON), never per attempt.
  const keys = Object.keys(base);
  const members = new Map<string, string>();
  for (const key of keys) members.set(key, canonicalMember(key, base[key]));
  const sortedKeys = [...keys, ...RECEIPT_OPEN].sort();
  return {
    chainId,
    msgId: appendMsgId(chainId, input),
    traceparent: input.traceparent ?? null,
    base: Object.freeze(base),
    body: compileTemplate(sortedKeys, members, BODY_OPEN),
    receipt: compileTemplate(sortedKeys, members, RECEIPT_OPEN),
  };
}

/**
 * Seals the prepared body as the receipt that follows `head` (`GENESIS_HEAD` for a new chain):
 * what `sealReceipt(head.hash, body)` returns (I-4: hash = sha256(prev_hash + "\n" +
 * canonicalJson(body))), plus the receipt's canonical JSON, both from the prepared templates.
 */
export function sealOnto(prepared: PreparedAppend, head: Pick<ChainHead, 'seq' | 'hash'>): SealedReceipt {
  const seq = head.seq + 1;
  const values = { seq: String(seq), prev_hash: `"${head.hash}"`, hash: '' };
  const hash = sha256(`${head.hash}\n${render(prepared.body, values)}`);
  values.hash = `"${hash}"`;
  const receipt: ReceiptEnvelope = { ...prepared.base, seq, prev_hash: head.hash, hash };
  return { receipt, canonical: render(prepared.receipt, values) };
}
