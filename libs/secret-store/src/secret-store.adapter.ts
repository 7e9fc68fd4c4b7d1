import { CairnError, isCairnError, SecretGranteeSchema, TenantIdSchema } from '@cairn/contracts';
import { checkSecretName, checkSecretValue, lastFour, openSecret, sealedKeyId, sealSecret } from '@cairn/secrets';
import type { ScannedSecret, SecretKeyring } from '@cairn/secrets';
import type { DataSource } from 'typeorm';
import type { LegacySecret } from './secret-catalog.adapter.js';

/** One more key, or a scope, that may use a secret (besides the tenant's admin keys). */
export interface SecretGrant {
  /** `key:<key id>` or `scope:<scope>`. */
  grantee: string;
  /** The actor that granted it. */
  grantedBy: string;
  grantedAt: Date;
}

/** A stored secret as a listing shows it: never the value, only its last four characters. */
export interface SecretListing {
  name: string;
  /** null when the value cannot be opened with this keyring (sealed under a key it lacks, or tampered). */
  lastFour: string | null;
  /** The key that sealed it. */
  keyId: string;
  /** The actor that last set it; null for a value set before secrets were governed. */
  setBy: string | null;
  /** Who may use it besides admin keys, by grantee. */
  grants: SecretGrant[];
  createdAt: Date;
  updatedAt: Date;
}

/** A secret's name and who may use it, as policy reads it: no value, no key needed. */
export interface SecretAccess {
  name: string;
  grantees: string[];
}

export interface PutOptions {
  /** The actor setting the value (`key:<key id>`): recorded, and granted the secret when it is a key. */
  setBy?: string;
  /** More grantees, granted by `setBy` in the same statement. */
  grants?: readonly string[];
}

export interface PutOutcome {
  name: string;
  /** False when a value under this name was replaced. */
  created: boolean;
  lastFour: string;
  createdAt: Date;
  updatedAt: Date;
}

export interface SecretStoreOptions {
  url: string;
  /**
   * The operator's keys. Absent: the store serves names only (policy needs no more); every call
   * that seals or opens a value is then E_INTERNAL.
   */
  keyring?: SecretKeyring | null;
  poolSize?: number;
  applicationName?: string;
}

interface SecretRow {
  name: string;
  sealed: Buffer;
  key_id: string;
  created_at: Date;
  updated_at: Date;
}

function checkGrantees(grantees: readonly string[]): string[] {
  for (const grantee of grantees) {
    if (!SecretGranteeSchema.safeParse(grantee).success) throw new CairnError('E_INPUT', `not a grantee: ${JSON.stringify(grantee.slice(0, 80))} (key:<key id> or scope:<scope>)`, { grantee: grantee.slice(0, 80) });
  }
  return [...new Set(grantees)];
}

function checkTenant(tenant: string): string {
  if (!TenantIdSchema.safeParse(tenant).success) throw new CairnError('E_INPUT', `not a tenant id: ${JSON.stringify(tenant.slice(0, 80))}`);
  return tenant;
}

/**
 * The secret store on PostgreSQL (`secrets`, by its own migration): per tenant and name, each
 * value sealed on its own (`@cairn/secrets`). Write-only to the outside: `put`, `delete`, `names`
 * and `list` (last four characters) are what the API offers; `read` is for the runtime alone,
 * which mounts values into a run's sandbox. Errors never carry a value; a database that does not
 * answer is E_UNAVAILABLE.
 */
export class SecretStore {
  private constructor(
    private readonly dataSource: DataSource,
    private readonly keyring: SecretKeyring | null,
    private readonly owned: boolean,
  ) {}

  /** Connects, brings the table up to date (under the store's migration lock) and returns the store. */
  static async open(options: SecretStoreOptions): Promise<SecretStore> {
    // Loaded on use: TypeORM costs a process ~0.5 s to import, and most never open the store.
    const { createSecretStoreDataSource, runSecretStoreMigrations } = await import('./secret-store-data-source.js');
    const dataSource = createSecretStoreDataSource(options.url, {
      poolSize: Math.max(2, options.poolSize ?? 2),
      ...(options.applicationName === undefined ? {} : { applicationName: options.applicationName }),
    });
    try {
      await dataSource.initialize();
    } catch (error) {
      throw new CairnError('E_UNAVAILABLE', `cannot connect to PostgreSQL for the secret store: ${error instanceof Error ? error.message : String(error)}`);
    }
    try {
      await runSecretStoreMigrations(dataSource);
    } catch (error) {
      await dataSource.destroy().catch(() => undefined);
      throw new CairnError('E_UNAVAILABLE', `cannot migrate the secret store: ${error instanceof Error ? error.message : String(error)}`);
    }
    return new SecretStore(dataSource, options.keyring ?? null, true);
  }

