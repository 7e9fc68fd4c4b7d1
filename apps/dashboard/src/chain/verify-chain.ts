import { canonicalJson, CanonicalJsonError } from './canonical-json.js';

/*
 * The chain badge's check, done in the page with WebCrypto: every receipt's hash is recomputed as
 * sha256_hex(prev_hash + "\n" + JCS(body)) from genesis (docs/architecture.md, "The evidence
 * chain"), so a receipt changed anywhere between the evidence log and this tab shows as a break.
 */

export const GENESIS_HASH = '0'.repeat(64);

export type ChainBreakReason = 'malformed' | 'seq_out_of_order' | 'chain_id_mismatch' | 'prev_hash_mismatch' | 'hash_mismatch' | 'not_canonicalisable';

export type ChainCheck =
  | { ok: true; count: number; headHash: string; headSeq: number }
  | { ok: false; firstBadSeq: number; reason: ChainBreakReason; message: string; verified: number };

/** WebCrypto exists only in a secure context (HTTPS, or http://localhost / 127.0.0.1). */
export function webCryptoAvailable(): boolean {
  return typeof globalThis.crypto !== 'undefined' && typeof globalThis.crypto.subtle !== 'undefined';
}

export async function sha256Hex(text: string): Promise<string> {
  const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(text));
  return Array.from(new Uint8Array(digest), (byte) => byte.toString(16).padStart(2, '0')).join('');
}

/** The hashed body of a receipt: everything but `prev_hash` and `hash`. */
export function receiptBody(receipt: Record<string, unknown>): Record<string, unknown> {
  const { prev_hash: _prev, hash: _hash, ...body } = receipt;
  return body;
}

/**
 * Verifies `receipts` (chain order, from seq 1) and stops at the first that does not hold.
 * `chainId`: every receipt must carry it as `run_id` (the page asked for this run's receipts).
 */
export async function verifyChain(receipts: readonly unknown[], chainId: string): Promise<ChainCheck> {
  let headHash = GENESIS_HASH;
  for (let index = 0; index < receipts.length; index++) {
    const expectedSeq = index + 1;
    const fail = (reason: ChainBreakReason, message: string): ChainCheck => ({ ok: false, firstBadSeq: expectedSeq, reason, message, verified: index });
    const receipt = receipts[index];
    if (typeof receipt !== 'object' || receipt === null || Array.isArray(receipt)) return fail('malformed', 'a receipt must be a JSON object');
    const r = receipt as Record<string, unknown>;
    if (typeof r.hash !== 'string' || typeof r.prev_hash !== 'string') return fail('malformed', 'a receipt needs string prev_hash and hash');
    if (r.seq !== expectedSeq) return fail('seq_out_of_order', `expected seq ${expectedSeq}, found ${JSON.stringify(r.seq)}`);
    if (r.run_id !== chainId) return fail('chain_id_mismatch', `run_id ${JSON.stringify(r.run_id)} is not ${chainId}`);
    if (r.prev_hash !== headHash) return fail('prev_hash_mismatch', `prev_hash does not match the hash of receipt ${index}`);
    let canonical: string;
    try {
      canonical = canonicalJson(receiptBody(r));
    } catch (error) {
      if (error instanceof CanonicalJsonError) return fail('not_canonicalisable', error.message);
      throw error;
    }
    const recomputed = await sha256Hex(`${r.prev_hash}\n${canonical}`);
    if (recomputed !== r.hash) return fail('hash_mismatch', `the receipt's hash ${r.hash.slice(0, 12)}… is not the recomputed ${recomputed.slice(0, 12)}…`);
    headHash = recomputed;
  }
  return { ok: true, count: receipts.length, headHash, headSeq: receipts.length };
}
