import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * `evidence_events.receipt` becomes json: the receipt's text exactly as the stream stores it
 * (canonical JSON, so a row's hash can be checked against its own text), and about 40% less
 * work for the server per projected receipt than jsonb, which parses each into its binary form
 * (measured by the rebuild bench). Nothing queries inside receipts; a query that needs to can
 * cast (`receipt::jsonb`). Rows written before this keep jsonb's normalized text until a rebuild.
 */
export class ReceiptAsJson1796007606211 implements MigrationInterface {
  readonly name = 'ReceiptAsJson1796007606211';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE evidence_events ALTER COLUMN receipt TYPE json USING receipt::json`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    // Every projected receipt passed the unstorable_json check, so jsonb takes each of them.
    await queryRunner.query(`ALTER TABLE evidence_events ALTER COLUMN receipt TYPE jsonb USING receipt::jsonb`);
  }
}
