import 'reflect-metadata';
import { checkSchemaMatchesEntities } from '@cairn/persistence';
import { createTestDatabase } from '@cairn/testing';
import type { TestDatabase } from '@cairn/testing';
import type { DataSource } from 'typeorm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DataSource as TypeOrmDataSource } from 'typeorm';
import { createGatewayDataSource, GATEWAY_MIGRATIONS, GATEWAY_MIGRATIONS_TABLE, runGatewayMigrations } from '../gateway-data-source.js';
import { apiKeySha256, generateApiKey, generateApiKeyFor } from './api-key.codec.js';
import { authenticateApiKey, createApiKey, ensureApiKey, revokeApiKey } from './api-key.store.js';

/* The key store itself on a real PostgreSQL: what the guard accepts, and the bootstrap key's registration. */

let db: TestDatabase;
let ds: DataSource;

beforeAll(async () => {
  db = await createTestDatabase('gateway_key_store');
  // A key and a revoked key from before the admin chains, then the migration that brings them in.
  const before = new TypeOrmDataSource({ type: 'postgres', url: db.url, migrations: GATEWAY_MIGRATIONS.slice(0, 3), migrationsTableName: GATEWAY_MIGRATIONS_TABLE, migrationsTransactionMode: 'all' });
  await before.initialize();
  await before.runMigrations();
  for (const [id, prefix, revoked] of [['old-1', 'oldkeyaa', false], ['old-2', 'oldkeybb', true]] as const) {
    await before.query(`INSERT INTO api_keys (id, prefix, key_sha256, tenant, scopes, revoked_at) VALUES ($1, $2, $3, 'legacy', ARRAY['runs:read'], $4)`, [id, prefix, 'a'.repeat(64), revoked ? new Date() : null]);
  }
  await before.destroy();
  ds = createGatewayDataSource(db.url, 2);
  await ds.initialize();
  await runGatewayMigrations(ds);
});

afterAll(async () => {
  await ds?.destroy();
  await db?.drop();
});

async function code(presented: string, now?: Date): Promise<string> {
  try {
    await authenticateApiKey(ds, presented, now);
    return 'ok';
  } catch (error) {
    return (error as { code?: string }).code ?? 'thrown';
  }
}

