import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { hasScope } from '@cairn/contracts';
import { API_KEY_PATTERN, apiKeyLastFour, apiKeyPrefix, apiKeySha256, bearerToken, generateApiKey, generateApiKeyFor, sameDigest } from './api-key.codec.js';

describe('API keys', () => {
  it('are cairn_<8-char prefix>_<43-char secret> with 256 random bits of secret', () => {
    const { key, prefix } = generateApiKey();
    expect(key).toMatch(API_KEY_PATTERN);
    expect(key.startsWith(`cairn_${prefix}_`)).toBe(true);
    expect(prefix).toMatch(/^[a-z2-7]{8}$/);
    const secret = key.slice(`cairn_${prefix}_`.length);
    expect(Buffer.from(secret, 'base64url')).toHaveLength(32);
  });

  it('draw prefix and secret from the random source', () => {
    const source = (size: number) => Buffer.alloc(size, size === 8 ? 0x21 : 0xff);
    const { key, prefix } = generateApiKey(source);
    expect(prefix).toBe('bbbbbbbb');
    expect(key).toBe(`cairn_bbbbbbbb_${Buffer.alloc(32, 0xff).toString('base64url')}`);
  });

  it('never repeat', () => {
    const keys = new Set(Array.from({ length: 200 }, () => generateApiKey().key));
    expect(keys.size).toBe(200);
  });

  it('keep their prefix across a rotation: a new secret behind the same public part', () => {
    const { key, prefix } = generateApiKey();
    const rotated = generateApiKeyFor(prefix);
    expect(rotated.prefix).toBe(prefix);
    expect(rotated.key).toMatch(API_KEY_PATTERN);
    expect(rotated.key).not.toBe(key);
    expect(apiKeyPrefix(rotated.key)).toBe(prefix);
    expect(() => generateApiKeyFor('UPPER123')).toThrow();
    expect(apiKeyLastFour(rotated.key)).toBe(rotated.key.slice(-4));
  });

  it('are found by their prefix; anything else has none', () => {
    const { key, prefix } = generateApiKey();
    expect(apiKeyPrefix(key)).toBe(prefix);
    for (const bad of ['', 'cairn_', `cairn_${prefix}`, `cairn_ABCDEFGH_${'a'.repeat(43)}`, `cairn_${prefix}_${'a'.repeat(42)}`, `${key} `, `x${key}`, `cairn_${'a'.repeat(43)}`]) {
      expect(apiKeyPrefix(bad)).toBeNull();
    }
  });

  it('are stored as the SHA-256 of the whole key and compared as digests', () => {
    const { key } = generateApiKey();
    const digest = apiKeySha256(key);
    expect(digest).toBe(createHash('sha256').update(key).digest('hex'));
    expect(sameDigest(digest, apiKeySha256(key))).toBe(true);
    expect(sameDigest(digest, apiKeySha256(`${key}x`))).toBe(false);
    expect(sameDigest(digest, 'abc')).toBe(false);
    expect(sameDigest('', '')).toBe(false);
  });

  it('grant exactly their scopes, and admin grants every scope', () => {
    expect(hasScope(['runs:read'], 'runs:read')).toBe(true);
    expect(hasScope(['runs:read'], 'runs:write')).toBe(false);
    expect(hasScope(['runs:write'], 'runs:read')).toBe(false);
    expect(hasScope(['admin'], 'runs:write')).toBe(true);
    expect(hasScope(['admin'], 'approve')).toBe(true);
    expect(hasScope([], 'runs:read')).toBe(false);
  });

  it('come from an Authorization: Bearer header only', () => {
    expect(bearerToken('Bearer abc')).toBe('abc');
    expect(bearerToken('bearer  abc ')).toBe('abc');
    expect(bearerToken('Basic abc')).toBeNull();
    expect(bearerToken('Bearer')).toBeNull();
    expect(bearerToken('Bearer a b')).toBeNull();
    expect(bearerToken(undefined)).toBeNull();
    expect(bearerToken(['Bearer abc'])).toBeNull();
  });
});
