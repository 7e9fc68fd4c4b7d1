/*
 * What an address is, for the egress proxy's "no DNS rebinding into the host" rule (PRODUCT.md,
 * "Egress"): pure parsing and range checks, no sockets.
 */

/**
 * `public`: anything routable on the internet. `private`: RFC 1918, CGNAT (100.64/10), IPv6 ULA
 * (fc00::/7) — reachable only when the operator allows it. Every other class is always refused:
 * `loopback`, `link_local` (169.254/16, fe80::/10), `metadata` (cloud instance-metadata addresses
 * outside link-local), `unspecified`, `multicast`, `reserved` (documentation, benchmarking,
 * broadcast, 240/4, …).
 */
export type AddressClass = 'public' | 'private' | 'loopback' | 'link_local' | 'metadata' | 'unspecified' | 'multicast' | 'reserved';

type Range = readonly [base: readonly number[], prefix: number, cls: AddressClass];

// Most specific first: the first range that holds an address decides its class.
const V4_RANGES: readonly Range[] = [
  [[100, 100, 100, 200], 32, 'metadata'], // Alibaba Cloud
  [[192, 0, 0, 192], 32, 'metadata'], // Oracle Cloud
  [[0, 0, 0, 0], 8, 'unspecified'],
  [[127, 0, 0, 0], 8, 'loopback'],
  [[169, 254, 0, 0], 16, 'link_local'], // 169.254.169.254 (AWS, GCP, Azure metadata) included
  [[10, 0, 0, 0], 8, 'private'],
  [[172, 16, 0, 0], 12, 'private'],
  [[192, 168, 0, 0], 16, 'private'],
  [[100, 64, 0, 0], 10, 'private'],
  [[192, 0, 0, 0], 24, 'reserved'],
  [[192, 0, 2, 0], 24, 'reserved'],
  [[198, 18, 0, 0], 15, 'reserved'],
  [[198, 51, 100, 0], 24, 'reserved'],
  [[203, 0, 113, 0], 24, 'reserved'],
  [[224, 0, 0, 0], 4, 'multicast'],
  [[240, 0, 0, 0], 4, 'reserved'], // and 255.255.255.255
];

const V6_RANGES: readonly Range[] = [
  [[0xfd, 0x00, 0x0e, 0xc2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, 0x54], 128, 'metadata'], // AWS fd00:ec2::254
  [[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], 128, 'unspecified'],
  [[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1], 128, 'loopback'],
  [[0xfe, 0x80], 10, 'link_local'],
  [[0xfc, 0x00], 7, 'private'],
  [[0xff, 0x00], 8, 'multicast'],
  [[0x20, 0x01, 0x0d, 0xb8], 32, 'reserved'],
  [[0x01, 0x00, 0, 0, 0, 0, 0, 0], 64, 'reserved'],
  [[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], 96, 'reserved'], // IPv4-compatible (deprecated)
];

/** The four bytes of a dotted-quad IPv4 address, or null. */
export function parseIpv4(text: string): number[] | null {
  const parts = text.split('.');
  if (parts.length !== 4) return null;
  const bytes: number[] = [];
  for (const part of parts) {
    if (!/^(0|[1-9][0-9]{0,2})$/.test(part)) return null;
    const value = Number(part);
    if (value > 255) return null;
    bytes.push(value);
  }
  return bytes;
}

