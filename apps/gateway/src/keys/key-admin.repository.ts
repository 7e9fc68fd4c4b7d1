import { CairnError } from '@cairn/contracts';
import { KeyedSerialQueue } from '@cairn/evidence-log';
import type { ApiKeyScope } from '@cairn/contracts';
import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import type { EntityManager } from 'typeorm';

/*
 * The SQL of key and tenant administration (docs/adr/0011), beside the guard's read in
 * auth/api-key.store.ts. Every write is idempotent: the service retries each step of an act after a
 * crash without harm. Only hashes and last four characters are ever written here.
 */

export interface KeyRow {
  id: string;
  tenant: string;
  prefix: string;
  last_four: string | null;
  scopes: ApiKeyScope[];
  created_at: Date;
  created_by: string | null;
  expires_at: Date | null;
  revoked_at: Date | null;
  revoked_by: string | null;
  issued_at: Date | null;
  rotations: number;
  rotated_at: Date | null;
  previous_valid_until: Date | null;
  next_sha256: string | null;
  unrecorded: 'created' | 'revoked' | null;
  request_sha256: string | null;
}

export interface TenantRow {
  id: string;
  created_at: Date;
  created_by: string | null;
  recorded_at: Date | null;
}

const KEY_COLUMNS = `id, tenant, prefix, last_four, scopes, created_at, created_by, expires_at, revoked_at, revoked_by, issued_at, rotations, rotated_at,
  previous_valid_until, next_sha256, unrecorded, request_sha256`;

type Queryable = Pick<DataSource | EntityManager, 'query'>;

async function run<T>(db: Queryable, sql: string, parameters: unknown[]): Promise<T[]> {
  try {
    return await db.query<T[]>(sql, parameters);
  } catch (error) {
    throw new CairnError('E_UNAVAILABLE', `the key store cannot be reached: ${error instanceof Error ? error.message : String(error)}`);
  }
}

@Injectable()
export class KeyAdminRepository {
  /** One act at a time per key in this gateway; across gateways the writes' own conditions decide (below). */
  private readonly perKey = new KeyedSerialQueue();

  constructor(private readonly dataSource: DataSource) {}

  /**
   * Runs `work` as the only act on key `id` in this process. No database connection is held while
   * it waits for intake (a held connection per act would starve the pool its own queries need).
   * Two gateways acting on one key at once stay safe: a rotation finishes only with the secret it
   * began (the other is E_CONFLICT, retry), and a second creation under one id fails its insert.
   */
  withKeyLock<T>(id: string, work: () => Promise<T>): Promise<T> {
    return this.perKey.run(id, work);
  }

  async findTenant(id: string): Promise<TenantRow | null> {
    const [row] = await run<TenantRow>(this.dataSource, 'SELECT id, created_at, created_by, recorded_at FROM tenants WHERE id = $1', [id]);
    return row ?? null;
  }

  /** True when the tenant is new. */
  async insertTenant(id: string, createdBy: string): Promise<boolean> {
    const rows = await run<{ id: string }>(this.dataSource, 'INSERT INTO tenants (id, created_by) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING RETURNING id', [id, createdBy]);
    return rows.length === 1;
  }

  async markTenantRecorded(id: string): Promise<void> {
    await run(this.dataSource, 'UPDATE tenants SET recorded_at = now() WHERE id = $1 AND recorded_at IS NULL', [id]);
  }

  listTenants(): Promise<TenantRow[]> {
    return run<TenantRow>(this.dataSource, 'SELECT id, created_at, created_by, recorded_at FROM tenants ORDER BY created_at, id', []);
  }

  unrecordedTenants(limit: number): Promise<TenantRow[]> {
    return run<TenantRow>(this.dataSource, 'SELECT id, created_at, created_by, recorded_at FROM tenants WHERE recorded_at IS NULL ORDER BY created_at LIMIT $1', [limit]);
  }

  /** A key by id; with `tenant`, only that tenant's (another tenant's key is no key). */
  async findKey(id: string, tenant: string | null): Promise<KeyRow | null> {
    const [row] =
      tenant === null
        ? await run<KeyRow>(this.dataSource, `SELECT ${KEY_COLUMNS} FROM api_keys WHERE id = $1`, [id])
        : await run<KeyRow>(this.dataSource, `SELECT ${KEY_COLUMNS} FROM api_keys WHERE id = $1 AND tenant = $2`, [id, tenant]);
    return row ?? null;
  }

