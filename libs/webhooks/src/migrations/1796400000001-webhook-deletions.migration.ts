import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The webhooks the webhooks service has removed, by id: what tells a `webhook_delete` delivered twice
 * (answered `duplicate`) from the delete of a webhook the tenant never had (E_NOT_FOUND), and keeps
 * a `webhook_register` delivered again after the delete from bringing the webhook back. Ids are
 * random (96 bits) and never reused, so a row is a few dozen bytes for good. Hand-written and never
 * edited once committed.
 */
export class WebhookDeletions1796400000001 implements MigrationInterface {
  readonly name = 'WebhookDeletions1796400000001';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE webhook_deletions (
        id text NOT NULL,
        tenant text NOT NULL,
        deleted_at timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT pk_webhook_deletions PRIMARY KEY (id),
        CONSTRAINT ck_webhook_deletions_id CHECK (id ~ '^wh_[0-9a-f]{24}$')
      )`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE webhook_deletions`);
  }
}
