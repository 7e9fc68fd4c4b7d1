import { ID_BODY, parseEvidenceReceipt, ReceiptEnvelopeSchema } from '@cairn/contracts';
import type { EvidenceReceipt } from '@cairn/contracts';
import type { PoisonReason } from './poison-reason.constants.js';
import { passesReceiptContract } from './receipt-contract.compiler.js';

/** What one message says, before the chain it belongs to is consulted. */
export type ReceiptCheck =
  | { ok: true; chainId: string; text: string; receipt: EvidenceReceipt }
  | { ok: false; chainId: string | null; reason: PoisonReason; detail: string };

const decoder = new TextDecoder('utf-8', { fatal: true });
// The same grammar as ChainIdSchema, compiled once for the hot path.
const CHAIN_ID = new RegExp(`^(run|sbx|adm)_${ID_BODY}$`);
const DETAIL_LIMIT = 2000;
/**
 * Deeper JSON is refused before anything recurses over it: the contracts' validators recurse
 * (a RangeError near 5 000 levels) and so does PostgreSQL's jsonb input (near 50 000 at the
 * default max_stack_depth). Either would fail the batch every time and block the projector.
 */
export const MAX_JSON_DEPTH = 512;
const MAX_NUMBER_LENGTH = 40;
/**
 * A number `jsonTextProblem` could refuse (40 or more characters, or a 4-digit exponent), where
 * JSON puts numbers: after `:`, `,` or `[` and whitespace, or at the very start. Hex inside strings
 * (`"…3e1234…"`) does not match; a string that merely contains `:1e1234` does, and is scanned.
 */
