import { describe, expect, it } from 'vitest';
import { chainOfEvent, replayRefusal } from './replay-command.js';

const command = (expiresAt: string) => ({
  tenant: 'acme',
  requested_by: 'key:k1',
  webhook_id: `wh_${'a'.repeat(24)}`,
  delivery_id: `dlv_${'b'.repeat(24)}`,
  replay_id: `dlv_${'c'.repeat(24)}`,
  expires_at: expiresAt,
});

describe('replayRefusal', () => {
  const now = Date.parse('2026-12-02T12:00:00.000Z');

  it('given a command still within the time its sender waits, then it goes ahead', () => {
    expect(replayRefusal(command('2026-12-02T12:00:05.000Z'), now)).toBeNull();
    expect(replayRefusal(command('2026-12-02T12:00:00.000Z'), now)).toBeNull();
  });

  it('given a command taken after its sender gave up (the service was down), then it is refused E_CONFLICT (answered, not retried) and nothing is replayed', () => {
    expect(replayRefusal(command('2026-12-02T11:59:59.999Z'), now)).toMatchObject({ code: 'E_CONFLICT' });
  });

  it('given an expiry that does not parse, then it is refused (fail closed)', () => {
    expect(replayRefusal(command('not a time'), now)).toMatchObject({ code: 'E_CONFLICT' });
  });
});

describe('chainOfEvent', () => {
  it('gives the chain of an event id, and refuses what is not one', () => {
    expect(chainOfEvent('run_01abc:12')).toBe('run_01abc');
    expect(chainOfEvent('adm_acme:1')).toBe('adm_acme');
    expect(() => chainOfEvent('nocolon')).toThrow(/not an event id/);
  });
});
