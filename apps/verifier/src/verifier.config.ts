import { EvidenceLogConfigSchema } from '@cairn/config';
import { resolve } from 'node:path';
import { z } from 'zod';

const MIB = 1024 * 1024;

/** The verifier's whole configuration, read once from the environment at boot. */
export const VerifierConfigSchema = EvidenceLogConfigSchema.extend({
  /** The runtime's artifact store (same default: `.cairn/artifacts` under the working directory). */
  CAIRN_ARTIFACT_DIR: z
    .string()
    .min(1)
    .default('.cairn/artifacts')
    .transform((dir) => resolve(dir)),
  /** Largest artifact re-read and re-hashed; a larger one counts as not available. Keep equal to the kernel's. */
  CAIRN_ARTIFACT_READ_MAX_BYTES: z.coerce.number().int().min(1).max(1024 * MIB).default(64 * MIB),
  /** All of one run's artifacts together. Keep equal to the kernel's, whose facts are recomputed here. */
  CAIRN_RUN_READ_MAX_BYTES: z.coerce.number().int().min(1).max(16 * 1024 * MIB).default(256 * MIB),
});
export type VerifierConfig = z.infer<typeof VerifierConfigSchema>;
