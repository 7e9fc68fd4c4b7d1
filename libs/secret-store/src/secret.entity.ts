import { Check, Column, Entity, PrimaryColumn } from 'typeorm';

/** A row of `secrets` (created by migration, never by synchronize): the sealed value, never the value. */
@Entity({ name: 'secrets' })
@Check('ck_secrets_name', `name ~ '^[A-Z_][A-Z0-9_]{0,63}$'`)
@Check('ck_secrets_key_id', `key_id ~ '^[0-9a-f]{16}$'`)
export class SecretEntity {
  @PrimaryColumn({ name: 'tenant', type: 'text', primaryKeyConstraintName: 'pk_secrets' })
  tenant!: string;

  @PrimaryColumn({ name: 'name', type: 'text', primaryKeyConstraintName: 'pk_secrets' })
  name!: string;

  /** `@cairn/secrets` sealed format: version, key id, IV, GCM tag, ciphertext. */
  @Column({ name: 'sealed', type: 'bytea' })
  sealed!: Buffer;

  /** Which key of the keyring sealed it (rotation re-seals rows under older keys). */
  @Column({ name: 'key_id', type: 'text' })
  keyId!: string;

  /** The actor (`key:<key id>`) that last set the value; null for values set before secrets were governed. */
  @Column({ name: 'set_by', type: 'text', nullable: true })
  setBy!: string | null;

  @Column({ name: 'created_at', type: 'timestamptz', default: () => 'now()' })
  createdAt!: Date;

  @Column({ name: 'updated_at', type: 'timestamptz', default: () => 'now()' })
  updatedAt!: Date;
}
