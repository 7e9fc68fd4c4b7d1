import { z } from 'zod';

/** The operator's SSRF switch, read the same way by the gateway (registration) and the webhooks service (delivery). */
export const WebhookGuardConfigSchema = z.object({
  /** `1`: webhook URLs may point at loopback, private and link-local addresses (never at metadata endpoints). */
  CAIRN_WEBHOOKS_ALLOW_PRIVATE: z
    .enum(['0', '1', 'true', 'false'], 'CAIRN_WEBHOOKS_ALLOW_PRIVATE is 0 or 1')
    .default('0')
    .transform((value) => value === '1' || value === 'true'),
});
export type WebhookGuardConfig = z.infer<typeof WebhookGuardConfigSchema>;
