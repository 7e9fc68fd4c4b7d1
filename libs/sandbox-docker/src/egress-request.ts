import { parseIpv4, parseIpv6 } from './egress-address.js';

/*
 * Reading what a sandbox asks its egress proxy for: the target of a CONNECT (`host:port`) or of a
 * plain HTTP request in absolute form (`http://host:port/path`). Pure; anything unusual is null
 * (the proxy answers 400 and connects nowhere).
 */

export interface EgressTarget {
  /** Lower-case, without a trailing dot; an IPv6 literal without its brackets. */
  host: string;
  port: number;
  /** `host:port` as allowlists spell it (an IPv6 literal in brackets). */
  key: string;
}

const LABEL = /^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?$/;

/** A host name or IP literal as the proxy compares it, or null when it is neither. */
export function normaliseHost(raw: string): string | null {
  let host = raw.toLowerCase();
  if (host.startsWith('[') && host.endsWith(']')) {
    const inner = host.slice(1, -1);
    return parseIpv6(inner) === null || inner.includes('%') ? null : inner;
  }
  if (host.endsWith('.')) host = host.slice(0, -1);
  if (host.length === 0 || host.length > 253) return null;
  if (parseIpv4(host) !== null) return host;
  return host.split('.').every((label) => LABEL.test(label)) ? host : null;
}

function port(text: string): number | null {
  if (!/^[0-9]{1,5}$/.test(text)) return null;
  const value = Number(text);
  return value >= 1 && value <= 65_535 ? value : null;
}

function target(host: string, portNumber: number): EgressTarget {
  return { host, port: portNumber, key: `${host.includes(':') ? `[${host}]` : host}:${portNumber}` };
}

/** `host:port` or `[v6]:port`, as a CONNECT names it (the port is required). */
export function parseConnectTarget(authority: string): EgressTarget | null {
  const match = /^(\[[^\]]+\]|[^:[\]]+):([0-9]+)$/.exec(authority);
  if (match?.[1] === undefined || match[2] === undefined) return null;
  const host = normaliseHost(match[1]);
  const portNumber = port(match[2]);
  return host === null || portNumber === null ? null : target(host, portNumber);
}

export interface HttpTarget extends EgressTarget {
  /** The origin-form request target to send upstream (`/path?query`). */
  path: string;
  /** The Host header to send upstream (the port only when it is not 80). */
  hostHeader: string;
}

/**
 * A plain-HTTP proxy request's absolute-form target (`http://host[:port]/…`). `https://` is not
 * proxied this way (a client tunnels it with CONNECT), nor is any URL with credentials in it.
 */
export function parseHttpTarget(requestTarget: string): HttpTarget | null {
  if (!/^http:\/\//i.test(requestTarget)) return null;
  let url: URL;
  try {
    url = new URL(requestTarget);
  } catch {
    return null;
  }
  if (url.protocol !== 'http:' || url.username !== '' || url.password !== '') return null;
  // The URL parser has already lower-cased the name and bracketed an IPv6 literal.
  const host = normaliseHost(url.hostname);
  const portNumber = url.port === '' ? 80 : port(url.port);
  if (host === null || portNumber === null) return null;
  return { ...target(host, portNumber), path: `${url.pathname}${url.search}`, hostHeader: url.host };
}
