import { Column, Entity, PrimaryColumn, Unique } from 'typeorm';
import { bigintAsNumber } from './column-transformers.js';

/** One row per receipt on the evidence stream, keyed by its stream sequence. Append-only (a trigger). */
@Entity({ name: 'evidence_events' })
@Unique('uq_evidence_events_chain_seq', ['chainId', 'seq'])
export class EvidenceEventEntity {
  @PrimaryColumn({ name: 'stream_seq', type: 'bigint', primaryKeyConstraintName: 'pk_evidence_events', transformer: bigintAsNumber })
  streamSeq!: number;

  /** `run_…` or `sbx_…`; with `seq`, the index that serves chain reads in order. */
  @Column({ name: 'chain_id', type: 'text' })
  chainId!: string;

  @Column({ name: 'seq', type: 'integer' })
  seq!: number;

  @Column({ name: 'type', type: 'text' })
  type!: string;

  @Column({ name: 'tenant', type: 'text' })
  tenant!: string;

  @Column({ name: 'actor', type: 'text' })
  actor!: string;

  @Column({ name: 'ts', type: 'timestamptz' })
  ts!: Date;

  @Column({ name: 'causation', type: 'text', nullable: true })
  causation!: string | null;

  @Column({ name: 'prev_hash', type: 'text' })
  prevHash!: string;

  @Column({ name: 'hash', type: 'text' })
  hash!: string;

  /** The whole receipt, its text exactly as stored on the stream (json, not jsonb: see the migration). */
  @Column({ name: 'receipt', type: 'json' })
  receipt!: Record<string, unknown>;
}
