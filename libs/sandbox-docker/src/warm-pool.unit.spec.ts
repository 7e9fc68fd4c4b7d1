import { describe, expect, it } from 'vitest';
import { WarmPoolBook, warmProfileId, type WarmRecipe } from './warm-pool.js';

const caps = { wallSeconds: 30, memoryMiB: 32, pids: 32, diskMiB: 8, cpus: 0.5 };
const recipe = (poolId: string, lifetimeSeconds = 700): WarmRecipe => ({ workerId: 'w1', imageId: 'sha256:a', caps, poolId, lifetimeSeconds });

describe('warmProfileId', () => {
  it('differs with the image, any cap or the worker, and is a pool label', () => {
    const base = warmProfileId({ workerId: 'w1', imageId: 'sha256:a', caps });
    expect(base).toMatch(/^[0-9a-f]{24}$/);
    expect(warmProfileId({ workerId: 'w1', imageId: 'sha256:a', caps: { ...caps } })).toBe(base);
    expect(warmProfileId({ workerId: 'w1', imageId: 'sha256:b', caps })).not.toBe(base);
    expect(warmProfileId({ workerId: 'w1', imageId: 'sha256:a', caps: { ...caps, cpus: 1 } })).not.toBe(base);
    expect(warmProfileId({ workerId: 'w2', imageId: 'sha256:a', caps })).not.toBe(base);
  });
});

describe('WarmPoolBook', () => {
  it('warms nothing before a run, then each recent profile up to its share and the total, one at a time', () => {
    const book = new WarmPoolBook<string>({ perProfile: 2, total: 3, profiles: 4 });
    expect(book.nextToWarm()).toBeNull();
    book.touch(recipe('a'));
    book.touch(recipe('b'));
    const order: string[] = [];
    for (let next = book.nextToWarm(); next !== null; next = book.nextToWarm()) {
      order.push(next.poolId);
      expect(book.warmed(next.poolId, { item: `${next.poolId}${order.length}`, expiresAt: 1_000_000 })).toBe(true);
    }
    // The most recent profile first; the total bound stops the third.
    expect(order).toEqual(['b', 'b', 'a']);
    expect(book.size).toBe(3);
  });

  it('hands out an entry once, and sets aside those whose lifetime no longer covers the run', () => {
    const book = new WarmPoolBook<string>({ perProfile: 2, total: 8, profiles: 4 });
    book.touch(recipe('a'));
    book.nextToWarm();
    book.warmed('a', { item: 'old', expiresAt: 100_000 });
    book.nextToWarm();
    book.warmed('a', { item: 'new', expiresAt: 1_000_000 });
    expect(book.take('a', 30, 0)).toEqual({ entry: 'old', expired: [] });
    expect(book.take('a', 60, 950_000)).toEqual({ entry: null, expired: ['new'] });
    expect(book.take('a', 1, 0)).toEqual({ entry: null, expired: [] });
    expect(book.take('unknown', 1, 0)).toEqual({ entry: null, expired: [] });
  });

  it('evicts the least recent profile with its sandboxes, and refuses a late one for it', () => {
    const book = new WarmPoolBook<string>({ perProfile: 1, total: 8, profiles: 2 });
    book.touch(recipe('a'));
    book.nextToWarm();
    book.warmed('a', { item: 'a1', expiresAt: 1e9 });
    book.touch(recipe('b'));
    expect(book.nextToWarm()?.poolId).toBe('b');
    expect(book.touch(recipe('c'))).toEqual(['a1']);
    expect(book.holds((item) => item === 'a1')).toBe(false);
    // `b` was being warmed when it stayed; `a` is gone, so a warm one for it is refused.
    expect(book.warmed('a', { item: 'a2', expiresAt: 1e9 })).toBe(false);
  });

  it('is off at size 0, and drain returns every idle sandbox', () => {
    const off = new WarmPoolBook<string>({ perProfile: 0, total: 8, profiles: 4 });
    off.touch(recipe('a'));
    expect(off.enabled).toBe(false);
    expect(off.nextToWarm()).toBeNull();
    const book = new WarmPoolBook<string>({ perProfile: 2, total: 8, profiles: 4 });
    book.touch(recipe('a'));
    book.nextToWarm();
    book.warmed('a', { item: 'x', expiresAt: 1e9 });
    expect(book.drain()).toEqual(['x']);
    expect(book.size).toBe(0);
    expect(book.nextToWarm()).toBeNull();
  });
});
