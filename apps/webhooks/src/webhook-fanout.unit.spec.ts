import { describe, expect, it } from 'vitest';
import { deliveriesFor } from './webhook-fanout.js';

const hooks = [
  { id: 'wh_runs', events: ['run.*'], createdAt: new Date('2026-01-01T00:00:00.000Z') },
  { id: 'wh_alerts', events: ['alert.*'], createdAt: new Date('2026-01-01T00:00:00.000Z') },
  { id: 'wh_all_late', events: ['*'], createdAt: new Date('2026-06-01T00:00:00.000Z') },
];

describe('deliveriesFor', () => {
  it('queues one delivery per matching webhook registered before the receipt, with its stable event id and body', () => {
    const receipt = { tenant: 't1', type: 'run.sealed', ts: '2026-03-01T00:00:00.000Z' };
    expect(deliveriesFor(receipt, 'run_x:9', '{"b":1}', hooks)).toEqual([{ webhookId: 'wh_runs', tenant: 't1', eventId: 'run_x:9', eventType: 'run.sealed', body: '{"b":1}' }]);
  });

  it('sends alerts to alert.* subscribers and history to nobody registered after it', () => {
    const alert = { tenant: 't1', type: 'alert.raised', ts: '2026-07-01T00:00:00.000Z' };
    expect(deliveriesFor(alert, 'run_x:5', '{}', hooks).map((d) => d.webhookId)).toEqual(['wh_alerts', 'wh_all_late']);
    const step = { tenant: 't1', type: 'step.completed', ts: '2026-03-01T00:00:00.000Z' };
    expect(deliveriesFor(step, 'run_x:4', '{}', hooks)).toEqual([]);
  });
});
