import { CairnError } from '@cairn/contracts';
import type { ReplayWebhookDeliveryCommand } from '@cairn/contracts';

/**
 * Whether a `webhook_replay` command may still be carried out at `nowMs`: not past `expires_at`,
 * the time the gateway stopped waiting for the answer (and told its caller E_UNAVAILABLE). A command
 * that sat in the queue while this service was down is then refused, unperformed, rather than
 * replaying a delivery its caller was told had not been: E_CONFLICT (not an outage, so it is answered
 * at once, never retried). Null: go ahead.
 */
export function replayRefusal(command: ReplayWebhookDeliveryCommand, nowMs: number): CairnError | null {
  const expires = Date.parse(command.expires_at);
  if (!Number.isFinite(expires) || nowMs > expires) {
    return new CairnError('E_CONFLICT', `the replay of ${command.delivery_id} was asked for until ${command.expires_at}; the webhooks service took it too late, so nothing was replayed`, {
      deliveryId: command.delivery_id,
    });
  }
  return null;
}

/** The chain a delivery's receipt is on: its event id is `<chain id>:<seq>`. */
export function chainOfEvent(eventId: string): string {
  const colon = eventId.lastIndexOf(':');
  if (colon <= 0) throw new CairnError('E_INTERNAL', `not an event id: ${JSON.stringify(eventId.slice(0, 80))}`);
  return eventId.slice(0, colon);
}
