import { ArtifactReadConfigSchema, EvidenceLogConfigSchema, SecretValuesConfigSchema, TlogConfigSchema } from '@cairn/config';
import { z } from 'zod';

/** The grader's whole configuration, read once from the environment at boot. */
export const GraderConfigSchema = EvidenceLogConfigSchema.extend({
  ...ArtifactReadConfigSchema.shape,
  ...SecretValuesConfigSchema.shape,
  ...TlogConfigSchema.shape,
  /**
   * How long a run that ended with its sandbox not yet torn down on the record (a cancel or a
   * lost lease mid-run) waits for the runtime's `sandbox.destroyed` before it is sealed anyway.
   */
  CAIRN_GRADER_TEARDOWN_GRACE_MS: z.coerce.number().int().min(0).max(600_000).default(10_000),
  /**
   * The deployment's seal signing key (`cairn up` makes it, mode 0600): a path, never the key.
   * Absent, seals are appended unsigned (and `cairn verify --key` refuses them).
   */
  CAIRN_SEAL_KEY_FILE: z.string().min(1).optional(),
  /** How often a checkpoint of the log of seal heads is signed, when the tree grew since the last (and whenever a reader asks). */
  CAIRN_TLOG_CHECKPOINT_INTERVAL_MS: z.coerce.number().int().min(100).max(3_600_000).default(10_000),
  /** Unacked for this long, a receipt is delivered again (after a crash). */
  CAIRN_GRADER_ACK_WAIT_MS: z.coerce.number().int().min(1000).max(600_000).default(30_000),
});
export type GraderConfig = z.infer<typeof GraderConfigSchema>;
