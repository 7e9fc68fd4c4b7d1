import { describe, expect, it } from 'vitest';
import { isOperator, keyStatus, keyView } from './key-admin.service.js';
import type { KeyRow } from './key-admin.repository.js';

const NOW = new Date('2026-06-01T00:00:00.000Z');

function row(overrides: Partial<KeyRow> = {}): KeyRow {
  return {
    id: 'k1',
    tenant: 'acme',
    prefix: 'abcdefgh',
    last_four: 'wxyz',
    scopes: ['runs:read'],
    created_at: new Date('2026-05-01T00:00:00.000Z'),
    created_by: 'key:op',
    expires_at: null,
    revoked_at: null,
    revoked_by: null,
    issued_at: new Date('2026-05-01T00:00:00.000Z'),
    rotations: 0,
    rotated_at: null,
    previous_valid_until: null,
    next_sha256: null,
    unrecorded: null,
    request_sha256: null,
    ...overrides,
  };
}

describe('key administration', () => {
  it('names a key active, pending (its creation not on the chain), expired or revoked — revoked first', () => {
    expect(keyStatus(row(), NOW)).toBe('active');
    expect(keyStatus(row({ issued_at: null }), NOW)).toBe('pending');
    expect(keyStatus(row({ expires_at: NOW }), NOW)).toBe('expired');
    expect(keyStatus(row({ expires_at: new Date(NOW.getTime() + 1) }), NOW)).toBe('active');
    expect(keyStatus(row({ revoked_at: NOW, issued_at: null, expires_at: NOW }), NOW)).toBe('revoked');
  });

  it('shows a grace only while it lasts, and never more than the key view', () => {
    const graced = keyView(row({ previous_valid_until: new Date(NOW.getTime() + 60_000) }), NOW);
    expect(graced.previousValidUntil).toBe('2026-06-01T00:01:00.000Z');
    expect(keyView(row({ previous_valid_until: NOW }), NOW).previousValidUntil).toBeNull();
    expect(Object.keys(graced).sort()).toEqual(
      ['createdAt', 'createdBy', 'expiresAt', 'id', 'lastFour', 'prefix', 'previousValidUntil', 'revokedAt', 'rotatedAt', 'rotations', 'scopes', 'status', 'tenant'].sort(),
    );
  });

  it('takes the operator to be an admin key of tenant default, and nobody else', () => {
    expect(isOperator({ keyId: 'a', tenant: 'default', scopes: ['admin'] })).toBe(true);
    expect(isOperator({ keyId: 'a', tenant: 'default', scopes: ['runs:read', 'runs:write', 'approve'] })).toBe(false);
    expect(isOperator({ keyId: 'a', tenant: 'acme', scopes: ['admin'] })).toBe(false);
  });
});
