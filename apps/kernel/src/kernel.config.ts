import { EvidenceLogConfigSchema } from '@cairn/config';
import { resolve } from 'node:path';
import { z } from 'zod';

const MIB = 1024 * 1024;

/** The kernel's whole configuration, read once from the environment at boot. */
export const KernelConfigSchema = EvidenceLogConfigSchema.extend({
  /** The runtime's artifact store (same default: `.cairn/artifacts` under the working directory). */
  CAIRN_ARTIFACT_DIR: z
    .string()
    .min(1)
    .default('.cairn/artifacts')
    .transform((dir) => resolve(dir)),
  /** Largest artifact (a step's stdout, an output file) read; a larger one is recorded as unavailable. */
  CAIRN_ARTIFACT_READ_MAX_BYTES: z.coerce.number().int().min(1).max(1024 * MIB).default(64 * MIB),
  /** All of one run's artifacts together. Keep equal to the verifier's, which recomputes these facts. */
  CAIRN_RUN_READ_MAX_BYTES: z.coerce.number().int().min(1).max(16 * 1024 * MIB).default(256 * MIB),
});
export type KernelConfig = z.infer<typeof KernelConfigSchema>;
