import { EvidenceLogConfigSchema } from '@cairn/config';
import { resolve } from 'node:path';
import { z } from 'zod';

const MIB = 1024 * 1024;

/** The grader's whole configuration, read once from the environment at boot. */
export const GraderConfigSchema = EvidenceLogConfigSchema.extend({
  /** The runtime's artifact store (same default: `.cairn/artifacts` under the working directory). */
  CAIRN_ARTIFACT_DIR: z
    .string()
    .min(1)
    .default('.cairn/artifacts')
    .transform((dir) => resolve(dir)),
  /** Largest artifact read for a rubric; a larger one leaves its criteria unscored. */
  CAIRN_ARTIFACT_READ_MAX_BYTES: z.coerce.number().int().min(1).max(1024 * MIB).default(64 * MIB),
  /** All of one run's artifacts together. */
  CAIRN_RUN_READ_MAX_BYTES: z.coerce.number().int().min(1).max(16 * 1024 * MIB).default(256 * MIB),
  /**
   * How long a run that ended with its sandbox not yet torn down on the record (a cancel or a
   * lost lease mid-run) waits for the runtime's `sandbox.destroyed` before it is sealed anyway.
   */
  CAIRN_GRADER_TEARDOWN_GRACE_MS: z.coerce.number().int().min(0).max(600_000).default(10_000),
  /** Unacked for this long, a receipt is delivered again (after a crash). */
  CAIRN_GRADER_ACK_WAIT_MS: z.coerce.number().int().min(1000).max(600_000).default(30_000),
});
export type GraderConfig = z.infer<typeof GraderConfigSchema>;
