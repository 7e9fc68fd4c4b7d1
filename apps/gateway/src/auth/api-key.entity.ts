import { Check, Column, Entity, Index, PrimaryColumn, Unique } from 'typeorm';

/** An API key as stored: never the key itself, only its SHA-256 (see the migration). */
@Entity({ name: 'api_keys' })
@Unique('uq_api_keys_prefix', ['prefix'])
@Unique('uq_api_keys_idempotency', ['tenant', 'idempotencySha256'])
@Index('ix_api_keys_tenant_created', ['tenant', 'createdAt'])
@Check('ck_api_keys_next_sha256', `next_sha256 IS NULL OR next_sha256 ~ '^[0-9a-f]{64}$'`)
@Check('ck_api_keys_previous_sha256', `previous_sha256 IS NULL OR previous_sha256 ~ '^[0-9a-f]{64}$'`)
@Check('ck_api_keys_unrecorded', `unrecorded IS NULL OR unrecorded IN ('created', 'revoked')`)
@Check('ck_api_keys_rotations', `rotations >= 0`)
@Check('ck_api_keys_sha256', `key_sha256 ~ '^[0-9a-f]{64}$'`)
@Check('ck_api_keys_scopes', `cardinality(scopes) > 0 AND scopes <@ ARRAY['runs:read', 'runs:write', 'approve', 'secrets:write', 'secrets:use', 'metrics:read', 'admin']::text[]`)
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

  /** When its `admin.key_created` was on the admin chain; null: pending, never accepted (docs/adr/0011). */
  @Column({ name: 'issued_at', type: 'timestamptz', nullable: true, default: () => 'now()' })
  issuedAt!: Date | null;

  @Column({ name: 'created_by', type: 'text', nullable: true })
  createdBy!: string | null;

  /** The key's last four characters, so a person can tell keys apart; never more of it. */
  @Column({ name: 'last_four', type: 'text', nullable: true })
  lastFour!: string | null;

  @Column({ name: 'rotations', type: 'integer', default: 0 })
  rotations!: number;

  @Column({ name: 'rotated_at', type: 'timestamptz', nullable: true })
  rotatedAt!: Date | null;

  /** A rotation under way: the new secret's hash, accepted only once its receipt is recorded. */
  @Column({ name: 'next_sha256', type: 'text', nullable: true })
  nextSha256!: string | null;

  @Column({ name: 'next_last_four', type: 'text', nullable: true })
  nextLastFour!: string | null;

  /** The secret a rotation replaced, accepted until `previous_valid_until` (its grace). */
  @Column({ name: 'previous_sha256', type: 'text', nullable: true })
  previousSha256!: string | null;

  @Column({ name: 'previous_valid_until', type: 'timestamptz', nullable: true })
  previousValidUntil!: Date | null;

  @Column({ name: 'revoked_by', type: 'text', nullable: true })
  revokedBy!: string | null;

  /** An act the table holds and the admin chain does not yet: `created` (the bootstrap key) or `revoked`. */
  @Column({ name: 'unrecorded', type: 'text', nullable: true })
  unrecorded!: string | null;

  /** sha256 of the creating request's Idempotency-Key (per tenant), and of its body. */
  @Column({ name: 'idempotency_sha256', type: 'text', nullable: true })
  idempotencySha256!: string | null;

  @Column({ name: 'request_sha256', type: 'text', nullable: true })
  requestSha256!: string | null;
}
