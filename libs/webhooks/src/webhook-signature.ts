import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

/*
 * How a delivery is signed (documented in docs/subscribers.md; receivers depend on it):
 *
 *   Cairn-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>
 *
 * `secret` is the whole `whsec_…` string as UTF-8 bytes; `body` is the exact request body.
 * A receiver recomputes v1 over the bytes it received, compares in constant time, and refuses a
 * `t` too far from its clock (replays). Several v1 entries may appear (reserved for rotation);
 * one match is enough.
 */

export const SIGNATURE_HEADER = 'Cairn-Signature';
export const EVENT_ID_HEADER = 'Cairn-Event-Id';
export const EVENT_TYPE_HEADER = 'Cairn-Event-Type';
export const DELIVERY_ID_HEADER = 'Cairn-Delivery-Id';
export const DELIVERY_ATTEMPT_HEADER = 'Cairn-Delivery-Attempt';

/** The prefix of a webhook signing secret. */
export const WEBHOOK_SECRET_PREFIX = 'whsec_';

/** A fresh signing secret: `whsec_` and 32 random bytes in base64url. */
export function newWebhookSecret(): string {
  return `${WEBHOOK_SECRET_PREFIX}${randomBytes(32).toString('base64url')}`;
}

function mac(secret: string, timestamp: number, body: string | Uint8Array): string {
  const hmac = createHmac('sha256', secret);
  hmac.update(`${timestamp}.`);
  hmac.update(body);
  return hmac.digest('hex');
}

/** The `Cairn-Signature` header value for `body` sent at `timestamp` (unix seconds). */
export function signatureHeader(secret: string, timestamp: number, body: string | Uint8Array): string {
  if (!Number.isSafeInteger(timestamp) || timestamp < 0) throw new TypeError('timestamp: unix seconds');
  return `t=${timestamp},v1=${mac(secret, timestamp, body)}`;
}

export type SignatureCheck = { ok: true; timestamp: number } | { ok: false; reason: 'malformed' | 'mismatch' | 'stale' };

/**
 * Checks a `Cairn-Signature` header against the body received: one `t`, at least one `v1`
 * matching (constant-time), and `t` within `toleranceSeconds` of `nowSeconds`.
 */
export function verifySignatureHeader(
  secret: string,
  header: string,
  body: string | Uint8Array,
  options: { nowSeconds?: number; toleranceSeconds?: number } = {},
): SignatureCheck {
  let timestamp: number | null = null;
  const candidates: string[] = [];
  for (const part of header.split(',')) {
    const eq = part.indexOf('=');
    if (eq <= 0) return { ok: false, reason: 'malformed' };
    const key = part.slice(0, eq).trim();
    const value = part.slice(eq + 1).trim();
    if (key === 't') {
      if (timestamp !== null || !/^\d{1,12}$/.test(value)) return { ok: false, reason: 'malformed' };
      timestamp = Number(value);
    } else if (key === 'v1') {
      if (!/^[0-9a-f]{64}$/.test(value)) return { ok: false, reason: 'malformed' };
      candidates.push(value);
    }
  }
  if (timestamp === null || candidates.length === 0) return { ok: false, reason: 'malformed' };
  const expected = Buffer.from(mac(secret, timestamp, body), 'hex');
  if (!candidates.some((candidate) => timingSafeEqual(Buffer.from(candidate, 'hex'), expected))) return { ok: false, reason: 'mismatch' };
  const now = options.nowSeconds ?? Math.floor(Date.now() / 1000);
  if (Math.abs(now - timestamp) > (options.toleranceSeconds ?? 300)) return { ok: false, reason: 'stale' };
  return { ok: true, timestamp };
}
