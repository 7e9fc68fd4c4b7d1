import { CairnError } from '@cairn/contracts';
import { lookup } from 'node:dns/promises';
import { canonicalAddress } from './egress-address.js';
import { normaliseHost } from './egress-request.js';

/*
 * How the egress proxy turns an allowlisted name into addresses. Sandboxes have no resolver of
 * their own (docs/sandbox-hardening.md, "Egress"): the proxy resolves, then judges every address.
 */

/** The addresses of a host name; rejects when it has none. */
export type EgressResolver = (host: string) => Promise<string[]>;

/** The worker host's own resolver (`getaddrinfo`: /etc/hosts, then DNS), every address it gives. */
export function systemResolver(): EgressResolver {
  return async (host) => {
    const found = await lookup(host, { all: true, verbatim: true });
    if (found.length === 0) throw new Error(`${host} has no address`);
    return found.map((entry) => entry.address);
  };
}

/**
 * A fixed table in place of DNS (`CAIRN_EGRESS_HOSTS`, for tests and air-gapped operators): a
 * name it lacks does not resolve at all — nothing falls through to DNS.
 */
export function staticResolver(table: ReadonlyMap<string, readonly string[]>): EgressResolver {
  return (host) => {
    const addresses = table.get(host);
    return addresses === undefined || addresses.length === 0 ? Promise.reject(new Error(`${host} is not in the egress host table`)) : Promise.resolve([...addresses]);
  };
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
