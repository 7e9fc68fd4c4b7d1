import { DatabaseConfigSchema, EvidenceLogConfigSchema, SecretCatalogConfigSchema } from '@cairn/config';
import { OperationalConfigSchema } from '@cairn/operational';
import { DEFAULT_STALE_AFTER_MS } from '@cairn/scheduling';
import { z } from 'zod';

/** The policy service's whole configuration, read once from the environment at boot. */
export const PolicyServiceConfigSchema = EvidenceLogConfigSchema.extend(OperationalConfigSchema.shape).extend(DatabaseConfigSchema.shape).extend(SecretCatalogConfigSchema.shape).extend({
  /** A JSON policy document; absent means the built-in DEFAULT_POLICY. */
  CAIRN_POLICY_FILE: z.string().min(1).optional(),
  /** A worker silent for longer than this does not count for the local image digests. */
  CAIRN_WORKER_STALE_AFTER_MS: z.coerce.number().int().min(1000).max(3_600_000).default(DEFAULT_STALE_AFTER_MS),
  /**
   * How long a decision that counts budgets waits for policy's usage ledger (its own fold of the log)
   * to reach the run; past it the decision is retried later (the run stays SUBMITTED). Only jobs and
   * tenant quotas wait.
   */
  CAIRN_POLICY_USAGE_WAIT_MS: z.coerce.number().int().min(100).max(120_000).default(10_000),
});
export type PolicyServiceConfig = z.infer<typeof PolicyServiceConfigSchema>;