  listKeys(tenant: string): Promise<KeyRow[]> {
    return run<KeyRow>(this.dataSource, `SELECT ${KEY_COLUMNS} FROM api_keys WHERE tenant = $1 ORDER BY created_at, id`, [tenant]);
  }

  /** A key that is not a key yet: its hash is kept, and refused, until its creation is recorded. False on a prefix collision. */
  async insertPendingKey(key: {
    id: string;
    prefix: string;
    sha256: string;
    lastFour: string;
    tenant: string;
    scopes: readonly ApiKeyScope[];
    expiresAt: Date | null;
    createdBy: string;
    idempotencySha256: string | null;
    requestSha256: string | null;
  }): Promise<boolean> {
    const rows = await run<{ id: string }>(
      this.dataSource,
      `INSERT INTO api_keys (id, prefix, key_sha256, last_four, tenant, scopes, expires_at, created_by, issued_at, idempotency_sha256, request_sha256)
       VALUES ($1, $2, $3, $4, $5, $6::text[], $7, $8, NULL, $9, $10) ON CONFLICT (prefix) DO NOTHING RETURNING id`,
      [key.id, key.prefix, key.sha256, key.lastFour, key.tenant, key.scopes, key.expiresAt, key.createdBy, key.idempotencySha256, key.requestSha256],
    );
    return rows.length === 1;
  }

  /** A retried creation draws a new secret for the pending key (nobody ever had the first one). */
  async replacePendingSecret(id: string, sha256: string, lastFour: string): Promise<void> {
    await run(this.dataSource, 'UPDATE api_keys SET key_sha256 = $2, last_four = $3 WHERE id = $1 AND issued_at IS NULL', [id, sha256, lastFour]);
  }

  /** Its creation is on the chain: from now on it is a key. */
  async issueKey(id: string): Promise<void> {
    await run(this.dataSource, 'UPDATE api_keys SET issued_at = now() WHERE id = $1 AND issued_at IS NULL', [id]);
  }

  /** A rotation under way: the new secret's hash, not accepted yet. */
  async beginRotation(id: string, sha256: string, lastFour: string): Promise<void> {
    await run(this.dataSource, 'UPDATE api_keys SET next_sha256 = $2, next_last_four = $3 WHERE id = $1', [id, sha256, lastFour]);
  }

  /**
   * Its rotation is on the chain: the new secret replaces the old, which keeps working until
   * `graceUntil` (null: stops now). Only the rotation begun with `sha256`, and only once.
   */
  async finishRotation(id: string, rotation: number, sha256: string, graceUntil: Date | null): Promise<boolean> {
    const rows = await run<{ id: string }>(
      this.dataSource,
      `WITH rotated AS (
         UPDATE api_keys SET
           previous_sha256 = CASE WHEN $4::timestamptz IS NULL THEN NULL ELSE key_sha256 END,
           previous_valid_until = $4::timestamptz,
           key_sha256 = next_sha256, last_four = next_last_four, next_sha256 = NULL, next_last_four = NULL,
           rotations = $2, rotated_at = now()
         WHERE id = $1 AND next_sha256 = $3 AND rotations = $2 - 1 RETURNING id)
       SELECT id FROM rotated`,
      [id, rotation, sha256, graceUntil],
    );
    return rows.length === 1;
  }

  /** Refused from the next request on, and marked for the recorder until its receipt is on the chain. True when newly revoked. */
  async revokeKey(id: string, by: string): Promise<boolean> {
    const rows = await run<{ id: string }>(
      this.dataSource,
      `WITH revoked AS (UPDATE api_keys SET revoked_at = now(), revoked_by = $2, unrecorded = 'revoked' WHERE id = $1 AND revoked_at IS NULL RETURNING id) SELECT id FROM revoked`,
      [id, by],
    );
    return rows.length === 1;
  }

  /** The act is on the chain now. */
  async markRecorded(id: string, act: 'created' | 'revoked'): Promise<void> {
    await run(this.dataSource, 'UPDATE api_keys SET unrecorded = NULL WHERE id = $1 AND unrecorded = $2', [id, act]);
  }

  unrecordedKeys(limit: number): Promise<KeyRow[]> {
    return run<KeyRow>(this.dataSource, `SELECT ${KEY_COLUMNS} FROM api_keys WHERE unrecorded IS NOT NULL ORDER BY created_at LIMIT $1`, [limit]);
  }
}
