import { Column, Entity, Index, PrimaryColumn } from 'typeorm';
import { bigintAsNumber } from './column-transformers.js';

/**
 * The sandboxes projection: one row per interactive sandbox session (`sbx_…` chain), the
 * `SandboxView` that `evolveSandbox` folds from the chain's receipts. Every column comes from the
 * receipts (times are receipt `ts`, never the clock), so a rebuild reproduces each row exactly.
 */
@Entity({ name: 'sandboxes' })
@Index('ix_sandboxes_tenant_created', ['tenant', 'createdAt', 'sandboxId'])
export class SandboxEntity {
  @PrimaryColumn({ name: 'sandbox_id', type: 'text', primaryKeyConstraintName: 'pk_sandboxes' })
  sandboxId!: string;

  @Column({ name: 'tenant', type: 'text' })
  tenant!: string;

  @Column({ name: 'state', type: 'text' })
  state!: string;

  @Column({ name: 'image', type: 'text', nullable: true })
  image!: string | null;

  /** `sha256:…` of the image the sandbox was created from. */
  @Column({ name: 'image_id', type: 'text', nullable: true })
  imageId!: string | null;

  /** The caps policy granted (snake_case, as in the receipt). */
  @Column({ name: 'caps', type: 'jsonb', nullable: true })
  caps!: Record<string, number> | null;

  /** The network the spec asked for: `"none"` or `{ "egress": [...] }`. */
  @Column({ name: 'network', type: 'jsonb' })
  network!: unknown;

  @Column({ name: 'worker_id', type: 'text', nullable: true })
  workerId!: string | null;

  @Column({ name: 'created_at', type: 'timestamptz' })
  createdAt!: Date;

  @Column({ name: 'ready_at', type: 'timestamptz', nullable: true })
  readyAt!: Date | null;

  /** Null only on a chain that did not start with `sandbox.requested`. */
  @Column({ name: 'expires_at', type: 'timestamptz', nullable: true })
  expiresAt!: Date | null;

  @Column({ name: 'idle_seconds', type: 'integer', nullable: true })
  idleSeconds!: number | null;

  @Column({ name: 'last_activity_at', type: 'timestamptz' })
  lastActivityAt!: Date;

  /** Execs and file reads and writes recorded. */
  @Column({ name: 'operations', type: 'integer' })
  operations!: number;

  @Column({ name: 'destroy_reason', type: 'text', nullable: true })
  destroyReason!: string | null;

  @Column({ name: 'error_code', type: 'text', nullable: true })
  errorCode!: string | null;

  @Column({ name: 'updated_at', type: 'timestamptz' })
  updatedAt!: Date;

  @Column({ name: 'head_seq', type: 'integer' })
  headSeq!: number;

  @Column({ name: 'head_hash', type: 'text' })
  headHash!: string;

  @Column({ name: 'sealed', type: 'boolean' })
  sealed!: boolean;

  /** The stream sequence of the session's last projected receipt. */
  @Column({ name: 'last_stream_seq', type: 'bigint', transformer: bigintAsNumber })
  lastStreamSeq!: number;
}
