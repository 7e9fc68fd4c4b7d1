import { Check, Column, Entity, PrimaryColumn, Unique } from 'typeorm';

/** An API key as stored: never the key itself, only its SHA-256 (see the migration). */
@Entity({ name: 'api_keys' })
@Unique('uq_api_keys_prefix', ['prefix'])
@Check('ck_api_keys_sha256', `key_sha256 ~ '^[0-9a-f]{64}$'`)
@Check('ck_api_keys_scopes', `cardinality(scopes) > 0 AND scopes <@ ARRAY['runs:read', 'runs:write', 'approve', 'secrets:write', 'secrets:use', 'admin']::text[]`)
export class ApiKeyEntity {
  @PrimaryColumn({ name: 'id', type: 'text', primaryKeyConstraintName: 'pk_api_keys' })
  id!: string;

  /** The public part of the key (`cairn_<prefix>_…`): how a presented key finds its row. */
  @Column({ name: 'prefix', type: 'text' })
  prefix!: string;

  @Column({ name: 'key_sha256', type: 'text' })
  keySha256!: string;

  @Column({ name: 'tenant', type: 'text' })
  tenant!: string;

  @Column({ name: 'scopes', type: 'text', array: true })
  scopes!: string[];

  @Column({ name: 'created_at', type: 'timestamptz', default: () => 'now()' })
  createdAt!: Date;

  @Column({ name: 'expires_at', type: 'timestamptz', nullable: true })
  expiresAt!: Date | null;

  @Column({ name: 'revoked_at', type: 'timestamptz', nullable: true })
  revokedAt!: Date | null;
}
