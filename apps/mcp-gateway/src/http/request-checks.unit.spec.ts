import { describe, expect, it } from 'vitest';
import { DEFAULT_ALLOWED_HOSTS } from '../mcp-gateway.config.js';
import { bearerKey, hostNameOf, keyDigest, refuseHostOrOrigin, sameKey } from './request-checks.js';

const POLICY = { allowedHosts: [...DEFAULT_ALLOWED_HOSTS], allowedOrigins: ['https://agent.example'] };
const KEY = `cairn_abcdefgh_${'A'.repeat(43)}`;

describe('Host and Origin (DNS-rebinding protection)', () => {
  it('reads the host name of a Host header without its port, IPv6 in brackets', () => {
    expect(hostNameOf('127.0.0.1:7421')).toBe('127.0.0.1');
    expect(hostNameOf('LocalHost')).toBe('localhost');
    expect(hostNameOf('[::1]:80')).toBe('[::1]');
    expect(hostNameOf('evil.example.com:7421')).toBe('evil.example.com');
    expect(hostNameOf('a b')).toBeNull();
    expect(hostNameOf('')).toBeNull();
    expect(hostNameOf(undefined)).toBeNull();
  });

  it('lets loopback hosts through, with no Origin or a loopback Origin on any port', () => {
    expect(refuseHostOrOrigin({ host: '127.0.0.1:7421' }, POLICY)).toBeNull();
    expect(refuseHostOrOrigin({ host: 'localhost:1', origin: 'http://localhost:5173' }, POLICY)).toBeNull();
    expect(refuseHostOrOrigin({ host: '[::1]:7421', origin: 'https://127.0.0.1' }, POLICY)).toBeNull();
    expect(refuseHostOrOrigin({ host: 'localhost', origin: 'https://agent.example' }, POLICY)).toBeNull();
  });

  it('refuses another Host, a missing Host, and a foreign, opaque or odd Origin', () => {
    expect(refuseHostOrOrigin({ host: 'evil.example.com:7421' }, POLICY)).toMatch(/Host/);
    expect(refuseHostOrOrigin({ host: 'localhost.evil.example.com' }, POLICY)).toMatch(/Host/);
    expect(refuseHostOrOrigin({}, POLICY)).toMatch(/Host/);
    expect(refuseHostOrOrigin({ host: '127.0.0.1', origin: 'http://evil.example.com' }, POLICY)).toMatch(/Origin/);
    expect(refuseHostOrOrigin({ host: '127.0.0.1', origin: 'null' }, POLICY)).toMatch(/Origin/);
    expect(refuseHostOrOrigin({ host: '127.0.0.1', origin: 'file://localhost' }, POLICY)).toMatch(/Origin/);
    expect(refuseHostOrOrigin({ host: '127.0.0.1', origin: 'http://localhost/path' }, POLICY)).toMatch(/Origin/);
  });
});

describe('the Bearer key', () => {
  it("takes only a key in Cairn's form", () => {
    expect(bearerKey(`Bearer ${KEY}`)).toBe(KEY);
    expect(bearerKey(`bearer ${KEY}`)).toBe(KEY);
    expect(bearerKey(KEY)).toBeNull();
    expect(bearerKey('Bearer nope')).toBeNull();
    expect(bearerKey(`Basic ${KEY}`)).toBeNull();
    expect(bearerKey(undefined)).toBeNull();
  });

  it('binds sessions by digest: the same key matches, another does not', () => {
    expect(sameKey(keyDigest(KEY), keyDigest(KEY))).toBe(true);
    expect(sameKey(keyDigest(KEY), keyDigest(KEY.replace('abcdefgh', 'abcdefgi')))).toBe(false);
  });
});
