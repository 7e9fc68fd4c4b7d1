import { describe, expect, it } from 'vitest';
import { parseEvidenceReceipt } from './evidence-event.schema.js';
import { holdsGrant, mayUseSecret, SecretGranteeSchema, SubmitterPrincipalSchema } from './principal.schema.js';

const KEY = '0f1e2d3c-4b5a-4978-8a6b-5c4d3e2f1a0b';
const sha = (c: string) => c.repeat(64);

function submitted(extra: Record<string, unknown>) {
  return {
    v: 1,
    seq: 1,
    run_id: 'run_01j9zc5v2k8q4w6y7t3n0m1p2r',
    tenant: 'acme',
    type: 'run.submitted',
    actor: 'intake',
    ts: '2026-01-01T00:00:00.000Z',
    causation: null,
    spec: { name: 'uses-a-secret', steps: [{ argv: ['true'] }], secrets: ['TOKEN'] },
    spec_sha256: sha('a'),
    submitted_by: `key:${KEY}`,
    idempotency_key_sha256: sha('b'),
    prev_hash: sha('0'),
    hash: sha('1'),
    ...extra,
  };
}

describe('the submitting principal', () => {
  it('is a key id and its scopes, each once, and nothing else', () => {
    expect(SubmitterPrincipalSchema.safeParse({ key_id: KEY, scopes: ['runs:write', 'secrets:use'] }).success).toBe(true);
    expect(SubmitterPrincipalSchema.safeParse({ key_id: KEY, scopes: [] }).success).toBe(true);
    for (const bad of [
      { key_id: KEY, scopes: ['runs:write', 'runs:write'] },
      { key_id: KEY, scopes: ['root'] },
      { key_id: 'key with spaces', scopes: [] },
      { key_id: KEY, scopes: [], key: 'cairn_abcdefgh_x' },
      { scopes: ['admin'] },
    ]) {
      expect(SubmitterPrincipalSchema.safeParse(bad).success, JSON.stringify(bad)).toBe(false);
    }
  });

  it('is optional on run.submitted, so receipts from before it still read; a malformed one breaks the contract', () => {
    expect(parseEvidenceReceipt(submitted({})).ok).toBe(true);
    expect(parseEvidenceReceipt(submitted({ principal: { key_id: KEY, scopes: ['runs:write'] } })).ok).toBe(true);
    expect(parseEvidenceReceipt(submitted({ principal: { key_id: KEY, scopes: ['everything'] } })).ok).toBe(false);
  });
});

describe('secret grants', () => {
  it('name one key or one scope', () => {
    for (const good of [`key:${KEY}`, 'scope:secrets:use', 'scope:runs:write', 'scope:admin']) expect(SecretGranteeSchema.safeParse(good).success, good).toBe(true);
    for (const bad of ['key:', 'scope:root', 'tenant:acme', KEY, `key:${KEY} `, 'scope:secrets:use,runs:write']) expect(SecretGranteeSchema.safeParse(bad).success, bad).toBe(false);
  });

  it('need secrets:use and a grant (by key or by scope); admin holds both', () => {
    const user = (scopes: string[]) => ({ key_id: KEY, scopes }) as Parameters<typeof mayUseSecret>[0];
    expect(mayUseSecret(user(['runs:write', 'secrets:use']), [`key:${KEY}`])).toBe(true);
    expect(mayUseSecret(user(['runs:write', 'secrets:use']), ['scope:runs:write'])).toBe(true);
    expect(mayUseSecret(user(['runs:write', 'secrets:use']), ['key:someone-else', 'scope:approve'])).toBe(false);
    expect(mayUseSecret(user(['runs:write']), [`key:${KEY}`])).toBe(false);
    expect(mayUseSecret(user(['admin']), [])).toBe(true);
    expect(mayUseSecret(null, ['scope:runs:write'])).toBe(false);
    expect(mayUseSecret(undefined, [`key:${KEY}`])).toBe(false);
  });

  it('may be passed on by whoever holds one, without secrets:use (the key that set a secret)', () => {
    expect(holdsGrant({ key_id: KEY, scopes: ['secrets:write'] }, [`key:${KEY}`])).toBe(true);
    expect(holdsGrant({ key_id: KEY, scopes: ['secrets:write'] }, ['key:other'])).toBe(false);
    expect(holdsGrant({ key_id: KEY, scopes: ['admin'] }, [])).toBe(true);
  });
});
