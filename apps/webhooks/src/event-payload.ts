import { eventId } from '@cairn/contracts';
import type { EvidenceReceipt } from '@cairn/contracts';

/**
 * What a webhook receives for one receipt: its stable id (`<chain>:<seq>`, the same for every
 * attempt and replay, so receivers drop repeats by it), its type, tenant, chain and seq, and the
 * receipt as stored on the chain (so a receiver can re-hash it: `hash` covers it).
 */
export function webhookBody(receipt: EvidenceReceipt): string {
  return JSON.stringify({ id: eventId(receipt.run_id, receipt.seq), type: receipt.type, tenant: receipt.tenant, chain: receipt.run_id, seq: receipt.seq, receipt });
}
