import { CairnError } from '@cairn/contracts';
import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';

/**
 * Which key ids are live keys of a tenant, so a grant cannot name a key that does not exist (or
 * another tenant's): a typo would otherwise grant nothing, silently, or wait for a key that
 * never comes. Read-only on the API key table.
 */
@Injectable()
export class TenantKeysRepository {
  constructor(private readonly dataSource: DataSource) {}

  /** The ids of `ids` that are keys of `tenant`, neither revoked nor expired. */
  async live(tenant: string, ids: readonly string[]): Promise<Set<string>> {
    if (ids.length === 0) return new Set();
    try {
      const rows = await this.dataSource.query<{ id: string }[]>(
        'SELECT id FROM api_keys WHERE tenant = $1 AND id = ANY($2::text[]) AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())',
        [tenant, [...ids]],
      );
      return new Set(rows.map((row) => row.id));
    } catch (error) {
      throw new CairnError('E_UNAVAILABLE', `the API key store cannot be read: ${error instanceof Error ? error.message : String(error)}`);
    }
  }
}
