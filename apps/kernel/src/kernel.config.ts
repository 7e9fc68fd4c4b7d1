import { ArtifactReadConfigSchema, EvidenceLogConfigSchema, SecretValuesConfigSchema } from '@cairn/config';
import { z } from 'zod';

/** The kernel's whole configuration, read once from the environment at boot. */
export const KernelConfigSchema = EvidenceLogConfigSchema.extend({
  ...ArtifactReadConfigSchema.shape,
  ...SecretValuesConfigSchema.shape,
});
export type KernelConfig = z.infer<typeof KernelConfigSchema>;
