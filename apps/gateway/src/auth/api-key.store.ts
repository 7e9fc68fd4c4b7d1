import { randomUUID } from 'node:crypto';
import { ApiKeyScopeSchema, CairnError, inputIssues, TenantIdSchema } from '@cairn/contracts';
import type { ApiKeyScope } from '@cairn/contracts';
import type { DataSource } from 'typeorm';
import { z } from 'zod';
import { apiKeyLastFour, apiKeyPrefix, apiKeySha256, generateApiKey, sameDigest } from './api-key.codec.js';

/** Who a request acts as, once its key is verified. */
export interface Principal {
  keyId: string;
  tenant: string;
  scopes: ApiKeyScope[];
}

export interface CreateApiKeyOptions {
  tenant: string;
  scopes: readonly ApiKeyScope[];
  /** Absent: the key does not expire (it can still be revoked). */
  expiresAt?: Date;
}

export interface CreatedApiKey {
  id: string;
  /** The whole key: shown once to whoever asked for it, never stored, never logged. */
  key: string;
  prefix: string;
}

const CreateApiKeyOptionsSchema = z.strictObject({
  tenant: TenantIdSchema,
  scopes: z
    .array(ApiKeyScopeSchema)
    .min(1)
    .refine((scopes) => new Set(scopes).size === scopes.length, 'each scope once'),
  expiresAt: z.date().refine((date) => !Number.isNaN(date.getTime()), 'a valid date').optional(),
});

/** Who creates the operator's bootstrap key (CAIRN_API_KEY), as its `admin.key_created` names it. */
export const BOOTSTRAP_ACTOR = 'gateway';

/** Compared against when no row has the prefix, so an unknown prefix costs what a wrong secret does. */
const NO_KEY_DIGEST = 'f'.repeat(64);
const PREFIX_ATTEMPTS = 5;

async function query<T>(dataSource: DataSource, sql: string, parameters: unknown[]): Promise<T[]> {
  try {
    return await dataSource.query<T[]>(sql, parameters);
  } catch (error) {
    throw new CairnError('E_UNAVAILABLE', `the API key store cannot be read: ${error instanceof Error ? error.message : String(error)}`);
  }
}

async function insertKey(
  dataSource: DataSource,
  id: string,
  key: string,
  prefix: string,
  options: z.infer<typeof CreateApiKeyOptionsSchema>,
  recording: { createdBy: string | null; unrecorded: 'created' | null } = { createdBy: null, unrecorded: null },
): Promise<boolean> {
  const rows = await query<{ id: string }>(
    dataSource,
    `INSERT INTO api_keys (id, prefix, key_sha256, tenant, scopes, expires_at, last_four, created_by, unrecorded) VALUES ($1, $2, $3, $4, $5::text[], $6, $7, $8, $9)
     ON CONFLICT (prefix) DO NOTHING RETURNING id`,
    [id, prefix, apiKeySha256(key), options.tenant, options.scopes, options.expiresAt ?? null, apiKeyLastFour(key), recording.createdBy, recording.unrecorded],
  );
  return rows.length === 1;
}

function checkedOptions(options: CreateApiKeyOptions): z.infer<typeof CreateApiKeyOptionsSchema> {
  const parsed = CreateApiKeyOptionsSchema.safeParse(options);
  if (parsed.success) return parsed.data;
  const issues = inputIssues(parsed.error);
  throw new CairnError('E_INPUT', `invalid API key request: ${issues.map((i) => `${i.path}: ${i.message}`).join('; ')}`, { issues });
}

/**
 * Mints a key for `tenant` with `scopes` and stores only its hash (the table must exist:
 * `migrateGateway(url)`). The returned `key` is the only copy there will ever be. The store's own
 * tests use it; the product mints keys through the admin routes (keys/), which record them.
 */
export async function createApiKey(dataSource: DataSource, options: CreateApiKeyOptions): Promise<CreatedApiKey> {
  const checked = checkedOptions(options);
  // A 40-bit prefix can collide, very rarely: draw again.
  for (let attempt = 1; attempt <= PREFIX_ATTEMPTS; attempt++) {
    const { key, prefix } = generateApiKey();
    const id = randomUUID();
    if (await insertKey(dataSource, id, key, prefix, checked)) return { id, key, prefix };
  }
  throw new CairnError('E_CONFLICT', `no free API key prefix after ${PREFIX_ATTEMPTS} attempts`);
}

/** What `ensureApiKey` found: the key stored now, stored before, or an earlier secret of a rotated key (not registered). */
export interface EnsuredApiKey {
  id: string;
  created: boolean;
  /** True when `key` is an earlier secret of key `id`, which has been rotated since: it is not registered again. */
  superseded: boolean;
}

