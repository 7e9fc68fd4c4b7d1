import { CairnError, isCairnError, ReceiptEnvelopeSchema } from '@cairn/contracts';
import type { ReceiptEnvelope } from '@cairn/contracts';

const decoder = new TextDecoder('utf-8', { fatal: true });

/**
 * `details.reason` of the E_CHAIN_BROKEN a chain read fails with when a message under the chain's
 * subjects is not a receipt at all (not JSON, or not the envelope): a poison message (ADR 0033).
 */
export const NOT_A_RECEIPT = 'not_a_receipt';

/** Whether `error` is a chain read that met a message that is not a receipt (`NOT_A_RECEIPT`). */
export function isNotAReceipt(error: unknown): error is CairnError {
  return isCairnError(error) && error.code === 'E_CHAIN_BROKEN' && error.details?.['reason'] === NOT_A_RECEIPT;
}

/**
 * A message under a chain's subjects that is not a receipt: where it is stored, which receipt it
 * follows (`afterSeq`, 0 before the first) and why it is not one. It is no part of the hash chain.
 */
export interface ChainBreak {
  streamSeq: number;
  subject: string;
  afterSeq: number;
  reason: string;
}

/** The stored message as a receipt, or why it is not one (the message of the E_CHAIN_BROKEN `parseStoredReceipt` throws). */
export function tryParseStoredReceipt(data: Uint8Array, where: { subject: string; streamSeq: number }): { ok: true; receipt: ReceiptEnvelope } | { ok: false; reason: string } {
  try {
    return { ok: true, receipt: parseStoredReceipt(data, where) };
  } catch (error) {
    if (isNotAReceipt(error)) return { ok: false, reason: error.message };
    throw error;
  }
}

/**
 * Parses a stored message as a receipt and returns it exactly as stored (the parsed JSON, not a
 * reshaped copy). A message under a chain's subject that is not a receipt is E_CHAIN_BROKEN.
 */
export function parseStoredReceipt(data: Uint8Array, where: { subject: string; streamSeq: number }): ReceiptEnvelope {
  let value: unknown;
  try {
    value = JSON.parse(decoder.decode(data));
  } catch (error) {
    throw new CairnError('E_CHAIN_BROKEN', `message ${where.streamSeq} on ${where.subject} is not JSON`, {
      ...where,
      reason: NOT_A_RECEIPT,
      cause: error instanceof Error ? error.message : String(error),
    });
  }
  const parsed = ReceiptEnvelopeSchema.safeParse(value);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => `${issue.path.join('.') || '(receipt)'}: ${issue.message}`);
    throw new CairnError('E_CHAIN_BROKEN', `message ${where.streamSeq} on ${where.subject} is not a receipt: ${problems.join('; ')}`, {
      ...where,
      reason: NOT_A_RECEIPT,
      problems,
    });
  }
  return value as ReceiptEnvelope;
}
