import { DatabaseConfigSchema, EvidenceLogConfigSchema } from '@cairn/config';
import { z } from 'zod';

/** The projector's whole configuration, read once from the environment at boot. */
export const ProjectorConfigSchema = EvidenceLogConfigSchema.extend(DatabaseConfigSchema.shape).extend({
  /** The durable consumer's name: one per projections database. */
  CAIRN_PROJECTOR_DURABLE: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'a consumer name ([A-Za-z0-9_-], at most 64)').default('cairn-projector'),
  /** Most messages applied in one transaction. */
  CAIRN_PROJECTOR_BATCH_SIZE: z.coerce.number().int().min(1).max(10_000).default(500),
  /**
   * How long the projector waits, once a receipt has arrived, for more to join it in one
   * transaction (fewer transactions while a run's or a sandbox's receipts come one hop after
   * another; each is projected at most this much later). 0 writes each batch at once.
   */
  CAIRN_PROJECTOR_LINGER_MS: z.coerce.number().int().min(0).max(1000).default(10),
  /** How long a delivered message may stay unacknowledged before the server redelivers it. */
  CAIRN_PROJECTOR_ACK_WAIT_MS: z.coerce.number().int().min(1000).max(3_600_000).default(10_000),
});
export type ProjectorConfig = z.infer<typeof ProjectorConfigSchema>;

/** Injection token of the configuration. */
export const PROJECTOR_CONFIG = Symbol('PROJECTOR_CONFIG');
