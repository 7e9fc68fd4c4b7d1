import { CairnError, EVENT_BODY_SCHEMAS } from '@cairn/contracts';
import type { EventType } from '@cairn/contracts';

/**
 * Validates `fields` as the body of `type` before anything is appended (the log checks only the
 * envelope): intake never puts a malformed event on a chain. seq and ts are the log's; any value
 * of the right shape stands in for them here.
 */
export function checkEventFields(type: EventType, envelope: { chainId: string; tenant: string; actor: string; causation: string | null }, fields: Record<string, unknown>): void {
  const probe = {
    v: 1,
    seq: 1,
    run_id: envelope.chainId,
    tenant: envelope.tenant,
    type,
    actor: envelope.actor,
    ts: '2000-01-01T00:00:00.000Z',
    causation: envelope.causation,
    ...fields,
  };
  const parsed = EVENT_BODY_SCHEMAS[type].safeParse(probe);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`);
    throw new CairnError('E_INTERNAL', `intake built an invalid ${type}: ${issues.join('; ')}`, { type, issues });
  }
}