  /** Whether this store was opened with the operator's keys (values can be sealed and opened). */
  get canOpenValues(): boolean {
    return this.keyring !== null;
  }

  async close(): Promise<void> {
    if (this.owned && this.dataSource.isInitialized) await this.dataSource.destroy();
  }

  /**
   * Seals and stores `value` under (tenant, name), replacing an earlier value, and — in the same
   * statement — grants it to the key that set it and to `options.grants` (grants already held stay).
   */
  async put(tenant: string, name: string, value: Uint8Array, options: PutOptions = {}): Promise<PutOutcome> {
    const keyring = this.keys();
    const ref = { tenant: checkTenant(tenant), name: checkSecretName(name) };
    checkSecretValue(value);
    const setBy = options.setBy ?? null;
    const grantees = checkGrantees([...(setBy?.startsWith('key:') === true ? [setBy] : []), ...(options.grants ?? [])]);
    if (grantees.length > 0 && setBy === null) throw new CairnError('E_INTERNAL', `granting ${ref.name} needs the actor that grants it`);
    const sealed = sealSecret(keyring, ref, value);
    // One statement: the grants' foreign key is checked at its end, when the row exists.
    const [row] = await this.query<{ created: boolean; created_at: Date; updated_at: Date }>(
      `WITH stored AS (
         INSERT INTO secrets (tenant, name, sealed, key_id, set_by) VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (tenant, name) DO UPDATE SET sealed = EXCLUDED.sealed, key_id = EXCLUDED.key_id, set_by = EXCLUDED.set_by, updated_at = now()
         RETURNING (xmax = 0) AS created, created_at, updated_at
       ), granted AS (
         INSERT INTO secret_grants (tenant, name, grantee, granted_by)
         SELECT $1, $2, grantee, $5 FROM unnest($6::text[]) AS grantee, stored
         ON CONFLICT (tenant, name, grantee) DO NOTHING
       )
       SELECT created, created_at, updated_at FROM stored`,
      [ref.tenant, ref.name, Buffer.from(sealed), keyring.primary.id, setBy, grantees],
    );
    if (row === undefined) throw new CairnError('E_INTERNAL', `storing secret ${ref.name} returned no row`);
    return { name: ref.name, created: row.created, lastFour: lastFour(value), createdAt: row.created_at, updatedAt: row.updated_at };
  }

  /** Removes a secret; false when the tenant has none of that name. */
  async delete(tenant: string, name: string): Promise<boolean> {
    const rows = await this.query<{ name: string }>('DELETE FROM secrets WHERE tenant = $1 AND name = $2 RETURNING name', [checkTenant(tenant), checkSecretName(name)]);
    return rows.length === 1;
  }

  /** The tenant's secret names, sorted; needs no key (policy's question: does the run ask for one that exists?). */
  async names(tenant: string): Promise<string[]> {
    const rows = await this.query<{ name: string }>('SELECT name FROM secrets WHERE tenant = $1 ORDER BY name', [checkTenant(tenant)]);
    return rows.map((row) => row.name);
  }

  /**
   * Who may use each of the tenant's secrets (`names` only, or all of them), sorted by name; needs
   * no key. A name the store lacks is simply not in the answer.
   */
  async access(tenant: string, names?: readonly string[]): Promise<SecretAccess[]> {
    checkTenant(tenant);
    const wanted = names === undefined ? null : [...new Set(names.map(checkSecretName))];
    if (wanted !== null && wanted.length === 0) return [];
    const rows = await this.query<{ name: string; grantees: string[] }>(
      `SELECT s.name, coalesce(array_agg(g.grantee ORDER BY g.grantee COLLATE "C") FILTER (WHERE g.grantee IS NOT NULL), '{}') AS grantees
       FROM secrets s LEFT JOIN secret_grants g ON g.tenant = s.tenant AND g.name = s.name
       WHERE s.tenant = $1 AND ($2::text[] IS NULL OR s.name = ANY($2::text[]))
       GROUP BY s.name ORDER BY s.name`,
      [tenant, wanted],
    );
    return rows.map((row) => ({ name: row.name, grantees: row.grantees }));
  }

