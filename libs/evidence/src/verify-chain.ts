import { GENESIS_HASH } from '@cairn/contracts';
import { CanonicalJsonError } from './canonical-json.js';
import { receiptBody, receiptHash } from './receipt-hash.js';

export type ChainBreakReason =
  | 'malformed'
  | 'seq_out_of_order'
  | 'chain_id_mismatch'
  | 'prev_hash_mismatch'
  | 'hash_mismatch'
  | 'not_canonicalisable'
  | 'empty';

export type ChainVerification =
  | { ok: true; chainId: string | null; count: number; headHash: string; headSeq: number }
  | {
      ok: false;
      code: 'E_CHAIN_BROKEN';
      /** The seq at which the chain first stops verifying (the position's expected seq). */
      firstBadSeq: number;
      reason: ChainBreakReason;
      message: string;
      /** Receipts that verified before the break. */
      verified: number;
    };

export interface VerifyOptions {
  /** When set, an empty chain is an error (a chain file must hold at least one receipt). */
  requireNonEmpty?: boolean;
  /** When set, every receipt must carry this `run_id`. */
  chainId?: string;
}

/**
 * Checks receipts one at a time from genesis, so a chain of any length verifies in constant
 * memory. Stops at the first bad receipt and remembers it.
 */
export class ChainVerifier {
  private headHash = GENESIS_HASH;
  private count = 0;
  private chainId: string | null;
  private failure: Extract<ChainVerification, { ok: false }> | null = null;

  constructor(private readonly options: VerifyOptions = {}) {
    this.chainId = options.chainId ?? null;
  }

  /** Returns false once the chain is broken; later receipts are ignored. */
  push(receipt: unknown): boolean {
    if (this.failure) return false;
    const expectedSeq = this.count + 1;
    if (typeof receipt !== 'object' || receipt === null || Array.isArray(receipt)) {
      return this.fail(expectedSeq, 'malformed', 'a receipt must be a JSON object');
    }
    const r = receipt as Record<string, unknown>;
    if (typeof r.hash !== 'string' || typeof r.prev_hash !== 'string') {
      return this.fail(expectedSeq, 'malformed', 'a receipt needs string prev_hash and hash');
    }
    if (r.seq !== expectedSeq) {
      return this.fail(expectedSeq, 'seq_out_of_order', `expected seq ${expectedSeq}, found ${JSON.stringify(r.seq)}`);
    }
    const runId = typeof r.run_id === 'string' ? r.run_id : null;
    if (this.chainId === null && this.count === 0) this.chainId = runId;
    if (runId !== this.chainId) {
      return this.fail(expectedSeq, 'chain_id_mismatch', `run_id ${JSON.stringify(r.run_id)} is not this chain's ${JSON.stringify(this.chainId)}`);
    }
    if (r.prev_hash !== this.headHash) {
      return this.fail(expectedSeq, 'prev_hash_mismatch', `prev_hash ${r.prev_hash} does not match the previous hash ${this.headHash}`);
    }
    let recomputed: string;
    try {
      recomputed = receiptHash(r.prev_hash, receiptBody(r));
    } catch (error) {
      if (error instanceof CanonicalJsonError) return this.fail(expectedSeq, 'not_canonicalisable', error.message);
      throw error;
    }
    if (recomputed !== r.hash) {
      return this.fail(expectedSeq, 'hash_mismatch', `hash ${r.hash} does not match the recomputed ${recomputed}`);
    }
    this.headHash = recomputed;
    this.count = expectedSeq;
    return true;
  }

  /** Marks the chain broken at the next position (e.g. a line that is not JSON). */
  breakHere(reason: ChainBreakReason, message: string): void {
    if (!this.failure) this.fail(this.count + 1, reason, message);
  }

  result(): ChainVerification {
    if (this.failure) return this.failure;
    if (this.count === 0 && this.options.requireNonEmpty) {
      return { ok: false, code: 'E_CHAIN_BROKEN', firstBadSeq: 1, reason: 'empty', message: 'the chain holds no receipt', verified: 0 };
    }
    return { ok: true, chainId: this.chainId, count: this.count, headHash: this.headHash, headSeq: this.count };
  }

  private fail(seq: number, reason: ChainBreakReason, message: string): false {
    this.failure = { ok: false, code: 'E_CHAIN_BROKEN', firstBadSeq: seq, reason, message, verified: this.count };
    return false;
  }
}

/** Recomputes every hash from genesis and reports the first bad seq. */
export function verifyChain(receipts: Iterable<unknown>, options: VerifyOptions = {}): ChainVerification {
  const verifier = new ChainVerifier(options);
  for (const receipt of receipts) {
    if (!verifier.push(receipt)) break;
  }
  return verifier.result();
}
