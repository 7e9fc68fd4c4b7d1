import { CairnError } from '@cairn/contracts';
import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';

export interface IdempotencyClaim {
  tenant: string;
  keySha256: string;
  bodySha256: string;
  /** The run id to record if this key is new. */
  runId: string;
}

export type ClaimOutcome =
  | { kind: 'created'; runId: string }
  | { kind: 'existing'; runId: string }
  | { kind: 'mismatch'; runId: string };

/** Intake's idempotency keys in `intake_idempotency`: a key names one run for ever. */
@Injectable()
export class IdempotencyRepository {
  constructor(private readonly dataSource: DataSource) {}

  /**
   * Records `runId` for the key, or finds the run the key already names: the same body gives that
   * run (`existing`), another body `mismatch`. One statement decides, so concurrent claims of one
   * key agree on the run.
   */
  async claim(claim: IdempotencyClaim): Promise<ClaimOutcome> {
    const inserted = await this.query<{ run_id: string }>(
      `INSERT INTO intake_idempotency (tenant, key_sha256, body_sha256, run_id) VALUES ($1, $2, $3, $4)
       ON CONFLICT (tenant, key_sha256) DO NOTHING RETURNING run_id`,
      [claim.tenant, claim.keySha256, claim.bodySha256, claim.runId],
    );
    const created = inserted[0];
    if (created !== undefined) return { kind: 'created', runId: created.run_id };
    const [existing] = await this.query<{ run_id: string; body_sha256: string }>(
      'SELECT run_id, body_sha256 FROM intake_idempotency WHERE tenant = $1 AND key_sha256 = $2',
      [claim.tenant, claim.keySha256],
    );
    if (existing === undefined) throw new CairnError('E_UNAVAILABLE', 'an idempotency key vanished between insert and read; retry');
    return existing.body_sha256 === claim.bodySha256 ? { kind: 'existing', runId: existing.run_id } : { kind: 'mismatch', runId: existing.run_id };
  }

  /**
   * Points the key at `runId` instead of `previousRunId` — only if it still names that one — and
   * returns the run the key names now (a concurrent retry may have moved it first).
   */
  async reclaim(claim: IdempotencyClaim, previousRunId: string): Promise<string> {
    const [moved] = await this.query<{ run_id: string }>(
      // A SELECT over the UPDATE: a plain UPDATE … RETURNING answers [rows, count] through TypeORM's query().
      'WITH moved AS (UPDATE intake_idempotency SET run_id = $4 WHERE tenant = $1 AND key_sha256 = $2 AND body_sha256 = $3 AND run_id = $5 RETURNING run_id) SELECT run_id FROM moved',
      [claim.tenant, claim.keySha256, claim.bodySha256, claim.runId, previousRunId],
    );
    if (moved !== undefined) return moved.run_id;
    const [now] = await this.query<{ run_id: string }>('SELECT run_id FROM intake_idempotency WHERE tenant = $1 AND key_sha256 = $2', [claim.tenant, claim.keySha256]);
    if (now === undefined) throw new CairnError('E_UNAVAILABLE', 'an idempotency key vanished while it was reclaimed; retry');
    return now.run_id;
  }

  private async query<T>(sql: string, parameters: unknown[]): Promise<T[]> {
    try {
      return await this.dataSource.query<T[]>(sql, parameters);
    } catch (error) {
      // The database being away is an outage: the command is retried, never answered wrongly.
      throw new CairnError('E_UNAVAILABLE', `idempotency store: ${error instanceof Error ? error.message : String(error)}`);
    }
  }
}