  /** Grants `name` to `grantees` as `grantedBy` (grants held already stay as they were); E_NOT_FOUND without the secret. Answers its grants now. */
  async grant(tenant: string, name: string, grantees: readonly string[], grantedBy: string): Promise<SecretGrant[]> {
    const ref = { tenant: checkTenant(tenant), name: checkSecretName(name) };
    const adding = checkGrantees(grantees);
    const found = await this.query<{ name: string }>(
      `WITH secret AS (SELECT tenant, name FROM secrets WHERE tenant = $1 AND name = $2 FOR UPDATE),
       granted AS (
         INSERT INTO secret_grants (tenant, name, grantee, granted_by)
         SELECT secret.tenant, secret.name, grantee, $4 FROM secret, unnest($3::text[]) AS grantee
         ON CONFLICT (tenant, name, grantee) DO NOTHING
       )
       SELECT name FROM secret`,
      [ref.tenant, ref.name, adding, grantedBy],
    );
    if (found.length === 0) throw new CairnError('E_NOT_FOUND', `no secret ${ref.name}`, { name: ref.name });
    return this.grantsOf(ref.tenant, ref.name);
  }

  /** Takes a grant back; false when `name` had no such grant. */
  async revoke(tenant: string, name: string, grantee: string): Promise<boolean> {
    const [checked] = checkGrantees([grantee]);
    const rows = await this.query<{ grantee: string }>('DELETE FROM secret_grants WHERE tenant = $1 AND name = $2 AND grantee = $3 RETURNING grantee', [
      checkTenant(tenant),
      checkSecretName(name),
      checked,
    ]);
    return rows.length === 1;
  }

  /** The grants of one secret, by grantee. */
  async grantsOf(tenant: string, name: string): Promise<SecretGrant[]> {
    const rows = await this.query<{ grantee: string; granted_by: string; granted_at: Date }>(
      'SELECT grantee, granted_by, granted_at FROM secret_grants WHERE tenant = $1 AND name = $2 ORDER BY grantee COLLATE "C"',
      [checkTenant(tenant), checkSecretName(name)],
    );
    return rows.map((row) => ({ grantee: row.grantee, grantedBy: row.granted_by, grantedAt: row.granted_at }));
  }

  /** The tenant's secrets with the last four characters of each value, who set it and its grants, sorted by name. */
  async list(tenant: string): Promise<SecretListing[]> {
    const keyring = this.keys();
    const rows = await this.query<SecretRow & { set_by: string | null }>('SELECT name, sealed, key_id, set_by, created_at, updated_at FROM secrets WHERE tenant = $1 ORDER BY name', [
      checkTenant(tenant),
    ]);
    const grants = await this.query<{ name: string; grantee: string; granted_by: string; granted_at: Date }>(
      'SELECT name, grantee, granted_by, granted_at FROM secret_grants WHERE tenant = $1 ORDER BY name, grantee COLLATE "C"',
      [tenant],
    );
    return rows.map((row) => {
      let shown: string | null;
      try {
        const value = openSecret(keyring, { tenant, name: row.name }, new Uint8Array(row.sealed));
        shown = lastFour(value);
        value.fill(0);
      } catch (error) {
        if (!isCairnError(error)) throw error;
        shown = null;
      }
      return {
        name: row.name,
        lastFour: shown,
        keyId: row.key_id,
        setBy: row.set_by,
        grants: grants.filter((g) => g.name === row.name).map((g) => ({ grantee: g.grantee, grantedBy: g.granted_by, grantedAt: g.granted_at })),
        createdAt: row.created_at,
        updatedAt: row.updated_at,
      };
    });
  }

  /**
   * The values of `names` for a run of `tenant` (the runtime only). A name the store lacks is
   * E_NOT_FOUND naming it; a value that does not open is E_INTERNAL naming it. The caller should
   * `fill(0)` the values when done with them.
   */
  async read(tenant: string, names: readonly string[]): Promise<ScannedSecret[]> {
    const keyring = this.keys();
    checkTenant(tenant);
    const wanted = [...new Set(names.map(checkSecretName))];
    if (wanted.length === 0) return [];
    const rows = await this.query<SecretRow>('SELECT name, sealed, key_id, created_at, updated_at FROM secrets WHERE tenant = $1 AND name = ANY($2::text[])', [tenant, wanted]);
    const missing = wanted.filter((name) => !rows.some((row) => row.name === name));
    if (missing.length > 0) throw new CairnError('E_NOT_FOUND', `the secret store of tenant ${tenant} has no ${missing.join(', ')}`, { missing });
    return wanted.map((name) => {
      const row = rows.find((r) => r.name === name);
      if (row === undefined) throw new CairnError('E_INTERNAL', `secret ${name} vanished while it was read`);
      return { name, value: openSecret(keyring, { tenant, name }, new Uint8Array(row.sealed)) };
    });
  }

