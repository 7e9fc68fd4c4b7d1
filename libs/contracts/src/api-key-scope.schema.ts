import { z } from 'zod';

/*
 * What an API key may do (PRODUCT.md "Interfaces": bearer keys with scopes, per tenant).
 * `runs:read` reads runs and sandboxes; `runs:write` submits and changes them; `approve` decides
 * held runs; `secrets:write` sets, lists (last four characters) and removes the tenant's secrets;
 * `secrets:use` lets a run or sandbox the key starts use a secret granted to it; `metrics:read`
 * scrapes `/metrics` (a Prometheus key that can read nothing else); `admin` holds every scope.
 */
export const API_KEY_SCOPES = ['runs:read', 'runs:write', 'approve', 'secrets:write', 'secrets:use', 'metrics:read', 'admin'] as const;
export const ApiKeyScopeSchema = z.enum(API_KEY_SCOPES);
export type ApiKeyScope = z.infer<typeof ApiKeyScopeSchema>;

/** `admin` holds every scope; otherwise a key holds exactly the scopes it was given. */
export function hasScope(granted: readonly ApiKeyScope[], needed: ApiKeyScope): boolean {
  return granted.includes('admin') || granted.includes(needed);
}