describe('the API key store', () => {
  it('migrates to a schema that matches its entities, keeping the tenants of keys that existed', async () => {
    expect(await checkSchemaMatchesEntities(ds)).toEqual({ matches: true, differences: [] });
    expect(await ds.query<{ id: string }[]>(`SELECT id FROM tenants WHERE id IN ('default', 'legacy') AND recorded_at IS NULL ORDER BY id`)).toEqual([{ id: 'default' }, { id: 'legacy' }]);
    // Keys from before: issued, and marked for the recorder (creation, or revocation too).
    const legacy = await ds.query<{ id: string; unrecorded: string; issued: boolean }[]>(`SELECT id, unrecorded, issued_at IS NOT NULL AS issued FROM api_keys WHERE tenant = 'legacy' ORDER BY id`);
    expect(legacy).toEqual([
      { id: 'old-1', unrecorded: 'created', issued: true },
      { id: 'old-2', unrecorded: 'revoked', issued: true },
    ]);
  });

  it('migrates down and up again', async () => {
    const scopesCheck = async () =>
      (await ds.query<{ def: string }[]>(`SELECT pg_get_constraintdef(oid) AS def FROM pg_constraint WHERE conname = 'ck_api_keys_scopes'`))[0]?.def ?? '';
    expect(await scopesCheck()).toContain('metrics:read');
    // The metrics:read scope, then the key administration columns.
    await ds.undoLastMigration({ transaction: 'all' });
    expect(await scopesCheck()).not.toContain('metrics:read');
    expect(await scopesCheck()).toContain('secrets:use');
    await ds.undoLastMigration({ transaction: 'all' });
    const columns = await ds.query<{ column_name: string }[]>(`SELECT column_name FROM information_schema.columns WHERE table_name = 'api_keys' ORDER BY column_name`);
    expect(columns.map((c) => c.column_name)).toEqual(['created_at', 'expires_at', 'id', 'key_sha256', 'prefix', 'revoked_at', 'scopes', 'tenant']);
    expect(await ds.query(`SELECT 1 FROM information_schema.tables WHERE table_name = 'tenants'`)).toEqual([]);
    await runGatewayMigrations(ds);
    expect(await checkSchemaMatchesEntities(ds)).toEqual({ matches: true, differences: [] });
  });

  it('accepts an issued key until it expires or is revoked; a pending one never', async () => {
    const key = await createApiKey(ds, { tenant: 'acme', scopes: ['runs:read'], expiresAt: new Date('2030-01-01T00:00:00.000Z') });
    expect(await authenticateApiKey(ds, key.key)).toMatchObject({ keyId: key.id, tenant: 'acme', scopes: ['runs:read'] });
    expect(await code(key.key, new Date('2030-01-01T00:00:00.000Z'))).toBe('E_UNAUTHORIZED');
    await ds.query('UPDATE api_keys SET issued_at = NULL WHERE id = $1', [key.id]);
    expect(await code(key.key)).toBe('E_UNAUTHORIZED');
    await ds.query('UPDATE api_keys SET issued_at = now() WHERE id = $1', [key.id]);
    expect(await revokeApiKey(ds, key.id)).toBe(true);
    expect(await revokeApiKey(ds, key.id)).toBe(false);
    expect(await code(key.key)).toBe('E_UNAUTHORIZED');
  });

  it("accepts a rotated key's previous secret only while its grace lasts, and a next secret never before it is swapped in", async () => {
    const key = await createApiKey(ds, { tenant: 'acme', scopes: ['runs:read'] });
    const next = generateApiKeyFor(key.prefix).key;
    await ds.query('UPDATE api_keys SET next_sha256 = $2 WHERE id = $1', [key.id, apiKeySha256(next)]);
    expect(await code(next)).toBe('E_UNAUTHORIZED');
    const graceUntil = new Date(Date.now() + 60_000);
    await ds.query('UPDATE api_keys SET previous_sha256 = key_sha256, previous_valid_until = $2, key_sha256 = next_sha256, next_sha256 = NULL WHERE id = $1', [key.id, graceUntil]);
    expect(await code(next)).toBe('ok');
    expect(await code(key.key)).toBe('ok');
    expect(await code(key.key, new Date(graceUntil.getTime() + 1))).toBe('E_UNAUTHORIZED');
  });

  it('registers a bootstrap key once, marked for its creation to be recorded; never an earlier secret of it once rotated', async () => {
    const boot = generateApiKey().key;
    const first = await ensureApiKey(ds, boot, { tenant: 'default', scopes: ['admin'] });
    expect(first).toMatchObject({ created: true, superseded: false });
    const [row] = await ds.query<{ unrecorded: string; created_by: string }[]>('SELECT unrecorded, created_by FROM api_keys WHERE id = $1', [first.id]);
    expect(row).toEqual({ unrecorded: 'created', created_by: 'gateway' });
    expect(await ensureApiKey(ds, boot, { tenant: 'default', scopes: ['admin'] })).toEqual({ id: first.id, created: false, superseded: false });

    // Another key under its prefix that is no rotation of it: refused, as before.
    const clash = generateApiKeyFor(boot.slice(6, 14)).key;
    await expect(ensureApiKey(ds, clash, { tenant: 'default', scopes: ['admin'] })).rejects.toMatchObject({ code: 'E_CONFLICT' });

    // Rotated: the earlier secret finds the row and is not registered again.
    const rotated = generateApiKeyFor(boot.slice(6, 14)).key;
    await ds.query('UPDATE api_keys SET key_sha256 = $2, rotations = 1 WHERE id = $1', [first.id, apiKeySha256(rotated)]);
    expect(await ensureApiKey(ds, boot, { tenant: 'default', scopes: ['admin'] })).toEqual({ id: first.id, created: false, superseded: true });
    expect(await code(boot)).toBe('E_UNAUTHORIZED');
    expect(await code(rotated)).toBe('ok');
    const [count] = await ds.query<{ n: number }[]>('SELECT count(*)::int AS n FROM api_keys WHERE prefix = $1', [boot.slice(6, 14)]);
    expect(count?.n).toBe(1);
  });
});
