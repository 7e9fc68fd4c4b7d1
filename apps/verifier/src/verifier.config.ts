import { ArtifactReadConfigSchema, EvidenceLogConfigSchema, SecretValuesConfigSchema } from '@cairn/config';
import { z } from 'zod';

/** The verifier's whole configuration, read once from the environment at boot. */
export const VerifierConfigSchema = EvidenceLogConfigSchema.extend({
  ...ArtifactReadConfigSchema.shape,
  ...SecretValuesConfigSchema.shape,
});
export type VerifierConfig = z.infer<typeof VerifierConfigSchema>;
