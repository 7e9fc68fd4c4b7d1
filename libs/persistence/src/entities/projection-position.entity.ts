import { Column, Entity, PrimaryColumn } from 'typeorm';
import { bigintAsNumber } from './column-transformers.js';

/** How far a projection has read its stream; written in the same transaction as the rows it covers. */
@Entity({ name: 'projection_positions' })
export class ProjectionPositionEntity {
  @PrimaryColumn({ name: 'name', type: 'text', primaryKeyConstraintName: 'pk_projection_positions' })
  name!: string;

  @Column({ name: 'stream', type: 'text' })
  stream!: string;

  @Column({ name: 'last_stream_seq', type: 'bigint', transformer: bigintAsNumber })
  lastStreamSeq!: number;

  /** Wall-clock bookkeeping: when the position last moved. */
  @Column({ name: 'updated_at', type: 'timestamptz', default: () => 'now()' })
  updatedAt!: Date;
}
