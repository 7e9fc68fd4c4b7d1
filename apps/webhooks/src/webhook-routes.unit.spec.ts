import { EVENT_TYPES } from '@cairn/contracts';
import { describe, expect, it } from 'vitest';
import { CLOCK_MARGIN_MS, durableFor, isWebhooksDurable, PARKED_TYPE, planRoute, routedTypes, WEBHOOKS_DURABLE } from './webhook-routes.js';

const at = (iso: string) => new Date(iso);

describe('routedTypes', () => {
  it('is the parked type with no webhook, so nothing is delivered', () => {
    expect(routedTypes([])).toEqual([PARKED_TYPE]);
    expect(EVENT_TYPES).not.toContain(PARKED_TYPE);
  });

  it('is the union of the types the filters take, sorted, and every type for *', () => {
    expect(routedTypes([{ events: ['run.sealed'], firstCreatedAt: at('2026-01-01') }, { events: ['alert.*'], firstCreatedAt: at('2026-01-01') }])).toEqual(
      [...EVENT_TYPES.filter((t) => t === 'run.sealed' || t.startsWith('alert.'))].sort(),
    );
    expect(routedTypes([{ events: ['*'], firstCreatedAt: at('2026-01-01') }])).toEqual([...EVENT_TYPES].sort());
  });
});

describe('planRoute', () => {
  const sealed = { events: ['run.sealed'], firstCreatedAt: at('2026-03-01T10:00:00Z') };

  it('goes on with the durable named for the types in force and removes the others', () => {
    const name = durableFor(['run.sealed']);
    const plan = planRoute([sealed], [
      { name, types: new Set(['run.sealed']), nextSeq: 40 },
      { name: durableFor([PARKED_TYPE]), types: new Set([PARKED_TYPE]), nextSeq: 7 },
    ]);
    expect(plan).toEqual({ durable: name, types: new Set(['run.sealed']), create: null, remove: [durableFor([PARKED_TYPE])] });
  });

  it('parks with no webhook: a new parked durable takes only what comes next', () => {
    const old = durableFor(['run.sealed']);
    const plan = planRoute([], [{ name: old, types: new Set(['run.sealed']), nextSeq: 12 }]);
    expect(plan.durable).toBe(`${WEBHOOKS_DURABLE}-parked`);
    expect(plan.create).toEqual({ fromSeq: null, fromTime: null });
    expect(plan.remove).toEqual([old]);
  });

  it('begins a type no durable took at its first registration, less the clock margin', () => {
    const plan = planRoute([sealed], [{ name: durableFor([PARKED_TYPE]), types: new Set([PARKED_TYPE]), nextSeq: 99 }]);
    expect(plan.create).toEqual({ fromSeq: null, fromTime: new Date(sealed.firstCreatedAt.getTime() - CLOCK_MARGIN_MS) });
  });

  it('begins where the durable it replaces had got to for the types it took, and earlier for a new one', () => {
    const failed = { events: ['run.failed'], firstCreatedAt: at('2026-03-02T00:00:00Z') };
    const later = { events: ['run.sealed'], firstCreatedAt: at('2026-03-05T00:00:00Z') };
    const plan = planRoute([later, failed], [{ name: durableFor(['run.sealed']), types: new Set(['run.sealed']), nextSeq: 500 }]);
    expect(plan.types).toEqual(new Set(['run.failed', 'run.sealed']));
    expect(plan.create).toEqual({ fromSeq: 500, fromTime: new Date(failed.firstCreatedAt.getTime() - CLOCK_MARGIN_MS) });
  });

  it('takes the earliest position of every durable that took a type, including the one-durable consumer of earlier releases (every type)', () => {
    const plan = planRoute([sealed], [
      { name: WEBHOOKS_DURABLE, types: null, nextSeq: 30 },
      { name: durableFor(['run.failed', 'run.sealed']), types: new Set(['run.failed', 'run.sealed']), nextSeq: 80 },
    ]);
    expect(plan.create).toEqual({ fromSeq: 30, fromTime: null });
    expect(plan.remove.sort()).toEqual([WEBHOOKS_DURABLE, durableFor(['run.failed', 'run.sealed'])].sort());
  });

  it('names durables by their types alone, and knows its own', () => {
    expect(durableFor(['run.failed', 'run.sealed'])).toBe(durableFor(['run.failed', 'run.sealed']));
    expect(durableFor(['run.sealed'])).not.toBe(durableFor(['run.failed']));
    expect(isWebhooksDurable(durableFor(['run.sealed']))).toBe(true);
    expect(isWebhooksDurable(WEBHOOKS_DURABLE)).toBe(true);
    expect(isWebhooksDurable('cairn-webhooksx')).toBe(false);
    expect(isWebhooksDurable('cairn-policy')).toBe(false);
  });
});
