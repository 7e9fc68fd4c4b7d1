import { DatabaseConfigSchema, EvidenceLogConfigSchema } from '@cairn/config';
import { OperationalConfigSchema } from '@cairn/operational';
import { z } from 'zod';

/** Intake's whole configuration, read once from the environment at boot. */
export const IntakeConfigSchema = EvidenceLogConfigSchema.extend(DatabaseConfigSchema.shape)
  .extend(OperationalConfigSchema.shape)
  .extend({
    /** Commands handled at once. */
    CAIRN_INTAKE_CONCURRENCY: z.coerce.number().int().min(1).max(256).default(8),
    /** Durable consumer names on the command stream (one per verb). */
    /** A sandbox session's time to live and idle limit when its spec names none (policy bounds both). */
    CAIRN_SANDBOX_DEFAULT_TTL_SECONDS: z.coerce.number().int().min(1).max(86_400).default(3600),
    CAIRN_SANDBOX_DEFAULT_IDLE_SECONDS: z.coerce.number().int().min(1).max(86_400).default(600),
    CAIRN_INTAKE_DURABLE_PREFIX: z.string().regex(/^[A-Za-z0-9_-]{1,48}$/, 'a consumer name prefix ([A-Za-z0-9_-], at most 48)').default('cairn-intake'),
  });
export type IntakeConfig = z.infer<typeof IntakeConfigSchema>;