/** The sixteen bytes of an IPv6 address (with `::` and an embedded dotted quad allowed), or null. */
export function parseIpv6(text: string): number[] | null {
  let address = text.replace(/%.*$/, ''); // a zone id does not change the address
  const lastColon = address.lastIndexOf(':');
  if (lastColon >= 0 && address.slice(lastColon + 1).includes('.')) {
    // An embedded dotted quad (`::ffff:10.0.0.1`) is the last two groups.
    const v4 = parseIpv4(address.slice(lastColon + 1));
    if (v4 === null) return null;
    const hex = (hi: number, lo: number) => ((hi << 8) | lo).toString(16);
    address = `${address.slice(0, lastColon + 1)}${hex(v4[0] ?? 0, v4[1] ?? 0)}:${hex(v4[2] ?? 0, v4[3] ?? 0)}`;
  }
  if (!/^[0-9a-fA-F:]+$/.test(address)) return null;
  const halves = address.split('::');
  if (halves.length > 2) return null;
  const groupsOf = (part: string): number[] | null => {
    if (part === '') return [];
    const out: number[] = [];
    for (const group of part.split(':')) {
      if (!/^[0-9a-fA-F]{1,4}$/.test(group)) return null;
      out.push(parseInt(group, 16));
    }
    return out;
  };
  let groups: number[];
  if (halves.length === 2) {
    const left = groupsOf(halves[0] ?? '');
    const right = groupsOf(halves[1] ?? '');
    if (left === null || right === null || left.length + right.length > 7) return null;
    groups = [...left, ...Array<number>(8 - left.length - right.length).fill(0), ...right];
  } else {
    const all = groupsOf(address);
    if (all === null || all.length !== 8) return null;
    groups = all;
  }
  return groups.flatMap((g) => [g >> 8, g & 0xff]);
}

function within(bytes: readonly number[], base: readonly number[], prefix: number): boolean {
  for (let bit = 0; bit < prefix; bit += 8) {
    const take = Math.min(8, prefix - bit);
    const mask = (0xff << (8 - take)) & 0xff;
    if (((bytes[bit / 8] ?? 0) & mask) !== ((base[bit / 8] ?? 0) & mask)) return false;
  }
  return true;
}

function classifyV4(bytes: readonly number[]): AddressClass {
  return V4_RANGES.find(([base, prefix]) => within(bytes, base, prefix))?.[2] ?? 'public';
}

/** The class of an IP address; null when `text` is not one. IPv4-mapped, NAT64 and 6to4 addresses are judged by the IPv4 address inside. */
export function classifyAddress(text: string): AddressClass | null {
  const v4 = parseIpv4(text);
  if (v4 !== null) return classifyV4(v4);
  const v6 = parseIpv6(text);
  if (v6 === null) return null;
  const mapped = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff];
  if (within(v6, mapped, 96)) return classifyV4(v6.slice(12));
  if (within(v6, [0x00, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0], 96)) return classifyV4(v6.slice(12));
  if (within(v6, [0x20, 0x02], 16)) return classifyV4(v6.slice(2, 6));
  return V6_RANGES.find(([base, prefix]) => within(v6, base, prefix))?.[2] ?? 'public';
}

/** Whether the proxy may connect to an address of this class. */
export function addressAllowed(cls: AddressClass, allowPrivate: boolean): boolean {
  return cls === 'public' || (cls === 'private' && allowPrivate);
}

/** `172.18.0.0/16` → a test for addresses inside it (IPv4 only; an IPv4-mapped IPv6 address counts). */
export function subnetContains(cidr: string): (address: string) => boolean {
  const [base, bits] = cidr.split('/');
  const net = base === undefined ? null : parseIpv4(base);
  const prefix = Number(bits);
  if (net === null || !Number.isInteger(prefix) || prefix < 0 || prefix > 32) throw new RangeError(`not an IPv4 subnet: ${cidr}`);
  return (address) => {
    const v4 = parseIpv4(address.replace(/^::ffff:/i, ''));
    return v4 !== null && within(v4, net, prefix);
  };
}

/** The canonical text of an IP address (so `::FFFF:10.0.0.1` and `0:0::ffff:a00:1` compare equal); null when not one. */
export function canonicalAddress(text: string): string | null {
  const v4 = parseIpv4(text);
  if (v4 !== null) return v4.join('.');
  const v6 = parseIpv6(text);
  if (v6 === null) return null;
  if (within(v6, [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff], 96)) return v6.slice(12).join('.');
  const groups: string[] = [];
  for (let i = 0; i < 16; i += 2) groups.push((((v6[i] ?? 0) << 8) | (v6[i + 1] ?? 0)).toString(16));
  return groups.join(':');
}
