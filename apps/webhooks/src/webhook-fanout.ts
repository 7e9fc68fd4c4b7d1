import { filterMatches } from '@cairn/webhooks';
import type { NewDelivery } from '@cairn/webhooks';

/** A tenant's webhook as the fan-out sees it. */
export interface HookFilter {
  id: string;
  events: readonly string[];
  createdAt: Date;
}

/**
 * Which webhooks get a receipt: those of its tenant whose filter matches its type and that were
 * registered before it was recorded (a new webhook does not receive the history before it).
 */
export function deliveriesFor(
  receipt: { tenant: string; type: string; ts: string },
  eventId: string,
  body: string,
  hooks: readonly HookFilter[],
): NewDelivery[] {
  const recordedAt = Date.parse(receipt.ts);
  return hooks
    .filter((hook) => filterMatches(hook.events, receipt.type) && hook.createdAt.getTime() <= recordedAt)
    .map((hook) => ({ webhookId: hook.id, tenant: receipt.tenant, eventId, eventType: receipt.type, body }));
}
