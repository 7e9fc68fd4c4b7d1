import { ReceiptEnvelopeSchema } from '@cairn/contracts';
import { receiptBody, receiptHash } from '@cairn/evidence';

/**
 * Why a message seen on a run's chain subjects cannot be one of its receipts — not JSON, not the
 * receipt envelope, or a hash that its body and `prev_hash` do not recompute to (a forgery, ADR
 * 0033) — or null when it may be one. Pure. Only a suspicion: a message published on the subjects
 * may not be stored (a refused compare-and-set), so the runtime then reads the chain as stored.
 */
export function chainMessageProblem(text: string): string | null {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return 'not JSON';
  }
  const envelope = ReceiptEnvelopeSchema.safeParse(value);
  if (!envelope.success) return `not a receipt envelope (${envelope.error.issues[0]?.path.join('.') || 'receipt'}: ${envelope.error.issues[0]?.message ?? 'invalid'})`;
  const receipt = value as { seq: number; prev_hash: string; hash: string };
  try {
    const recomputed = receiptHash(receipt.prev_hash, receiptBody(value as Record<string, unknown>));
    return recomputed === receipt.hash ? null : `seq ${receipt.seq}: its hash does not recompute from its body`;
  } catch (error) {
    return `seq ${receipt.seq}: not canonicalisable (${error instanceof Error ? error.message : String(error)})`;
  }
}
