import { lookup as dnsLookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { CairnError, MAX_WEBHOOK_URL_LENGTH } from '@cairn/contracts';
import { addressAllowed, classifyAddress } from './address-policy.js';

export interface ResolvedAddress {
  address: string;
  family: 4 | 6;
}

/** Resolves a host name to every address it has (tests inject their own). */
export type HostResolver = (host: string) => Promise<ResolvedAddress[]>;

export const systemResolver: HostResolver = async (host) => {
  const found = await dnsLookup(host, { all: true, verbatim: true });
  return found.map((entry) => ({ address: entry.address, family: entry.family === 6 ? 6 : 4 }));
};

export interface CheckedUrl {
  url: URL;
  /** The addresses checked, to connect to exactly these (no second resolution to rebind). */
  addresses: ResolvedAddress[];
}

const refuse = (message: string, details: Record<string, unknown> = {}): never => {
  throw new CairnError('E_INPUT', message, { field: 'url', ...details });
};

/** The URL's shape alone: http(s), a host, no credentials, no fragment. Nothing is resolved. */
export function parseWebhookUrl(raw: string): URL {
  if (raw.length > MAX_WEBHOOK_URL_LENGTH) refuse(`url: at most ${MAX_WEBHOOK_URL_LENGTH} characters`);
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return refuse('url: not an absolute URL');
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') refuse(`url: only http and https, not ${url.protocol}`);
  if (url.username !== '' || url.password !== '') refuse('url: no credentials in the URL (the signature authenticates Cairn)');
  if (url.hash !== '') refuse('url: no fragment');
  if (url.hostname === '') refuse('url: no host');
  return url;
}

/**
 * Checks a webhook URL against server-side request forgery: parses it, resolves its host (an IP
 * literal as itself) and refuses it (E_INPUT) when any address is loopback, private, link-local,
 * metadata or otherwise not public — unless `allowPrivate`, which lets loopback, private and
 * link-local through (never metadata). Run at registration and again before each attempt, whose
 * connection then goes to the addresses checked here (DNS rebinding finds nothing to rebind).
 */
export async function checkWebhookUrl(raw: string, options: { allowPrivate: boolean; resolve?: HostResolver }): Promise<CheckedUrl> {
  const url = parseWebhookUrl(raw);
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  let addresses: ResolvedAddress[];
  const family = isIP(host);
  if (family !== 0) {
    addresses = [{ address: host, family: family === 6 ? 6 : 4 }];
  } else {
    try {
      addresses = await (options.resolve ?? systemResolver)(host);
    } catch (error) {
      return refuse(`url: cannot resolve ${host}: ${error instanceof Error ? error.message : String(error)}`, { host });
    }
    if (addresses.length === 0) refuse(`url: ${host} resolves to no address`, { host });
  }
  for (const { address } of addresses) {
    if (!addressAllowed(address, options.allowPrivate)) {
      const cls = classifyAddress(address);
      refuse(
        `url: ${host} resolves to ${address}, a ${cls} address; webhooks go to public addresses only${cls === 'metadata' ? '' : ' (an operator may allow loopback and private ones: CAIRN_WEBHOOKS_ALLOW_PRIVATE=1)'}`,
        { host, address, class: cls },
      );
    }
  }
  return { url, addresses };
}
