import { ArtifactReadConfigSchema, EvidenceLogConfigSchema, SecretValuesConfigSchema } from '@cairn/config';
import { z } from 'zod';

/** The kernel's whole configuration, read once from the environment at boot. */
export const KernelConfigSchema = EvidenceLogConfigSchema.extend({
  ...ArtifactReadConfigSchema.shape,
  ...SecretValuesConfigSchema.shape,
  /** Unacked for this long, a receipt is delivered again (after a crash, or a process stopped). */
  CAIRN_KERNEL_ACK_WAIT_MS: z.coerce.number().int().min(1000).max(600_000).default(30_000),
});
export type KernelConfig = z.infer<typeof KernelConfigSchema>;
