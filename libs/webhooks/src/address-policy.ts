import { isIP } from 'node:net';

/*
 * Where a webhook may be sent (server-side request forgery). Only public unicast addresses pass
 * by default. Loopback, private and link-local addresses pass only when the operator allows them
 * (CAIRN_WEBHOOKS_ALLOW_PRIVATE=1, e.g. a receiver on the same host); cloud metadata endpoints,
 * unspecified, multicast, broadcast and reserved/documentation ranges never do.
 */

export type AddressClass = 'public' | 'loopback' | 'private' | 'link-local' | 'metadata' | 'unspecified' | 'multicast' | 'reserved';

/** The classes `allowPrivate` lets through; everything else but `public` is always refused. */
export const PRIVATE_CLASSES: ReadonlySet<AddressClass> = new Set(['loopback', 'private', 'link-local']);

type Range = readonly [prefix: string, bits: number, cls: AddressClass];

// Order matters: the first range that holds the address names its class (metadata before link-local).
const V4_RANGES: readonly Range[] = [
  ['169.254.169.254', 32, 'metadata'], // AWS, GCP, Azure, OpenStack, DigitalOcean…
  ['169.254.170.2', 32, 'metadata'], // AWS ECS task metadata
  ['100.100.100.200', 32, 'metadata'], // Alibaba Cloud
  ['0.0.0.0', 8, 'unspecified'],
  ['127.0.0.0', 8, 'loopback'],
  ['10.0.0.0', 8, 'private'],
  ['172.16.0.0', 12, 'private'],
  ['192.168.0.0', 16, 'private'],
  ['100.64.0.0', 10, 'private'], // carrier-grade NAT
  ['169.254.0.0', 16, 'link-local'],
  ['192.0.0.0', 24, 'reserved'],
  ['192.0.2.0', 24, 'reserved'],
  ['198.18.0.0', 15, 'reserved'],
  ['198.51.100.0', 24, 'reserved'],
  ['203.0.113.0', 24, 'reserved'],
  ['224.0.0.0', 4, 'multicast'],
  ['240.0.0.0', 4, 'reserved'], // and 255.255.255.255
];

const V6_RANGES: readonly Range[] = [
  ['fd00:ec2::254', 128, 'metadata'], // AWS over IPv6
  ['::', 128, 'unspecified'],
  ['::1', 128, 'loopback'],
  ['fc00::', 7, 'private'],
  ['fe80::', 10, 'link-local'],
  ['fec0::', 10, 'private'], // deprecated site-local
  ['ff00::', 8, 'multicast'],
  ['2001:db8::', 32, 'reserved'],
  ['100::', 64, 'reserved'],
  ['::', 96, 'reserved'], // IPv4-compatible (deprecated); ::ffff:0:0/96 is handled before
];

function v4Bytes(address: string): number[] {
  return address.split('.').map(Number);
}

/** The 16 bytes of an IPv6 address (a zone id, `%eth0`, is dropped). */
function v6Bytes(address: string): number[] {
  let text = address.split('%')[0]!.toLowerCase();
  let tail: number[] = [];
  const lastColon = text.lastIndexOf(':');
  if (text.slice(lastColon + 1).includes('.')) {
    const v4 = v4Bytes(text.slice(lastColon + 1));
    tail = [(v4[0]! << 8) | v4[1]!, (v4[2]! << 8) | v4[3]!];
    text = `${text.slice(0, lastColon + 1)}0:0`;
  }
  const [head = '', rest] = text.split('::');
  const parse = (part: string) => (part === '' ? [] : part.split(':').map((h) => parseInt(h, 16)));
  const front = parse(head);
  const back = rest === undefined ? [] : parse(rest);
  const words = rest === undefined ? front : [...front, ...new Array<number>(8 - front.length - back.length).fill(0), ...back];
  if (tail.length === 2) words.splice(6, 2, ...tail);
  return words.flatMap((w) => [w >> 8, w & 0xff]);
}

function inRange(bytes: readonly number[], prefix: readonly number[], bits: number): boolean {
  for (let bit = 0; bit < bits; bit += 8) {
    const take = Math.min(8, bits - bit);
    const mask = (0xff << (8 - take)) & 0xff;
    const i = bit / 8;
    if ((bytes[i]! & mask) !== (prefix[i]! & mask)) return false;
  }
  return true;
}

function classifyV4(bytes: readonly number[]): AddressClass {
  for (const [prefix, bits, cls] of V4_RANGES) if (inRange(bytes, v4Bytes(prefix), bits)) return cls;
  return 'public';
}

/** The class of an IP address literal; throws a TypeError for anything that is not one. */
export function classifyAddress(address: string): AddressClass {
  const family = isIP(address.split('%')[0]!);
  if (family === 4) return classifyV4(v4Bytes(address));
  if (family !== 6) throw new TypeError(`not an IP address: ${address}`);
  const bytes = v6Bytes(address);
  // An IPv4 address in IPv6 clothing is judged as the IPv4 address it reaches.
  if (inRange(bytes, v6Bytes('::ffff:0:0'), 96)) return classifyV4(bytes.slice(12));
  if (inRange(bytes, v6Bytes('64:ff9b::'), 96)) return classifyV4(bytes.slice(12));
  if (inRange(bytes, v6Bytes('2002::'), 16)) return classifyV4(bytes.slice(2, 6));
  for (const [prefix, bits, cls] of V6_RANGES) if (inRange(bytes, v6Bytes(prefix), bits)) return cls;
  return 'public';
}

/** Whether a webhook may connect to `address` under the operator's setting. */
export function addressAllowed(address: string, allowPrivate: boolean): boolean {
  const cls = classifyAddress(address);
  return cls === 'public' || (allowPrivate && PRIVATE_CLASSES.has(cls));
}
