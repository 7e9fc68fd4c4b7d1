import { Column, Entity, PrimaryColumn } from 'typeorm';
import { bigintAsNumber } from './column-transformers.js';

/** A stream message the projector could not project, kept with why, so it is seen and never blocks. */
@Entity({ name: 'poison_events' })
export class PoisonEventEntity {
  @PrimaryColumn({ name: 'stream_seq', type: 'bigint', primaryKeyConstraintName: 'pk_poison_events', transformer: bigintAsNumber })
  streamSeq!: number;

  @Column({ name: 'subject', type: 'text' })
  subject!: string;

  /** The chain named by the subject, when the subject names one. */
  @Column({ name: 'chain_id', type: 'text', nullable: true })
  chainId!: string | null;

  @Column({ name: 'reason', type: 'text' })
  reason!: string;

  @Column({ name: 'detail', type: 'text' })
  detail!: string;

  /** The message body, cut to `POISON_RAW_LIMIT` bytes; `raw_length` is the full size. */
  @Column({ name: 'raw', type: 'bytea' })
  raw!: Buffer;

  @Column({ name: 'raw_length', type: 'integer' })
  rawLength!: number;

  /** Wall-clock bookkeeping: when this row was written (live or by a rebuild). */
  @Column({ name: 'recorded_at', type: 'timestamptz', default: () => 'now()' })
  recordedAt!: Date;
}