  /**
   * Key rotation: re-seals under the primary key every value sealed under another key of the
   * keyring, one row at a time (a row changed meanwhile is left for the next pass). Returns how many
   * were re-sealed and the names (tenant/name) of values no key of the keyring opens.
   */
  async reseal(): Promise<{ resealed: number; unreadable: string[] }> {
    const keyring = this.keys();
    const rows = await this.query<SecretRow & { tenant: string }>('SELECT tenant, name, sealed, key_id, created_at, updated_at FROM secrets WHERE key_id <> $1', [
      keyring.primary.id,
    ]);
    let resealed = 0;
    const unreadable: string[] = [];
    for (const row of rows) {
      const ref = { tenant: row.tenant, name: row.name };
      let value: Uint8Array;
      try {
        value = openSecret(keyring, ref, new Uint8Array(row.sealed));
      } catch (error) {
        if (!isCairnError(error)) throw error;
        unreadable.push(`${row.tenant}/${row.name}`);
        continue;
      }
      const sealed = sealSecret(keyring, ref, value);
      value.fill(0);
      const updated = await this.query<{ name: string }>(
        'UPDATE secrets SET sealed = $3, key_id = $4 WHERE tenant = $1 AND name = $2 AND key_id = $5 AND sealed = $6 RETURNING name',
        [row.tenant, row.name, Buffer.from(sealed), keyring.primary.id, row.key_id, row.sealed],
      );
      resealed += updated.length;
    }
    return { resealed, unreadable };
  }

  /**
   * The move to the catalog on NATS (ADR 0028): every row, opened with this store's keyring, is
   * handed to `move` (which writes it to the catalog unless a secret of that name is there); then
   * the row and its grants are removed — only if unchanged meanwhile. A row no key of the keyring
   * opens stays, and is named in `unreadable`.
   */
  async drainTo(move: (secret: LegacySecret) => Promise<boolean>): Promise<{ moved: number; skipped: number; unreadable: string[] }> {
    const keyring = this.keys();
    const rows = await this.query<SecretRow & { tenant: string; set_by: string | null }>('SELECT tenant, name, sealed, key_id, set_by, created_at, updated_at FROM secrets ORDER BY tenant, name', []);
    let moved = 0;
    let skipped = 0;
    const unreadable: string[] = [];
    for (const row of rows) {
      let value: Uint8Array;
      try {
        value = openSecret(keyring, { tenant: row.tenant, name: row.name }, new Uint8Array(row.sealed));
      } catch (error) {
        if (!isCairnError(error)) throw error;
        unreadable.push(`${row.tenant}/${row.name}`);
        continue;
      }
      try {
        const written = await move({
          tenant: row.tenant,
          name: row.name,
          value,
          setBy: row.set_by,
          createdAt: row.created_at,
          updatedAt: row.updated_at,
          grants: await this.grantsOf(row.tenant, row.name),
        });
        if (written) moved++;
        else skipped++;
      } finally {
        value.fill(0);
      }
      // Grants go with their secret (ON DELETE CASCADE).
      await this.query('DELETE FROM secrets WHERE tenant = $1 AND name = $2 AND sealed = $3 RETURNING name', [row.tenant, row.name, row.sealed]);
    }
    return { moved, skipped, unreadable };
  }

  /** The id of the key a stored value was sealed under, as its bytes say (tests, diagnostics). */
  async sealedKeyIdOf(tenant: string, name: string): Promise<string | null> {
    const [row] = await this.query<{ sealed: Buffer }>('SELECT sealed FROM secrets WHERE tenant = $1 AND name = $2', [checkTenant(tenant), checkSecretName(name)]);
    return row === undefined ? null : sealedKeyId(new Uint8Array(row.sealed));
  }

  private keys(): SecretKeyring {
    if (this.keyring === null) throw new CairnError('E_INTERNAL', 'this secret store was opened without the secret key file, so it cannot seal or open values');
    return this.keyring;
  }

  private async query<T>(sql: string, parameters: unknown[]): Promise<T[]> {
    const runner = this.dataSource.createQueryRunner();
    try {
      // Structured: an UPDATE or DELETE … RETURNING gives its rows too (plain `query` adds a count).
      const result = await runner.query(sql, parameters, true);
      return result.records as T[];
    } catch (error) {
      // The driver's message may quote a parameter (a sealed value); say only what failed.
      const code = typeof error === 'object' && error !== null && 'code' in error ? String(error.code) : 'unknown';
      throw new CairnError('E_UNAVAILABLE', `the secret store cannot be reached or refused the query (PostgreSQL error ${code})`);
    } finally {
      await runner.release();
    }
  }
}
