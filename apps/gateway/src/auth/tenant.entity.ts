import { Check, Column, Entity, PrimaryColumn } from 'typeorm';

/** A tenant (docs/adr/0011): created by the operator; `recorded_at` once its admin chain starts with `admin.tenant_created`. */
@Entity({ name: 'tenants' })
@Check('ck_tenants_id', `id ~ '^[a-z0-9][a-z0-9_-]{0,63}$'`)
export class TenantEntity {
  @PrimaryColumn({ name: 'id', type: 'text', primaryKeyConstraintName: 'pk_tenants' })
  id!: string;

  @Column({ name: 'created_at', type: 'timestamptz', default: () => 'now()' })
  createdAt!: Date;

  @Column({ name: 'created_by', type: 'text', nullable: true })
  createdBy!: string | null;

  @Column({ name: 'recorded_at', type: 'timestamptz', nullable: true })
  recordedAt!: Date | null;
}
