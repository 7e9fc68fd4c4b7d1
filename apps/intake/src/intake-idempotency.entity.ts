import { Column, Entity, PrimaryColumn } from 'typeorm';

/** A row of `intake_idempotency` (created by migration, never by synchronize). */
@Entity({ name: 'intake_idempotency' })
export class IntakeIdempotencyEntity {
  @PrimaryColumn({ name: 'tenant', type: 'text', primaryKeyConstraintName: 'pk_intake_idempotency' })
  tenant!: string;

  @PrimaryColumn({ name: 'key_sha256', type: 'text', primaryKeyConstraintName: 'pk_intake_idempotency' })
  keySha256!: string;

  @Column({ name: 'body_sha256', type: 'text' })
  bodySha256!: string;

  @Column({ name: 'run_id', type: 'text' })
  runId!: string;

  @Column({ name: 'created_at', type: 'timestamptz', default: () => 'now()' })
  createdAt!: Date;
}