/**
 * Makes sure `key` (an operator's bootstrap key) is stored, with `scopes` for `tenant` (and the
 * tenant too); a key already stored is left as it is (a revocation stands). A new key is marked
 * `unrecorded: created`, so the gateway's recorder puts its creation on the admin chain. A
 * rotation keeps a key's prefix, so the earlier secret of a rotated key finds its row: it is
 * reported `superseded` and never registered again. Another key under the same prefix is E_CONFLICT.
 */
export async function ensureApiKey(dataSource: DataSource, key: string, options: CreateApiKeyOptions): Promise<EnsuredApiKey> {
  const checked = checkedOptions(options);
  const prefix = apiKeyPrefix(key);
  if (prefix === null) throw new CairnError('E_INPUT', 'the bootstrap API key is not of the form cairn_<8-char prefix>_<secret>');
  await query(dataSource, 'INSERT INTO tenants (id, created_by) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING', [checked.tenant, BOOTSTRAP_ACTOR]);
  const id = randomUUID();
  if (await insertKey(dataSource, id, key, prefix, checked, { createdBy: BOOTSTRAP_ACTOR, unrecorded: 'created' })) return { id, created: true, superseded: false };
  const [row] = await query<{ id: string; key_sha256: string; rotations: number }>(dataSource, 'SELECT id, key_sha256, rotations FROM api_keys WHERE prefix = $1', [prefix]);
  if (row === undefined) throw new CairnError('E_UNAVAILABLE', 'the bootstrap API key vanished between insert and read; retry');
  if (!sameDigest(row.key_sha256, apiKeySha256(key))) {
    if (row.rotations > 0) return { id: row.id, created: false, superseded: true };
    throw new CairnError('E_CONFLICT', `another API key already uses the prefix ${prefix}: choose another bootstrap key`, { prefix });
  }
  return { id: row.id, created: false, superseded: false };
}


/** Revokes a key by id from now on; false when there is no such key or it was revoked before. */
export async function revokeApiKey(dataSource: DataSource, id: string): Promise<boolean> {
  // A SELECT over the UPDATE: a plain UPDATE … RETURNING answers [rows, count] through TypeORM's query().
  const rows = await query<{ id: string }>(dataSource, 'WITH revoked AS (UPDATE api_keys SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL RETURNING id) SELECT id FROM revoked', [id]);
  return rows.length === 1;
}

interface KeyRow {
  id: string;
  key_sha256: string;
  previous_sha256: string | null;
  previous_valid_until: Date | null;
  tenant: string;
  scopes: string[];
  expires_at: Date | null;
  revoked_at: Date | null;
  issued_at: Date | null;
}

/**
 * The principal of a presented key: found by its prefix, its hash compared in constant time
 * (with the secret a rotation replaced, while its grace lasts), expiry and revocation honoured,
 * read from the table on every request (no cache outlives a revocation). A key whose creation is
 * not yet on the admin chain (pending) is no key. Every failure is E_UNAUTHORIZED; the key never
 * appears in a message.
 */
export async function authenticateApiKey(dataSource: DataSource, presented: string | null, now: Date = new Date()): Promise<Principal> {
  if (presented === null) throw new CairnError('E_UNAUTHORIZED', 'an API key is required: Authorization: Bearer <key>');
  const prefix = apiKeyPrefix(presented);
  const rows =
    prefix === null
      ? []
      : await query<KeyRow>(
          dataSource,
          'SELECT id, key_sha256, previous_sha256, previous_valid_until, tenant, scopes, expires_at, revoked_at, issued_at FROM api_keys WHERE prefix = $1',
          [prefix],
        );
  const row = rows[0];
  const digest = apiKeySha256(presented);
  const current = sameDigest(row?.key_sha256 ?? NO_KEY_DIGEST, digest);
  const inGrace = row?.previous_valid_until != null && row.previous_valid_until.getTime() > now.getTime();
  const previous = sameDigest(row?.previous_sha256 ?? NO_KEY_DIGEST, digest) && inGrace;
  if (row === undefined || (!current && !previous) || row.issued_at === null) throw new CairnError('E_UNAUTHORIZED', 'invalid API key');
  if (row.revoked_at !== null) throw new CairnError('E_UNAUTHORIZED', 'this API key has been revoked');
  if (row.expires_at !== null && row.expires_at.getTime() <= now.getTime()) throw new CairnError('E_UNAUTHORIZED', 'this API key has expired');
  const scopes = row.scopes.flatMap((scope) => {
    const parsed = ApiKeyScopeSchema.safeParse(scope);
    return parsed.success ? [parsed.data] : [];
  });
  return { keyId: row.id, tenant: row.tenant, scopes };
}
