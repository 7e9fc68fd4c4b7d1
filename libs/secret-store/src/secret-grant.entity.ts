import { Check, Column, Entity, JoinColumn, ManyToOne, PrimaryColumn } from 'typeorm';
import { SecretEntity } from './secret.entity.js';

/** A row of `secret_grants` (created by migration): one more key, or a scope, that may use a secret. */
@Entity({ name: 'secret_grants' })
@Check('ck_secret_grants_grantee', `grantee ~ '^(key:[A-Za-z0-9_-]{1,64}|scope:[a-z]+(:[a-z]+)?)$'`)
export class SecretGrantEntity {
  @PrimaryColumn({ name: 'tenant', type: 'text', primaryKeyConstraintName: 'pk_secret_grants' })
  tenant!: string;

  @PrimaryColumn({ name: 'name', type: 'text', primaryKeyConstraintName: 'pk_secret_grants' })
  name!: string;

  /** `key:<key id>` or `scope:<scope>`. */
  @PrimaryColumn({ name: 'grantee', type: 'text', primaryKeyConstraintName: 'pk_secret_grants' })
  grantee!: string;

  /** The actor (`key:<key id>`) that granted it. */
  @Column({ name: 'granted_by', type: 'text' })
  grantedBy!: string;

  @Column({ name: 'granted_at', type: 'timestamptz', default: () => 'now()' })
  grantedAt!: Date;

  @ManyToOne(() => SecretEntity, { onDelete: 'CASCADE' })
  @JoinColumn([
    { name: 'tenant', referencedColumnName: 'tenant', foreignKeyConstraintName: 'fk_secret_grants_secret' },
    { name: 'name', referencedColumnName: 'name', foreignKeyConstraintName: 'fk_secret_grants_secret' },
  ])
  secret?: SecretEntity;
}
