import { EvidenceLogConfigSchema } from '@cairn/config';
import { OperationalConfigSchema } from '@cairn/operational';
import { DEFAULT_STALE_AFTER_MS } from '@cairn/scheduling';
import { z } from 'zod';

/** The scheduler's whole configuration, read once from the environment at boot. */
export const SchedulerConfigSchema = EvidenceLogConfigSchema.extend(OperationalConfigSchema.shape).extend({
  /** How long a lease lasts unless the runtime renews it. */
  CAIRN_LEASE_TTL_MS: z.coerce.number().int().min(500).max(3_600_000).default(15_000),
  /** How often the lease store is scanned for expired leases. */
  CAIRN_LEASE_SCAN_INTERVAL_MS: z.coerce.number().int().min(100).max(60_000).default(1000),
  /** A worker silent for longer than this gets no new runs. */
  CAIRN_WORKER_STALE_AFTER_MS: z.coerce.number().int().min(1000).max(3_600_000).default(DEFAULT_STALE_AFTER_MS),
  /** Unacked for this long, a receipt is delivered again (after a crash). */
  CAIRN_SCHEDULER_ACK_WAIT_MS: z.coerce.number().int().min(1000).max(600_000).default(30_000),
  /** How often pending approvals are checked for a deadline that has passed. */
  CAIRN_APPROVAL_SCAN_INTERVAL_MS: z.coerce.number().int().min(100).max(60_000).default(1000),
  /** How often the placement queue is planned again besides whenever a run or sandbox ends (room may free otherwise: a heartbeat, a lease lapsing). */
  CAIRN_QUEUE_SCAN_INTERVAL_MS: z.coerce.number().int().min(50).max(60_000).default(500),
  /** The KV bucket of approval deadlines; absent: `<CAIRN_LEASES_BUCKET>_approvals`, isolated wherever the leases are. */
  CAIRN_APPROVALS_BUCKET: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,64}$/, 'a KV bucket name ([A-Za-z0-9_-], at most 64)')
    .optional(),
});
export type SchedulerConfig = z.infer<typeof SchedulerConfigSchema>;
