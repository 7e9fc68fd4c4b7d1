import { z } from 'zod';
import { API_KEY_SCOPES, ApiKeyScopeSchema } from './api-key-scope.schema.js';

/*
 * Who submitted a run or asked for a sandbox, as far as policy needs to know (docs/adr/0011): the
 * key's id and the scopes it held when the gateway verified it. Never the key itself, nor anything
 * secret: both are already visible to anyone who may read the chain (`submitted_by: key:<id>`).
 */

/** An API key's id as an actor names it (`key:<id>`). */
export const KeyIdSchema = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'a key id is [A-Za-z0-9_-], at most 64 characters');

/** The submitting key on `run.submitted` / `sandbox.requested` (snake_case, like every receipt field). */
export const SubmitterPrincipalSchema = z.strictObject({
  key_id: KeyIdSchema,
  scopes: z
    .array(ApiKeyScopeSchema)
    .max(API_KEY_SCOPES.length)
    .refine((scopes) => new Set(scopes).size === scopes.length, 'each scope once'),
});
export type SubmitterPrincipal = z.infer<typeof SubmitterPrincipalSchema>;

const GRANTEE_PATTERN = new RegExp(`^(key:[A-Za-z0-9_-]{1,64}|scope:(${API_KEY_SCOPES.join('|')}))$`);

/**
 * Who may use a secret besides the tenant's admin keys: one key (`key:<key id>`), or every key of
 * the tenant holding a scope (`scope:<scope>`). Using it still needs the `secrets:use` scope.
 */
export const SecretGranteeSchema = z.string().regex(GRANTEE_PATTERN, 'a grantee is key:<key id> or scope:<scope>');
export type SecretGrantee = z.infer<typeof SecretGranteeSchema>;

/** The grantee that names one key. */
export function keyGrantee(keyId: string): SecretGrantee {
  return `key:${keyId}`;
}

/**
 * Whether the key `principal` may use a secret granted to `grantees`: it holds `secrets:use`
 * (admin holds every scope), and it is an admin key, or named, or holds a granted scope. A
 * submission without a principal (before secrets were governed) may use none.
 */
export function mayUseSecret(principal: SubmitterPrincipal | null | undefined, grantees: readonly string[]): boolean {
  if (principal === null || principal === undefined) return false;
  const scopes = principal.scopes;
  if (!scopes.includes('admin') && !scopes.includes('secrets:use')) return false;
  return holdsGrant(principal, grantees);
}

/** Whether the key is an admin key, or named among `grantees`, or holds a scope named there (the right to pass a grant on). */
export function holdsGrant(principal: SubmitterPrincipal, grantees: readonly string[]): boolean {
  if (principal.scopes.includes('admin')) return true;
  return grantees.some((grantee) => {
    if (grantee === keyGrantee(principal.key_id)) return true;
    if (!grantee.startsWith('scope:')) return false;
    const scope = ApiKeyScopeSchema.safeParse(grantee.slice('scope:'.length));
    return scope.success && principal.scopes.includes(scope.data);
  });
}
