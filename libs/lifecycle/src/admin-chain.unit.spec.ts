import type { ReceiptEnvelope } from '@cairn/contracts';
import { describe, expect, it } from 'vitest';
import { decideAdmin, foldAdminChain } from './admin-chain.js';
import type { AdminCommand, AdminDecision } from './admin-chain.js';
import { RunChain } from './run-chain.fixture.js';

const BY = 'key:operator';
const CREATE_KEY: AdminCommand = { kind: 'key_create', by: BY, keyId: 'k1', prefix: 'abcdefgh', scopes: ['runs:read'], expiresAt: null };

/** Given the receipts `decide` appended so far, when `command` comes: what is decided, and the chain after it. */
function given(chain: RunChain, command: AdminCommand): AdminDecision {
  const decision = decideAdmin(foldAdminChain(chain.tenant, chain.receipts), command);
  if (decision.kind === 'append') chain.add(decision.type, { ...decision.fields, causation: decision.causation });
  return decision;
}

function tenantChain(): RunChain {
  const chain = new RunChain('adm_acme', 'acme');
  given(chain, { kind: 'tenant_create', by: BY });
  return chain;
}

describe('the admin chain', () => {
  it('starts with admin.tenant_created; creating the tenant again is a duplicate', () => {
    const chain = new RunChain('adm_acme', 'acme');
    expect(given(chain, { kind: 'tenant_create', by: BY })).toEqual({ kind: 'append', type: 'admin.tenant_created', causation: null, fields: { created_by: BY } });
    expect(given(chain, { kind: 'tenant_create', by: 'key:other' })).toEqual({ kind: 'duplicate' });
    const view = foldAdminChain('acme', chain.receipts);
    expect(view).toMatchObject({ createdEvent: 'adm_acme:1', headSeq: 1, anomalies: [] });
  });

  it('holds no key of a tenant that was never created', () => {
    const chain = new RunChain('adm_acme', 'acme');
    expect(given(chain, CREATE_KEY)).toMatchObject({ kind: 'refuse', code: 'E_NOT_FOUND' });
    expect(chain.receipts).toHaveLength(0);
  });

  it('creates a key once, caused by the tenant; the same key again is a duplicate, other grants a conflict', () => {
    const chain = tenantChain();
    expect(given(chain, CREATE_KEY)).toMatchObject({ kind: 'append', type: 'admin.key_created', causation: 'adm_acme:1', key: 'k1' });
    expect(given(chain, CREATE_KEY)).toEqual({ kind: 'duplicate' });
    expect(given(chain, { ...CREATE_KEY, scopes: ['admin'] })).toMatchObject({ kind: 'refuse', code: 'E_CONFLICT' });
    const key = foldAdminChain('acme', chain.receipts).keys.get('k1');
    expect(key).toMatchObject({ prefix: 'abcdefgh', scopes: ['runs:read'], rotations: 0, revokedAt: null, createdBy: BY, createdEvent: 'adm_acme:2' });
  });

  it('rotates a key in order: the same rotation again is a duplicate, a skipped one a conflict', () => {
    const chain = tenantChain();
    given(chain, CREATE_KEY);
    const rotate = (rotation: number, keyId = 'k1'): AdminCommand => ({ kind: 'key_rotate', by: BY, keyId, rotation, graceUntil: null });
    expect(given(chain, rotate(1))).toMatchObject({ kind: 'append', type: 'admin.key_rotated', causation: 'adm_acme:2', key: '1' });
    expect(given(chain, rotate(1))).toEqual({ kind: 'duplicate' });
    expect(given(chain, rotate(3))).toMatchObject({ kind: 'refuse', code: 'E_CONFLICT' });
    expect(given(chain, rotate(2))).toMatchObject({ kind: 'append', key: '2' });
    expect(given(chain, rotate(1, 'nope'))).toMatchObject({ kind: 'refuse', code: 'E_NOT_FOUND' });
    expect(foldAdminChain('acme', chain.receipts as ReceiptEnvelope[]).keys.get('k1')?.rotations).toBe(2);
  });

  it('revokes a key once; a revoked key takes no rotation', () => {
    const chain = tenantChain();
    given(chain, CREATE_KEY);
    const revoke: AdminCommand = { kind: 'key_revoke', by: BY, keyId: 'k1', reason: 'left' };
    expect(given(chain, revoke)).toMatchObject({ kind: 'append', type: 'admin.key_revoked', fields: { key_id: 'k1', revoked_by: BY, reason: 'left' } });
    expect(given(chain, revoke)).toEqual({ kind: 'duplicate' });
    expect(given(chain, { kind: 'key_rotate', by: BY, keyId: 'k1', rotation: 1, graceUntil: null })).toMatchObject({ kind: 'refuse', code: 'E_CONFLICT' });
    expect(foldAdminChain('acme', chain.receipts as ReceiptEnvelope[]).keys.get('k1')?.revokedAt).not.toBeNull();
  });

  it('notes receipts that do not belong on an admin chain, and acts on none of them', () => {
    const chain = tenantChain();
    chain.add('admin.key_rotated', { key_id: 'ghost', rotation: 1, grace_until: null, rotated_by: BY });
    chain.add('admin.key_created', { key_id: 'k2', prefix: 'abcdefgh', scopes: ['runs:read'], expires_at: null, created_by: BY, tenant: 'other' });
    const view = foldAdminChain('acme', chain.receipts);
    expect(view.anomalies).toHaveLength(2);
    expect(view.keys.size).toBe(0);
    expect(view.headSeq).toBe(3);
  });
});
