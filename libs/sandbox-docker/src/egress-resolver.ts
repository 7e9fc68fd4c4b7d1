import { CairnError } from '@cairn/contracts';
import { canonicalAddress } from './egress-address.js';
import { normaliseHost } from './egress-request.js';

/*
 * How the egress proxy turns an allowlisted name into addresses. Sandboxes have no resolver of
 * their own (docs/sandbox-hardening.md, "Egress"): the proxy resolves, then judges every address.
 * The proxy runs as a process of its own (egress-proxy-process.ts), so a resolver is a description
 * it is handed at start, not a function of this process.
 */

/** The host's resolver, or a fixed table in place of DNS. */
export type EgressResolver = { readonly kind: 'system' } | { readonly kind: 'static'; readonly table: ReadonlyMap<string, readonly string[]> };

/** The worker host's own resolver (`getaddrinfo`: /etc/hosts, then DNS), every address it gives. */
export function systemResolver(): EgressResolver {
  return { kind: 'system' };
}

/**
 * A fixed table in place of DNS (`CAIRN_EGRESS_HOSTS`, for tests and air-gapped operators): a
 * name it lacks does not resolve at all — nothing falls through to DNS. The table is read when a
 * sandbox's proxy starts.
 */
export function staticResolver(table: ReadonlyMap<string, readonly string[]>): EgressResolver {
  return { kind: 'static', table };
}

/**
 * `name=address[,name=address…]` (a name may appear more than once: several addresses). Throws
 * `E_INPUT` naming the first bad entry; addresses are kept in canonical form.
 */
export function parseEgressHosts(text: string): Map<string, string[]> {
  const table = new Map<string, string[]>();
  for (const raw of text.split(',')) {
    const entry = raw.trim();
    if (entry === '') continue;
    const eq = entry.indexOf('=');
    const name = eq > 0 ? normaliseHost(entry.slice(0, eq).trim()) : null;
    const address = eq > 0 ? canonicalAddress(entry.slice(eq + 1).trim()) : null;
    if (name === null || address === null || canonicalAddress(name) !== null) {
      throw new CairnError('E_INPUT', `egress host table: ${JSON.stringify(entry)} is not name=address`);
    }
    table.set(name, [...(table.get(name) ?? []), address]);
  }
  return table;
}
