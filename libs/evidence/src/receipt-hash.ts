import { createHash } from 'node:crypto';
import { canonicalJson } from './canonical-json.js';

/** Names a receipt adds to its body; everything else in a receipt is the hashed body. */
export const LINK_FIELDS = ['prev_hash', 'hash'] as const;

export function sha256Hex(data: string | Uint8Array): string {
  return createHash('sha256').update(data).digest('hex');
}

/** I-4: the receipt preimage is exactly `prev_hash + "\n" + canonicalJson(body)`. */
export function receiptPreimage(prevHash: string, body: unknown): string {
  return `${prevHash}\n${canonicalJson(body)}`;
}

export function receiptHash(prevHash: string, body: unknown): string {
  return sha256Hex(receiptPreimage(prevHash, body));
}

/** Seals a body into a receipt: the body plus `prev_hash` and `hash`. */
export function sealReceipt<B extends Record<string, unknown>>(prevHash: string, body: B): B & { prev_hash: string; hash: string } {
  for (const field of LINK_FIELDS) {
    if (Object.hasOwn(body, field)) throw new TypeError(`a receipt body may not carry ${field}`);
  }
  return { ...body, prev_hash: prevHash, hash: receiptHash(prevHash, body) };
}

/** The hashed body of a receipt: the receipt without its link fields. */
export function receiptBody(receipt: Record<string, unknown>): Record<string, unknown> {
  const { prev_hash: _p, hash: _h, ...body } = receipt;
  return body;
}
