import { describe, expect, it } from 'vitest';
import { deleteOutcome, webhookCommandRefusal } from './webhook-command.js';

const webhookId = `wh_${'a'.repeat(24)}`;
const del = (expiresAt: string) => ({ tenant: 'acme', requested_by: 'key:k1', webhook_id: webhookId, expires_at: expiresAt });
const register = (expiresAt: string) => ({
  ...del(expiresAt),
  url: 'https://93.184.215.14/hook',
  events: ['run.*'],
  description: null,
  secret_sealed: 'AAAA',
  key_id: '0123456789abcdef',
});

describe('webhookCommandRefusal', () => {
  const now = Date.parse('2026-12-02T12:00:00.000Z');

  it('given a command still within the time its sender waits, then it goes ahead', () => {
    expect(webhookCommandRefusal('webhook_register', register('2026-12-02T12:00:05.000Z'), now)).toBeNull();
    expect(webhookCommandRefusal('webhook_delete', del('2026-12-02T12:00:00.000Z'), now)).toBeNull();
  });

  it('given a command taken after its sender gave up (the service was down), then it is refused E_CONFLICT naming the webhook, and nothing is done', () => {
    const refused = webhookCommandRefusal('webhook_register', register('2026-12-02T11:59:59.999Z'), now);
    expect(refused).toMatchObject({ code: 'E_CONFLICT', details: { id: webhookId } });
    expect(refused?.message).toMatch(/registration of webhook wh_a+ .*too late/);
    expect(webhookCommandRefusal('webhook_delete', del('2026-12-02T11:00:00.000Z'), now)?.message).toMatch(/deletion of webhook/);
  });

  it('given an expiry that does not parse, then it is refused (fail closed)', () => {
    expect(webhookCommandRefusal('webhook_delete', del('not a time'), now)).toMatchObject({ code: 'E_CONFLICT' });
  });
});

describe('deleteOutcome', () => {
  it('answers the webhook id, duplicate when it was removed before, and E_NOT_FOUND for one the tenant never had', () => {
    expect(deleteOutcome(del('x'), 'deleted')).toEqual({ run_id: webhookId, duplicate: false });
    expect(deleteOutcome(del('x'), 'duplicate')).toEqual({ run_id: webhookId, duplicate: true });
    expect(() => deleteOutcome(del('x'), 'not_found')).toThrow(expect.objectContaining({ code: 'E_NOT_FOUND', details: { id: webhookId } }));
  });
});
