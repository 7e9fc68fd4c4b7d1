import { CairnError, isCairnError, TenantIdSchema } from '@cairn/contracts';
import { checkSecretName, checkSecretValue, lastFour, openSecret, sealedKeyId, sealSecret } from '@cairn/secrets';
import type { ScannedSecret, SecretKeyring } from '@cairn/secrets';
import type { DataSource } from 'typeorm';

/** A stored secret as a listing shows it: never the value, only its last four characters. */
export interface SecretListing {
  name: string;
  /** null when the value cannot be opened with this keyring (sealed under a key it lacks, or tampered). */
  lastFour: string | null;
  /** The key that sealed it. */
  keyId: string;
  createdAt: Date;
  updatedAt: Date;
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

  /** Seals and stores `value` under (tenant, name), replacing an earlier value. */
  async put(tenant: string, name: string, value: Uint8Array): Promise<PutOutcome> {
    const keyring = this.keys();
    const ref = { tenant: checkTenant(tenant), name: checkSecretName(name) };
    checkSecretValue(value);
    const sealed = sealSecret(keyring, ref, value);
    const [row] = await this.query<{ created: boolean; created_at: Date; updated_at: Date }>(
      `INSERT INTO secrets (tenant, name, sealed, key_id) VALUES ($1, $2, $3, $4)
       ON CONFLICT (tenant, name) DO UPDATE SET sealed = EXCLUDED.sealed, key_id = EXCLUDED.key_id, updated_at = now()
       RETURNING (xmax = 0) AS created, created_at, updated_at`,
      [ref.tenant, ref.name, Buffer.from(sealed), keyring.primary.id],
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

  /** The tenant's secrets with the last four characters of each value, sorted by name. */
  async list(tenant: string): Promise<SecretListing[]> {
    const keyring = this.keys();
    const rows = await this.query<SecretRow>('SELECT name, sealed, key_id, created_at, updated_at FROM secrets WHERE tenant = $1 ORDER BY name', [
      checkTenant(tenant),
    ]);
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
      return { name: row.name, lastFour: shown, keyId: row.key_id, createdAt: row.created_at, updatedAt: row.updated_at };
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
