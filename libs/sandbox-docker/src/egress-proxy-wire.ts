import { normaliseHost } from './egress-request.js';
import type { EgressResolver } from './egress-resolver.js';

/*
 * What the runtime and its egress proxy process (egress-proxy.child.ts) tell each other: the
 * proxy's configuration, one JSON line on its stdin; and back, one JSON line per event on its
 * stdout, each at most MAX_LINE_BYTES and checked field by field here before the runtime acts on
 * it. The proxy parses what the sandbox sends; the runtime parses only these lines. Pure.
 */

/** The proxy's configuration (runtime → proxy): nothing secret, nothing the sandbox chose. */
export interface ProxyConfig {
  listenHost: string;
  allow: string[];
  allowPrivate: boolean;
  clientSubnet: string;
  resolver: { kind: 'system' } | { kind: 'static'; table: [string, string[]][] };
}

/** A resolver as the proxy is handed it (a static table read now). */
export function wireResolver(resolver: EgressResolver): ProxyConfig['resolver'] {
  return resolver.kind === 'static' ? { kind: 'static', table: [...resolver.table].map(([name, addresses]) => [name, [...addresses]]) } : { kind: 'system' };
}

export type EgressDenialReason = 'not_allowlisted' | 'private_address' | 'resolution_failed';

/**
 * What the proxy reports (proxy → runtime). `synced` answers the runtime's `{"t":"sync","n":…}`
 * line: every refusal the proxy answered before it is reported before it (refusals are reported
 * before they are answered), so a step's refusals are all heard by the time its sync is.
 */
export type ProxyMessage =
  | { t: 'listening'; port: number }
  | { t: 'denied'; host: string; port: number; reason: EgressDenialReason }
  | { t: 'synced'; n: number }
  | { t: 'failed'; message: string };

/** What the runtime sends after the configuration (runtime → proxy). */
export interface ProxySync {
  t: 'sync';
  n: number;
}

/** Longer lines mean the proxy is not itself: the runtime stops it. */
export const MAX_LINE_BYTES = 1024;
const MAX_FAILURE_TEXT = 512;
const REASONS: ReadonlySet<string> = new Set<EgressDenialReason>(['not_allowlisted', 'private_address', 'resolution_failed']);

function isPort(value: unknown): value is number {
  return typeof value === 'number' && Number.isInteger(value) && value >= 1 && value <= 65_535;
}

/** A host as the proxy reports it: normalised, lower-case, an IPv6 literal without brackets. */
function isReportedHost(value: unknown): value is string {
  if (typeof value !== 'string' || value.length === 0 || value.length > 253) return false;
  return value.includes(':') ? normaliseHost(`[${value}]`) === value : normaliseHost(value) === value;
}

/** One line from the proxy, checked; null when it is anything else (the runtime then stops the proxy). */
export function parseProxyMessage(line: string): ProxyMessage | null {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return null;
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return null;
  const record = value as Record<string, unknown>;
  const keys = Object.keys(record).sort().join(',');
  switch (record.t) {
    case 'listening':
      return keys === 'port,t' && isPort(record.port) ? { t: 'listening', port: record.port } : null;
    case 'denied':
      return keys === 'host,port,reason,t' && isReportedHost(record.host) && isPort(record.port) && typeof record.reason === 'string' && REASONS.has(record.reason)
        ? { t: 'denied', host: record.host, port: record.port, reason: record.reason as EgressDenialReason }
        : null;
    case 'synced':
      return keys === 'n,t' && typeof record.n === 'number' && Number.isSafeInteger(record.n) && record.n >= 0 ? { t: 'synced', n: record.n } : null;
    case 'failed':
      return keys === 'message,t' && typeof record.message === 'string' ? { t: 'failed', message: record.message.slice(0, MAX_FAILURE_TEXT) } : null;
    default:
      return null;
  }
}

/** Splits a byte stream into lines of at most `maxBytes`; `onLine` gets each, `onOverflow` once when one is longer. */
export class BoundedLines {
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  private overflowed = false;

  constructor(
    private readonly maxBytes: number,
    private readonly onLine: (line: string) => void,
    private readonly onOverflow: () => void,
  ) {}

  push(chunk: Buffer): void {
    let at = 0;
    while (at < chunk.length && !this.overflowed) {
      const newline = chunk.indexOf(0x0a, at);
      const end = newline === -1 ? chunk.length : newline;
      this.pendingBytes += end - at;
      if (this.pendingBytes > this.maxBytes) {
        this.overflowed = true;
        this.pending = [];
        this.onOverflow();
        return;
      }
      this.pending.push(chunk.subarray(at, end));
      if (newline === -1) return;
      const line = Buffer.concat(this.pending).toString('utf8');
      this.pending = [];
      this.pendingBytes = 0;
      at = newline + 1;
      this.onLine(line);
    }
  }
}
