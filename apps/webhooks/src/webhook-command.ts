import { CairnError } from '@cairn/contracts';
import type { DeleteWebhookCommand, RegisterWebhookCommand } from '@cairn/contracts';

/** The webhook commands besides the replay: a registration and a deletion, asked for by the gateway. */
export type WebhookCommandVerb = 'webhook_register' | 'webhook_delete';

const WHAT: Record<WebhookCommandVerb, string> = { webhook_register: 'registration', webhook_delete: 'deletion' };

/**
 * Whether a `webhook_register` or `webhook_delete` command may still be carried out at `nowMs`: not
 * past `expires_at`, the time the gateway stopped waiting for the answer (and told its caller
 * E_UNAVAILABLE). A command that sat in the queue while this service was down is then refused,
 * unperformed, rather than registering (or deleting) a webhook its caller was told had not been:
 * E_CONFLICT (not an outage, so it is answered at once, never retried). Null: go ahead.
 */
export function webhookCommandRefusal(verb: WebhookCommandVerb, command: RegisterWebhookCommand | DeleteWebhookCommand, nowMs: number): CairnError | null {
  const expires = Date.parse(command.expires_at);
  if (!Number.isFinite(expires) || nowMs > expires) {
    return new CairnError(
      'E_CONFLICT',
      `the ${WHAT[verb]} of webhook ${command.webhook_id} was asked for until ${command.expires_at}; the webhooks service took it too late, so nothing was done`,
      { id: command.webhook_id },
    );
  }
  return null;
}

/**
 * What a `webhook_delete` the store answered comes to: a webhook removed now, one removed before
 * (the command delivered twice: `duplicate`), or none the tenant ever had (E_NOT_FOUND).
 */
export function deleteOutcome(command: DeleteWebhookCommand, removed: 'deleted' | 'duplicate' | 'not_found'): { run_id: string; duplicate: boolean } {
  if (removed === 'not_found') throw new CairnError('E_NOT_FOUND', `no webhook ${command.webhook_id}`, { id: command.webhook_id });
  return { run_id: command.webhook_id, duplicate: removed === 'duplicate' };
}
