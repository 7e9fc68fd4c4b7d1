import { CairnError, ReceiptEnvelopeSchema } from '@cairn/contracts';
import type { ReceiptEnvelope } from '@cairn/contracts';

const decoder = new TextDecoder('utf-8', { fatal: true });

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
      cause: error instanceof Error ? error.message : String(error),
    });
  }
  const parsed = ReceiptEnvelopeSchema.safeParse(value);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => `${issue.path.join('.') || '(receipt)'}: ${issue.message}`);
    throw new CairnError('E_CHAIN_BROKEN', `message ${where.streamSeq} on ${where.subject} is not a receipt: ${problems.join('; ')}`, {
      ...where,
      problems,
    });
  }
  return value as ReceiptEnvelope;
}