const SUSPECT_NUMBER = /[:,[][\t\n\r ]*-?\d(?:[\d.eE+-]{39}|[\d.]*[eE][+-]?\d{4})/;
const TOP_LEVEL_NUMBER = /^[\t\n\r ]*[-\d]/;

// A receipt type as subject tokens (`run.submitted`), as the evidence log writes it.
const TYPE_TOKENS = /^[a-z0-9_]+(\.[a-z0-9_]+)*$/;

/** The chain id and the type a subject names: `<prefix>.<chain id>.<type>` (docs/adr/0012), or null. */
export function evidenceSubjectParts(subject: string, subjectPrefix: string): { chainId: string; type: string } | null {
  if (!subject.startsWith(`${subjectPrefix}.`)) return null;
  const rest = subject.slice(subjectPrefix.length + 1);
  const dot = rest.indexOf('.');
  if (dot <= 0) return null;
  const chainId = rest.slice(0, dot);
  const type = rest.slice(dot + 1);
  return CHAIN_ID.test(chainId) && TYPE_TOKENS.test(type) ? { chainId, type } : null;
}

/** The chain id a subject names (`<prefix>.<chain id>.<type>`), or null. */
export function chainIdOfSubject(subject: string, subjectPrefix: string): string | null {
  return evidenceSubjectParts(subject, subjectPrefix)?.chainId ?? null;
}

/**
 * Subject, UTF-8, JSON, what jsonb can store, the envelope, then the type's contract. Each failure
 * has its own reason; nothing here depends on other messages, so live and rebuild agree.
 */
export function checkReceipt(subject: string, data: Uint8Array, subjectPrefix: string): ReceiptCheck {
  const parts = evidenceSubjectParts(subject, subjectPrefix);
  if (parts === null) {
    return { ok: false, chainId: null, reason: 'invalid_subject', detail: bounded(`subject ${subject} is not ${subjectPrefix}.<run_…, sbx_… or adm_… id>.<type>`) };
  }
  const { chainId } = parts;
  let text: string;
  let value: unknown;
  try {
    text = decoder.decode(data);
    value = JSON.parse(text);
  } catch (error) {
    return { ok: false, chainId, reason: 'not_json', detail: bounded(messageOf(error)) };
  }
  if (mayBeUnstorable(text)) {
    const problem = jsonTextProblem(text, MAX_JSON_DEPTH);
    if (problem !== null) return { ok: false, chainId, reason: 'unstorable_json', detail: problem };
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return { ok: false, chainId, reason: 'not_json', detail: 'a receipt is a JSON object' };
  }
  // Only a \u escape can smuggle in what jsonb refuses (NUL, a lone surrogate); skip the walk otherwise.
  if (text.includes('\\u')) {
    const unstorable = findUnstorable(value, '');
    if (unstorable !== null) return { ok: false, chainId, reason: 'unstorable_json', detail: unstorable };
  }
  // A type's receipt schema checks the envelope too, so a valid receipt is checked once; the
  // envelope alone is looked at only to say why an invalid one is invalid. The compiled contracts
  // vouch for a valid receipt at two thirds of zod's cost; zod judges whatever they do not pass.
  let parsed: ReturnType<typeof parseEvidenceReceipt>;
  try {
    parsed = passesReceiptContract(value) ? { ok: true, receipt: value } : parseEvidenceReceipt(value);
  } catch (error) {
    // A validator that throws must not block the projector; the message is recorded instead.
    return { ok: false, chainId, reason: 'invalid_fields', detail: bounded(`the contract check failed: ${messageOf(error)}`) };
  }
  if (!parsed.ok) {
    const envelope = ReceiptEnvelopeSchema.safeParse(value);
    if (!envelope.success) {
      const problems = envelope.error.issues.map((issue) => `${issue.path.join('.') || '(receipt)'}: ${issue.message}`);
      return { ok: false, chainId, reason: 'invalid_envelope', detail: bounded(problems.join('; ')) };
    }
    return {
      ok: false,
      chainId,
      reason: parsed.reason === 'unknown_event_type' ? 'unknown_type' : 'invalid_fields',
      detail: bounded(parsed.message),
    };
  }
  if (!isCalendarTimestamp(parsed.receipt.ts)) {
    return { ok: false, chainId, reason: 'invalid_envelope', detail: `ts: ${parsed.receipt.ts} is not a date PostgreSQL can store` };
  }
  // Consumers take receipts by the type their subject names: one that says another would reach the wrong services.
  if (parsed.receipt.type !== parts.type) {
    return { ok: false, chainId, reason: 'invalid_subject', detail: bounded(`subject ${subject} names type ${parts.type}, the receipt is ${parsed.receipt.type}`) };
  }
  return { ok: true, chainId, text, receipt: parsed.receipt };
}

/**
 * The contract's regex checks the shape only (`YYYY-MM-DDTHH:MM:SS.mmmZ`); 2026-02-30, 24:00 or
 * year 0000 would pass it and then fail the insert. Plain arithmetic: this runs per message.
 */
export function isCalendarTimestamp(ts: string): boolean {
  const year = Number(ts.slice(0, 4));
  const month = Number(ts.slice(5, 7));
  const day = Number(ts.slice(8, 10));
  const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
  const days = month === 2 ? (leap ? 29 : 28) : month === 4 || month === 6 || month === 9 || month === 11 ? 30 : 31;
  return (
    year >= 1 &&
    month >= 1 &&
    month <= 12 &&
    day >= 1 &&
    day <= days &&
    Number(ts.slice(11, 13)) <= 23 &&
    Number(ts.slice(14, 16)) <= 59 &&
    Number(ts.slice(17, 19)) <= 59
  );
}

/**
 * Whether `jsonTextProblem` could find anything in this valid JSON text (never false when it
 * would): deep nesting needs length, a huge number a long exponent or a long run of digits.
 */
export function mayBeUnstorable(text: string): boolean {
  return text.length > 2 * MAX_JSON_DEPTH || SUSPECT_NUMBER.test(text) || TOP_LEVEL_NUMBER.test(text);
}

/**
 * What in valid JSON text PostgreSQL's jsonb would refuse, or the validators could not walk:
 * nesting past `maxDepth`, or a number jsonb's numeric cannot hold (it overflows past 131 072
 * digits before or 16 383 after the point, e.g. 1e-20000). Numbers that JavaScript writes are
 * at most 25 characters with a 3-digit exponent; longer ones are refused with margin.
 */
export function jsonTextProblem(text: string, maxDepth: number): string | null {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i += 1; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) {
      if (++depth > maxDepth) return `nested deeper than ${maxDepth} levels`;
    } else if (c === 0x5d || c === 0x7d) depth -= 1;
    else if (c === 0x2d || (c >= 0x30 && c <= 0x39)) {
      const start = i;
      let exponentDigits = -1;
      for (; i + 1 < text.length; i++) {
        const d = text.charCodeAt(i + 1);
        if (d === 0x65 || d === 0x45) exponentDigits = 0;
        else if (d >= 0x30 && d <= 0x39) {
          if (exponentDigits >= 0) exponentDigits += 1;
        } else if (d !== 0x2e && d !== 0x2b && d !== 0x2d) break;
      }
      if (i + 1 - start > MAX_NUMBER_LENGTH || exponentDigits > 3) return `the number ${text.slice(start, start + 40)}… is beyond what jsonb stores`;
    }
  }
  return null;
}

function findUnstorable(value: unknown, path: string): string | null {
  if (typeof value === 'string') return storable(value) ? null : `${path || '(root)'}: a NUL or a lone surrogate`;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = findUnstorable(value[i], `${path}[${i}]`);
      if (found !== null) return found;
    }
    return null;
  }
  if (typeof value === 'object' && value !== null) {
    for (const [key, child] of Object.entries(value)) {
      if (!storable(key)) return `${path || '(root)'}: a key with a NUL or a lone surrogate`;
      const found = findUnstorable(child, path === '' ? key : `${path}.${key}`);
      if (found !== null) return found;
    }
  }
  return null;
}

function storable(text: string): boolean {
  return text.isWellFormed() && !text.includes('\u0000');
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function bounded(text: string): string {
  return text.length <= DETAIL_LIMIT ? text : `${text.slice(0, DETAIL_LIMIT)}…`;
}
