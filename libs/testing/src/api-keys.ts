import type { ApiKeyScope } from '@cairn/contracts';

/*
 * Test keys made the way the product makes them (docs/adr/0011): through the gateway's REST routes
 * with an operator key (an admin key of tenant `default`, e.g. the bootstrap key), so every key a
 * test uses is recorded on its tenant's admin chain like any other.
 */

export interface ProvisionedKey {
  id: string;
  key: string;
  tenant: string;
}

export interface ProvisionKeyOptions {
  tenant: string;
  scopes: readonly ApiKeyScope[];
  expiresAt?: string;
}

async function call(baseUrl: string, key: string, method: string, path: string, body: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`${baseUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await response.text();
  let parsed: Record<string, unknown> = {};
  try {
    parsed = JSON.parse(text) as Record<string, unknown>;
  } catch {
    parsed = { text };
  }
  return { status: response.status, body: parsed };
}

/** Makes sure `tenant` exists (the operator creates it; one that exists is fine). */
export async function ensureTenant(baseUrl: string, operatorKey: string, tenant: string): Promise<void> {
  const created = await call(baseUrl, operatorKey, 'POST', '/v1/tenants', { id: tenant });
  if (created.status !== 201 && created.status !== 409) throw new Error(`POST /v1/tenants ${tenant}: HTTP ${created.status} ${JSON.stringify(created.body)}`);
}

/** A key of `tenant` with `scopes`, minted through POST /v1/keys (the tenant made first when it is new). */
export async function provisionKey(baseUrl: string, operatorKey: string, options: ProvisionKeyOptions): Promise<ProvisionedKey> {
  if (options.tenant !== 'default') await ensureTenant(baseUrl, operatorKey, options.tenant);
  const body = { scopes: options.scopes, tenant: options.tenant, ...(options.expiresAt === undefined ? {} : { expiresAt: options.expiresAt }) };
  const created = await call(baseUrl, operatorKey, 'POST', '/v1/keys', body);
  if (created.status !== 201 || typeof created.body.key !== 'string' || typeof created.body.id !== 'string') {
    throw new Error(`POST /v1/keys for ${options.tenant}: HTTP ${created.status} ${JSON.stringify(created.body)}`);
  }
  return { id: created.body.id, key: created.body.key, tenant: options.tenant };
}

/** Revokes a key through POST /v1/keys/:id/revoke. */
export async function revokeKey(baseUrl: string, adminKey: string, id: string): Promise<void> {
  const revoked = await call(baseUrl, adminKey, 'POST', `/v1/keys/${encodeURIComponent(id)}/revoke`, {});
  if (revoked.status !== 200) throw new Error(`POST /v1/keys/${id}/revoke: HTTP ${revoked.status} ${JSON.stringify(revoked.body)}`);
}
