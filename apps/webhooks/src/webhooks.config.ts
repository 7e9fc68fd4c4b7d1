import { DatabaseConfigSchema, EvidenceLogConfigSchema } from '@cairn/config';
import { OperationalConfigSchema } from '@cairn/operational';
import { WebhookGuardConfigSchema } from '@cairn/webhooks';
import { z } from 'zod';

/** The webhooks service's whole configuration, read once from the environment at boot. */
export const WebhooksConfigSchema = EvidenceLogConfigSchema.extend(DatabaseConfigSchema.shape)
  // The command stream: registrations, deletions and replays are asked for by command (CAIRN_COMMAND_STREAM, CAIRN_COMMAND_SUBJECT_PREFIX).
  .extend(OperationalConfigSchema.shape)
  .extend(WebhookGuardConfigSchema.shape)
  .extend({
    /** The operator's key file: signing secrets are stored sealed under it (`cairn up` passes its path). */
    CAIRN_SECRETS_KEY_FILE: z.string().min(1, 'the secret key file that seals webhook signing secrets'),
    /**
     * How often the dispatcher looks for due deliveries it was not told of (another instance's
     * replay or lapsed lease); what this process queues or retries is sent at once.
     */
    CAIRN_WEBHOOKS_POLL_MS: z.coerce.number().int().min(20).max(60_000).default(1000),
    /** Deliveries in flight at once. */
    CAIRN_WEBHOOKS_CONCURRENCY: z.coerce.number().int().min(1).max(256).default(8),
    /** One attempt's limit: connect, send, and the receiver's answer. */
    CAIRN_WEBHOOKS_TIMEOUT_MS: z.coerce.number().int().min(100).max(120_000).default(10_000),
    /** Attempts in all before a delivery is dead-lettered. */
    CAIRN_WEBHOOKS_MAX_ATTEMPTS: z.coerce.number().int().min(1).max(50).default(8),
    /** The wait after a first failure; it doubles with each further failure … */
    CAIRN_WEBHOOKS_RETRY_BASE_MS: z.coerce.number().int().min(10).max(3_600_000).default(1_000),
    /** … up to this. */
    CAIRN_WEBHOOKS_RETRY_MAX_MS: z.coerce.number().int().min(10).max(86_400_000).default(3_600_000),
    /**
     * How often the service looks at the webhooks in force to route its consumer to their types
     * (ADR 0024). A webhook registered in between still gets every receipt recorded after it: the
     * new consumer begins before its registration. Only how soon its first deliveries go waits on this.
     */
    CAIRN_WEBHOOKS_ROUTES_POLL_MS: z.coerce.number().int().min(50).max(60_000).default(1000),
    /** Unacked for this long, a receipt is delivered to the reactor again (after a crash). */
    CAIRN_WEBHOOKS_ACK_WAIT_MS: z.coerce.number().int().min(1000).max(600_000).default(30_000),
  });
export type WebhooksConfig = z.infer<typeof WebhooksConfigSchema>;
