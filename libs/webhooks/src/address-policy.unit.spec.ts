import { describe, expect, it } from 'vitest';
import { addressAllowed, classifyAddress } from './address-policy.js';

describe('classifyAddress', () => {
  it.each([
    ['93.184.215.14', 'public'],
    ['8.8.8.8', 'public'],
    ['127.0.0.1', 'loopback'],
    ['127.255.0.9', 'loopback'],
    ['10.1.2.3', 'private'],
    ['172.16.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['172.32.0.1', 'public'],
    ['192.168.1.1', 'private'],
    ['100.64.0.1', 'private'],
    ['169.254.169.254', 'metadata'],
    ['169.254.170.2', 'metadata'],
    ['100.100.100.200', 'metadata'],
    ['169.254.1.1', 'link-local'],
    ['0.0.0.0', 'unspecified'],
    ['224.0.0.1', 'multicast'],
    ['255.255.255.255', 'reserved'],
    ['192.0.2.10', 'reserved'],
    ['2606:2800:220:1:248:1893:25c8:1946', 'public'],
    ['::1', 'loopback'],
    ['::', 'unspecified'],
    ['fd12:3456::1', 'private'],
    ['fe80::1', 'link-local'],
    ['fe80::1%eth0', 'link-local'],
    ['fd00:ec2::254', 'metadata'],
    ['ff02::1', 'multicast'],
    ['2001:db8::1', 'reserved'],
    // IPv4 in IPv6 clothing is judged as the IPv4 address it reaches.
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:7f00:1', 'loopback'],
    ['::ffff:169.254.169.254', 'metadata'],
    ['::ffff:8.8.8.8', 'public'],
    ['64:ff9b::a9fe:a9fe', 'metadata'],
    ['2002:0a00:0001::1', 'private'],
    ['::127.0.0.1', 'reserved'],
  ])('%s is %s', (address, cls) => {
    expect(classifyAddress(address)).toBe(cls);
  });

  it('refuses what is not an IP address', () => {
    expect(() => classifyAddress('localhost')).toThrow(TypeError);
    expect(() => classifyAddress('1.2.3')).toThrow(TypeError);
  });
});

describe('addressAllowed', () => {
  it('lets only public addresses through by default', () => {
    expect(addressAllowed('8.8.8.8', false)).toBe(true);
    for (const address of ['127.0.0.1', '10.0.0.1', '169.254.1.1', '::1', '169.254.169.254']) expect(addressAllowed(address, false)).toBe(false);
  });

  it('with private allowed, lets loopback, private and link-local through, never metadata or unspecified', () => {
    for (const address of ['127.0.0.1', '10.0.0.1', '169.254.1.1', '::1', 'fd00::1']) expect(addressAllowed(address, true)).toBe(true);
    for (const address of ['169.254.169.254', 'fd00:ec2::254', '0.0.0.0', '::', '224.0.0.1']) expect(addressAllowed(address, true)).toBe(false);
  });
});
