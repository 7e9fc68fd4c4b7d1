import { createHash, timingSafeEqual } from 'node:crypto';
import { API_KEY_PATTERN } from '../mcp-gateway.config.js';

/*
 * What every HTTP request must pass before the MCP transport sees it. Host and Origin against
 * an allowlist stop DNS rebinding (a web page whose name resolves to 127.0.0.1 talking to a local
 * endpoint); the Bearer key says who acts.
 */

/** The host name of a Host header, lower-case and without its port (IPv6 kept in brackets); null when malformed. */
export function hostNameOf(host: string | undefined): string | null {
  if (host === undefined || host === '') return null;
  const value = host.trim().toLowerCase();
  const ipv6 = /^(\[[0-9a-f:.]+\])(?::\d{1,5})?$/.exec(value);
  if (ipv6 !== null) return ipv6[1] ?? null;
  const named = /^([a-z0-9.-]{1,253})(?::\d{1,5})?$/.exec(value);
  return named?.[1] ?? null;
}

export interface OriginPolicy {
  /** Host names (no port) the endpoint answers to. */
  allowedHosts: readonly string[];
  /** Exact origins allowed besides http(s) origins on an allowed host. */
  allowedOrigins: readonly string[];
}

/** Null when the request may go on; otherwise why it is refused (403). */
export function refuseHostOrOrigin(headers: { host?: string | undefined; origin?: string | undefined }, policy: OriginPolicy): string | null {
  const host = hostNameOf(headers.host);
  if (host === null || !policy.allowedHosts.includes(host)) return 'the Host header is not one this MCP endpoint answers to (DNS-rebinding protection)';
  const origin = headers.origin;
  if (origin === undefined) return null;
  const normalized = origin.trim().toLowerCase();
  if (policy.allowedOrigins.includes(normalized)) return null;
  let url: URL;
  try {
    url = new URL(normalized);
  } catch {
    return 'the Origin header is not an allowed origin (DNS-rebinding protection)';
  }
  if ((url.protocol === 'http:' || url.protocol === 'https:') && url.origin === normalized && policy.allowedHosts.includes(url.hostname)) return null;
  return 'the Origin header is not an allowed origin (DNS-rebinding protection)';
}

/** The API key of an `Authorization: Bearer <key>` header in Cairn's key form; null otherwise. */
export function bearerKey(authorization: string | undefined): string | null {
  const match = /^Bearer ([^\s]+)$/i.exec(authorization?.trim() ?? '');
  const key = match?.[1];
  return key !== undefined && API_KEY_PATTERN.test(key) ? key : null;
}

/** What a session remembers of its key: never the key itself. */
export function keyDigest(key: string): Buffer {
  return createHash('sha256').update(key).digest();
}

export function sameKey(a: Buffer, b: Buffer): boolean {
  return a.length === b.length && timingSafeEqual(a, b);
}
