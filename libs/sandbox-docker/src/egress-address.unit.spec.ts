import { describe, expect, it } from 'vitest';
import { addressAllowed, canonicalAddress, classifyAddress, parseIpv6, subnetContains } from './egress-address.js';

describe('classifyAddress', () => {
  it.each([
    ['93.184.216.34', 'public'],
    ['8.8.8.8', 'public'],
    ['127.0.0.1', 'loopback'],
    ['127.255.0.9', 'loopback'],
    ['0.0.0.0', 'unspecified'],
    ['10.1.2.3', 'private'],
    ['172.16.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['172.32.0.1', 'public'],
    ['192.168.1.1', 'private'],
    ['100.64.0.1', 'private'],
    ['100.100.100.200', 'metadata'],
    ['169.254.169.254', 'link_local'],
    ['169.254.0.1', 'link_local'],
    ['224.0.0.1', 'multicast'],
    ['255.255.255.255', 'reserved'],
    ['192.0.2.7', 'reserved'],
    ['198.18.0.1', 'reserved'],
    ['::1', 'loopback'],
    ['::', 'unspecified'],
    ['fe80::1', 'link_local'],
    ['fd00::1', 'private'],
    ['fd00:ec2::254', 'metadata'],
    ['ff02::1', 'multicast'],
    ['2001:db8::1', 'reserved'],
    ['2606:2800:220:1:248:1893:25c8:1946', 'public'],
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:7f00:1', 'loopback'],
    ['::ffff:169.254.169.254', 'link_local'],
    ['64:ff9b::10.0.0.1', 'private'],
    ['2002:7f00:1::', 'loopback'],
    ['::127.0.0.1', 'reserved'],
  ])('given %s, when classified, then it is %s', (address, expected) => {
    expect(classifyAddress(address)).toBe(expected);
  });

  it.each(['', 'localhost', '1.2.3', '1.2.3.4.5', '256.1.1.1', '01.2.3.4', '1:2:3:4:5:6:7:8:9', ':::1', '1::2::3', 'g::1'])('given %j, when classified, then it is not an address', (text) => {
    expect(classifyAddress(text)).toBeNull();
  });

  it('given each class, when judged, then only public passes — and private only when the operator allows it', () => {
    expect(addressAllowed('public', false)).toBe(true);
    expect(addressAllowed('private', false)).toBe(false);
    expect(addressAllowed('private', true)).toBe(true);
    for (const cls of ['loopback', 'link_local', 'metadata', 'unspecified', 'multicast', 'reserved'] as const) expect(addressAllowed(cls, true)).toBe(false);
  });
});

describe('parsing and comparing addresses', () => {
  it('given IPv6 spellings of one address, when canonicalised, then they are equal', () => {
    expect(canonicalAddress('::FFFF:10.0.0.1')).toBe('10.0.0.1');
    expect(canonicalAddress('0:0:0:0:0:ffff:a00:1')).toBe('10.0.0.1');
    expect(canonicalAddress('fe80:0::1')).toBe(canonicalAddress('FE80::0:1'));
    expect(canonicalAddress('fe80::1%eth0')).toBe('fe80:0:0:0:0:0:0:1');
    expect(parseIpv6('1:2:3:4:5:6:7:8')).toEqual([0, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0, 7, 0, 8]);
  });

  it('given a subnet, when addresses are checked, then only those inside it are', () => {
    const inside = subnetContains('172.18.0.0/16');
    expect(inside('172.18.0.2')).toBe(true);
    expect(inside('::ffff:172.18.255.254')).toBe(true);
    expect(inside('172.19.0.2')).toBe(false);
    expect(inside('127.0.0.1')).toBe(false);
    expect(inside('')).toBe(false);
    expect(() => subnetContains('172.18.0.0/33')).toThrow(RangeError);
  });
});
