import { Column, Entity, Index, PrimaryColumn } from 'typeorm';
import { bigintAsNumber } from './column-transformers.js';

/**
 * The runs projection: one row per `run_…` chain, the `RunView` that `evolveRun` folds from the
 * chain's receipts. Every column comes from the stream (times are receipt `ts`, not wall clock;
 * `trace_id` is the header of the first message), so a rebuild reproduces each row exactly.
 */
@Entity({ name: 'runs' })
@Index('ix_runs_tenant_created', ['tenant', 'createdAt', 'runId'])
@Index('ix_runs_tenant_job', ['tenant', 'job'])
export class RunEntity {
  @PrimaryColumn({ name: 'run_id', type: 'text', primaryKeyConstraintName: 'pk_runs' })
  runId!: string;

  @Column({ name: 'tenant', type: 'text' })
  tenant!: string;

  @Column({ name: 'name', type: 'text', nullable: true })
  name!: string | null;

  @Column({ name: 'state', type: 'text' })
  state!: string;

  @Column({ name: 'error_code', type: 'text', nullable: true })
  errorCode!: string | null;

  @Column({ name: 'verdict', type: 'text', nullable: true })
  verdict!: string | null;

  @Column({ name: 'score', type: 'double precision', nullable: true })
  score!: number | null;

  @Column({ name: 'max_score', type: 'double precision', nullable: true })
  maxScore!: number | null;

  @Column({ name: 'upper_bound', type: 'double precision', nullable: true })
  upperBound!: number | null;

  @Column({ name: 'created_at', type: 'timestamptz' })
  createdAt!: Date;

  @Column({ name: 'updated_at', type: 'timestamptz' })
  updatedAt!: Date;

  @Column({ name: 'last_seq', type: 'integer' })
  lastSeq!: number;

  @Column({ name: 'head_hash', type: 'text' })
  headHash!: string;

  @Column({ name: 'event_count', type: 'integer' })
  eventCount!: number;

  @Column({ name: 'sealed', type: 'boolean' })
  sealed!: boolean;

  /** The stream sequence of the run's last projected receipt. */
  @Column({ name: 'last_stream_seq', type: 'bigint', transformer: bigintAsNumber })
  lastStreamSeq!: number;

  /** The RunSpec's job; policy counts a job's runs and time by it. */
  @Column({ name: 'job', type: 'text', nullable: true })
  job!: string | null;

  /** CPUs policy granted; with the sandbox's times, the tenant's CPU-seconds. */
  @Column({ name: 'cpus', type: 'double precision', nullable: true })
  cpus!: number | null;

  @Column({ name: 'started_at', type: 'timestamptz', nullable: true })
  startedAt!: Date | null;

  @Column({ name: 'ended_at', type: 'timestamptz', nullable: true })
  endedAt!: Date | null;

  /**
   * The W3C trace id of the run's trace (ADR 0031), from the `traceparent` header of its
   * `run.submitted` message: a header, not the receipt, and still from the stream, so a rebuild
   * gives it back. Null when the run was submitted untraced.
   */
  @Column({ name: 'trace_id', type: 'text', nullable: true })
  traceId!: string | null;

  /** The run's current attempt has been placed (ADR 0035): a `run.scheduled` since the last `run.retried`. */
  @Column({ name: 'placed', type: 'boolean', default: false })
  placed!: boolean;
}
